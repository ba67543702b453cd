-- batch_unlink: many names of one directory in one set-based call
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 0, 0) \gset
SELECT inode AS other FROM jfs.mknod(1, 'other', 2, 493, 0, 0) \gset
-- files with data, a symlink, a fifo, a file hard-linked from another directory, a subdirectory
SELECT count(*) FROM generate_series(1, 100) i, jfs.mknod(:d, convert_to('f' || i, 'UTF8'), 1, 420, 0, 0) m
 WHERE m.errno = 0;
SELECT count(*) FROM generate_series(1, 100) i,
       jfs.write_slice((SELECT inode FROM jfs.lookup(:d, convert_to('f' || i, 'UTF8'))), 0, 0, i, 4096, 0, 4096) w
 WHERE w.errno = 0;
SELECT errno FROM jfs.symlink(:d, 'sym', 'f1', 0, 0);
SELECT errno FROM jfs.mknod(:d, 'fifo', 4, 420, 0, 0);
SELECT inode AS linked FROM jfs.mknod(:d, 'linked', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:linked, 0, 0, 500, 100, 0, 100);
SELECT errno FROM jfs.link(:linked, :other, 'linked-too');
SELECT errno FROM jfs.mknod(:d, 'subdir', 2, 493, 0, 0);
SELECT * FROM jfs.statfs();
-- one call: every file, the symlink, the fifo, the hard link, plus a missing
-- name, the directory, a bad name and '.'
SELECT errno, count(*)
  FROM jfs.batch_unlink(:d, ARRAY(SELECT convert_to('f' || i, 'UTF8') FROM generate_series(1, 100) i)
                            || ARRAY['sym', 'fifo', 'linked', 'missing', 'subdir', 'a/b', '.']::bytea[])
 GROUP BY errno ORDER BY errno;
SELECT convert_from(name, 'UTF8') AS name, errno, inode IS NOT NULL AS has_inode
  FROM jfs.batch_unlink(:d, ARRAY['subdir', 'missing', 'a/b', '..', 'f1']::bytea[]);
-- what is left: the subdirectory; the hard-linked file lives on under its other name
SELECT name, type FROM jfs.ls('/d');
SELECT errno, nlink, length FROM jfs.lookup(:other, 'linked-too');
-- every freed slice queued once; the hard-linked file's slice still referenced
SELECT count(*) AS queued, min(slice_id), max(slice_id) FROM jfs.delslice;
SELECT slice_id, refs FROM jfs.slice_ref;
SELECT * FROM jfs.statfs();
-- a file the session has open stays (sustained) until released
SELECT jfs.session_register('h', 1) AS sid \gset
SELECT inode AS held FROM jfs.mknod(:d, 'held', 1, 420, 0, 0) \gset
SELECT inode AS notheld FROM jfs.mknod(:d, 'not-held', 1, 420, 0, 0) \gset
SELECT convert_from(name, 'UTF8') AS name, errno
  FROM jfs.batch_unlink(:d, ARRAY['held', 'not-held']::bytea[], :sid, ARRAY[:held]);
SELECT errno, nlink FROM jfs.getattr(:held);
SELECT errno FROM jfs.getattr(:notheld);
SELECT jfs.release(:sid, :held);
SELECT errno FROM jfs.getattr(:held);
-- a non-directory parent, a missing parent, no names
SELECT errno FROM jfs.batch_unlink(:linked, ARRAY['x']::bytea[]);
SELECT errno FROM jfs.batch_unlink(99999, ARRAY['x']::bytea[]);
SELECT * FROM jfs.batch_unlink(:d, '{}');
SELECT * FROM jfs.fsck();
