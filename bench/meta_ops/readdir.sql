-- one page of 100 entries (readdirplus, as the kernel asks for) from a random place in a 10,000-entry directory
\set c random(:first_cookie, :first_cookie + 9900)
SELECT count(*) FROM jfs.readdirplus(:lookup_dir, :c, 100);
