-- mknod of every type, lookup, getattr, symlink/readlink, times and nlink of the parent
\ir tests/regress/fresh_volume.sql
UPDATE jfs.setting SET skip_dir_mtime_ns = 0;  -- exact POSIX parent times for this test
-- one of each type: file, dir, symlink, fifo, block dev, char dev, socket
SELECT errno, inode, type, mode, uid, gid, nlink, length, rdev, parent FROM jfs.mknod(1, 'file', 1, 420, 1000, 1000);
SELECT errno, inode, type, mode, uid, gid, nlink, length, rdev, parent FROM jfs.mknod(1, 'dir', 2, 493, 1000, 1000);
SELECT errno, inode, type, mode, nlink, length FROM jfs.symlink(1, 'link', 'file', 1000, 1000);
SELECT (SELECT inode FROM jfs.lookup(1, 'file')) AS file, (SELECT inode FROM jfs.lookup(1, 'dir')) AS dir,
       (SELECT inode FROM jfs.lookup(1, 'link')) AS link \gset
SELECT errno, inode, type, mode, nlink FROM jfs.mknod(1, 'fifo', 4, 420, 0, 0);
SELECT errno, inode, type, rdev FROM jfs.mknod(1, 'blk', 5, 432, 0, 0, 2049);
SELECT errno, inode, type, rdev FROM jfs.mknod(1, 'chr', 6, 432, 0, 0, 259);
SELECT errno, inode, type FROM jfs.mknod(1, 'sock', 7, 493, 0, 0);
-- mode keeps only the 07777 bits
SELECT errno, mode FROM jfs.mknod(1, 'modebits', 1, 33261, 0, 0);
SELECT * FROM jfs.readlink(:link);
SELECT errno FROM jfs.readlink(:file);
SELECT errno FROM jfs.readlink(999);
-- mkdir adds a link to its parent; a subdirectory records its parent
SELECT nlink FROM jfs.getattr(1);
SELECT errno, inode, parent FROM jfs.mknod(:dir, 'sub', 2, 493, 0, 0);
SELECT inode AS sub FROM jfs.lookup(:dir, 'sub') \gset
SELECT nlink FROM jfs.getattr(:dir);
-- an existing name is EEXIST, whatever the type
SELECT errno FROM jfs.mknod(1, 'file', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, 'dir', 2, 493, 0, 0);
SELECT errno FROM jfs.symlink(1, 'file', 'x', 0, 0);
-- lookup, including . and ..
SELECT errno, inode, type FROM jfs.lookup(1, 'dir');
SELECT errno, inode, type FROM jfs.lookup(:dir, 'sub');
SELECT errno, inode FROM jfs.lookup(:sub, '.');
SELECT errno, inode FROM jfs.lookup(:sub, '..');
SELECT errno, inode FROM jfs.lookup(1, '..');
SELECT errno, inode FROM jfs.lookup(1, 'missing');
SELECT errno FROM jfs.lookup(:file, 'x');
SELECT errno FROM jfs.lookup(999, 'x');
SELECT errno FROM jfs.getattr(999);
-- the parent's mtime and ctime move on create; the child's three times are equal
CREATE TEMP TABLE t0 AS SELECT mtime, ctime FROM jfs.getattr(:dir);
SELECT pg_sleep(0.01);
SELECT errno, atime = mtime AND mtime = ctime AS equal_times FROM jfs.mknod(:dir, 'new', 1, 420, 0, 0);
SELECT g.mtime > t0.mtime AS mtime_moved, g.ctime > t0.ctime AS ctime_moved FROM jfs.getattr(:dir) g, t0;
-- within the skip window (default 100 ms; an hour here so the test cannot race the clock)
-- a create leaves the parent's times alone
UPDATE jfs.setting SET skip_dir_mtime_ns = 3600000000000;
DELETE FROM t0; INSERT INTO t0 SELECT mtime, ctime FROM jfs.getattr(:dir);
SELECT errno FROM jfs.mknod(:dir, 'new2', 1, 420, 0, 0);
SELECT g.mtime = t0.mtime AS mtime_kept FROM jfs.getattr(:dir) g, t0;
-- set-group-id directories pass on their group, and the bit to subdirectories
SELECT errno, mode FROM jfs.mknod(1, 'sgid', 2, 1517, 0, 500);
SELECT inode AS sgid FROM jfs.lookup(1, 'sgid') \gset
SELECT errno, gid, mode FROM jfs.mknod(:sgid, 'f', 1, 420, 1000, 1000);
SELECT errno, gid, mode, mode & 1024 <> 0 AS setgid FROM jfs.mknod(:sgid, 'd', 2, 493, 1000, 1000);
-- a new node inherits its directory's storage tier
UPDATE jfs.node SET tier = 2 WHERE inode = :dir;
SELECT errno, tier FROM jfs.mknod(:dir, 'tiered', 1, 420, 0, 0);
-- ids from a range the client reserved
SELECT jfs.alloc_ids('inode', 100) + 7 AS mine \gset
SELECT errno, inode = :mine AS used_my_id FROM jfs.mknod(1, 'client-id', 1, 420, 0, 0, 0, NULL, :mine);
SELECT errno, inode = :mine AS found_my_id FROM jfs.lookup(1, 'client-id');
SELECT * FROM jfs.fsck();
