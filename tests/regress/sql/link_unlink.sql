-- link, unlink, rmdir: nlink exact, data freed at the last link, parent times
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 0, 0) \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, 7, 8192, 0, 8192);
-- hard links: nlink counts the names; ctime changes
SELECT errno, inode = :f AS same_inode, nlink FROM jfs.link(:f, :d, 'f2');
SELECT errno, nlink FROM jfs.link(:f, 1, 'f3');
SELECT errno FROM jfs.link(:f, 1, 'f3');
SELECT nlink, length FROM jfs.getattr(:f);
-- a directory cannot be hard-linked; the target must be an existing directory
SELECT errno FROM jfs.link(:d, 1, 'dlink');
SELECT errno FROM jfs.link(:f, :f, 'x');
SELECT errno FROM jfs.link(:f, 999, 'x');
SELECT errno FROM jfs.link(999, 1, 'x');
-- unlink drops one name at a time; the data stays until the last
SELECT errno, nlink FROM jfs.unlink(1, 'f');
SELECT errno, nlink FROM jfs.unlink(1, 'f3');
SELECT count(*) AS slices, (SELECT count(*) FROM jfs.delslice) AS queued FROM jfs.slice WHERE inode = :f;
SELECT errno, nlink FROM jfs.unlink(:d, 'f2');
SELECT count(*) AS nodes FROM jfs.node WHERE inode = :f;
SELECT count(*) AS slices FROM jfs.slice WHERE inode = :f;
SELECT slice_id, size FROM jfs.delslice;
SELECT count(*) AS refs FROM jfs.slice_ref;
-- unlink errors
SELECT errno FROM jfs.unlink(1, 'f');
SELECT errno FROM jfs.unlink(1, 'd');
SELECT errno FROM jfs.unlink(999, 'd');
SELECT errno FROM jfs.unlink(1, '.');
-- symlinks, fifos and devices unlink like files
SELECT errno FROM jfs.symlink(:d, 's', '/target', 0, 0);
SELECT errno FROM jfs.mknod(:d, 'p', 4, 420, 0, 0);
SELECT errno, nlink FROM jfs.unlink(:d, 's');
SELECT errno, nlink FROM jfs.unlink(:d, 'p');
SELECT count(*) AS symlinks FROM jfs.symlink;
-- rmdir: only empty directories, never . or .., not a file
SELECT inode AS e FROM jfs.mknod(:d, 'e', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:e, 'x', 1, 420, 0, 0);
SELECT nlink FROM jfs.getattr(:d);
SELECT errno FROM jfs.rmdir(:d, 'e');
SELECT errno FROM jfs.rmdir(:e, 'x');
SELECT errno FROM jfs.rmdir(:d, '.');
SELECT errno FROM jfs.rmdir(:d, '..');
SELECT errno FROM jfs.rmdir(:d, 'missing');
SELECT errno FROM jfs.unlink(:e, 'x');
SELECT errno, inode = :e AS same, nlink FROM jfs.rmdir(:d, 'e');
SELECT nlink FROM jfs.getattr(:d);
SELECT errno FROM jfs.getattr(:e);
-- rmdir updates the parent's times at once (no skip window: the parent's nlink changes)
UPDATE jfs.node SET mtime = 0, ctime = 0 WHERE inode = 1;
SELECT errno FROM jfs.rmdir(1, 'd');
SELECT mtime > 0 AS mtime_set, ctime > 0 AS ctime_set, nlink FROM jfs.getattr(1);
SELECT name FROM jfs.ls('/');
SELECT * FROM jfs.statfs();
SELECT * FROM jfs.fsck();
