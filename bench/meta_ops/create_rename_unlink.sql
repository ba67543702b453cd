-- one file's life in the client's own directory: create, rename, unlink (3 procedure calls).
-- Inode ids come from a range above the counter, as a mount uses ids it reserved with alloc_ids.
\set n random(1, 1000000000000)
\set dir :dir_base + :client_id
SELECT errno FROM jfs.mknod(:dir, convert_to('f' || :n, 'UTF8'), 1, 420, 0, 0, 0, NULL, 1099511627776 + :n);
SELECT errno FROM jfs.rename(:dir, convert_to('f' || :n, 'UTF8'), :dir, convert_to('g' || :n, 'UTF8'));
SELECT errno FROM jfs.unlink(:dir, convert_to('g' || :n, 'UTF8'));
