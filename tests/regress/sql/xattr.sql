-- extended attributes: XATTR_CREATE (1), XATTR_REPLACE (2), list, remove
\ir tests/regress/fresh_volume.sql
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT jfs.setxattr(:f, 'user.a', 'one');
SELECT jfs.setxattr(:f, 'user.b', '\x00ff00'::bytea);
SELECT jfs.setxattr(:f, 'user.empty', '');
SELECT * FROM jfs.getxattr(:f, 'user.a');
SELECT * FROM jfs.getxattr(:f, 'user.b');
SELECT * FROM jfs.getxattr(:f, 'user.empty');
SELECT errno FROM jfs.getxattr(:f, 'user.none');
SELECT errno FROM jfs.getxattr(999, 'user.a');
-- create refuses an existing name, replace a missing one; plain set does either
SELECT jfs.setxattr(:f, 'user.a', 'two', 1);
SELECT jfs.setxattr(:f, 'user.c', 'three', 2);
SELECT jfs.setxattr(:f, 'user.a', 'two', 2);
SELECT jfs.setxattr(:f, 'user.c', 'three', 1);
SELECT jfs.setxattr(:f, 'user.c', 'four');
SELECT convert_from(value, 'UTF8') FROM jfs.getxattr(:f, 'user.a');
SELECT convert_from(value, 'UTF8') FROM jfs.getxattr(:f, 'user.c');
SELECT errno, array_length(names, 1) AS n, (SELECT array_agg(convert_from(x, 'UTF8')) FROM unnest(names) x) AS names
  FROM jfs.listxattr(:f);
-- a listing says which nodes have xattrs: f does, g does not; readdirplus
-- gives the same page without them
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0) \gset
SELECT errno, convert_from(name, 'UTF8') AS name, inode = :f AS is_f, xattrs FROM jfs.readdirplus_xattrs(1) ORDER BY cookie;
SELECT count(*) AS same FROM jfs.readdirplus(1) r JOIN jfs.readdirplus_xattrs(1) x USING (cookie, name, inode, mode, ctime);
SELECT errno, name, xattrs FROM jfs.readdirplus_xattrs(:g);
-- readdirplus keeps the page's order, its limit and its error row
SELECT (SELECT array_agg(cookie) FROM jfs.readdirplus(1)) = (SELECT array_agg(cookie ORDER BY cookie) FROM jfs.readdirplus(1)) AS in_order;
SELECT count(*) AS one FROM jfs.readdirplus(1, 0, 1);
SELECT errno, name FROM jfs.readdirplus(:g);
SELECT errno FROM jfs.unlink(1, 'g');
-- limits: name 1..255 bytes, value up to 64 KiB; both flags at once is EINVAL
SELECT jfs.setxattr(:f, '', 'x');
SELECT jfs.setxattr(:f, convert_to(repeat('n', 256), 'UTF8'), 'x');
SELECT jfs.setxattr(:f, convert_to(repeat('n', 255), 'UTF8'), 'x');
SELECT jfs.setxattr(:f, 'user.big', convert_to(repeat('v', 65537), 'UTF8'));
SELECT jfs.setxattr(:f, 'user.max', convert_to(repeat('v', 65536), 'UTF8'));
SELECT jfs.setxattr(:f, 'user.x', 'x', 3);
SELECT jfs.setxattr(999, 'user.x', 'x');
-- remove
SELECT jfs.removexattr(:f, 'user.a');
SELECT jfs.removexattr(:f, 'user.a');
SELECT jfs.removexattr(999, 'user.a');
SELECT errno, array_length(names, 1) FROM jfs.listxattr(:f);
SELECT errno, names FROM jfs.listxattr(999);
-- directories carry xattrs too, and they go with the node
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 0, 0) \gset
SELECT jfs.setxattr(:d, 'user.dir', 'yes');
SELECT errno FROM jfs.rmdir(1, 'd');
SELECT errno FROM jfs.unlink(1, 'f');
SELECT count(*) AS xattrs FROM jfs.xattr;
SELECT * FROM jfs.fsck();
