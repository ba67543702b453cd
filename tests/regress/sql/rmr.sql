-- rmr: a whole tree removed in bounded steps, consistent after each
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
-- /t/{f1..f5, s -> f1, a/{g1..g3, b/{h1, h2, c/}}, link-of-outside}; /outside/o (also linked into /t/a)
SELECT inode AS t FROM jfs.mknod(1, 't', 2, 493, 0, 0) \gset
SELECT inode AS a FROM jfs.mknod(:t, 'a', 2, 493, 0, 0) \gset
SELECT inode AS b FROM jfs.mknod(:a, 'b', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:b, 'c', 2, 493, 0, 0);
SELECT count(*) FROM generate_series(1, 5) i, jfs.mknod(:t, convert_to('f' || i, 'UTF8'), 1, 420, 0, 0) m WHERE m.errno = 0;
SELECT count(*) FROM generate_series(1, 3) i, jfs.mknod(:a, convert_to('g' || i, 'UTF8'), 1, 420, 0, 0) m WHERE m.errno = 0;
SELECT count(*) FROM generate_series(1, 2) i, jfs.mknod(:b, convert_to('h' || i, 'UTF8'), 1, 420, 0, 0) m WHERE m.errno = 0;
SELECT errno FROM jfs.write_slice((SELECT inode FROM jfs.lookup(:t, 'f1')), 0, 0, 1, 4096, 0, 4096);
SELECT errno FROM jfs.write_slice((SELECT inode FROM jfs.lookup(:b, 'h1')), 0, 0, 2, 4096, 0, 4096);
SELECT errno FROM jfs.symlink(:t, 's', 'f1', 0, 0);
SELECT inode AS outside FROM jfs.mknod(1, 'outside', 2, 493, 0, 0) \gset
SELECT inode AS o FROM jfs.mknod(:outside, 'o', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:o, 0, 0, 3, 4096, 0, 4096);
SELECT errno FROM jfs.link(:o, :a, 'o-link');
SELECT used_inodes FROM jfs.statfs();
-- steps of 4 entries: each leaves a consistent, smaller tree
SELECT errno, removed, done FROM jfs.rmr(1, 't', 4);
SELECT count(*) AS problems FROM jfs.fsck();
SELECT errno, removed, done FROM jfs.rmr(1, 't', 4);
SELECT count(*) AS problems FROM jfs.fsck();
SELECT errno, removed, done FROM jfs.rmr(1, 't', 4);
SELECT count(*) AS problems FROM jfs.fsck();
SELECT errno, removed, done FROM jfs.rmr(1, 't', 4);
SELECT count(*) AS problems FROM jfs.fsck();
SELECT errno, removed, done FROM jfs.rmr(1, 't', 4);
SELECT name FROM jfs.ls('/');
-- the hard link from outside survives with its data; the tree's data is queued
SELECT errno, nlink, length FROM jfs.getattr(:o);
SELECT slice_id FROM jfs.delslice ORDER BY 1;
SELECT used_inodes FROM jfs.statfs();
SELECT nlink FROM jfs.getattr(1);
-- gone, not a directory, bad names
SELECT errno, removed, done FROM jfs.rmr(1, 't');
SELECT errno, removed, done FROM jfs.rmr(:outside, 'o');
SELECT errno FROM jfs.getattr(:o);
SELECT errno, done FROM jfs.rmr(1, '.');
SELECT errno, done FROM jfs.rmr(99999, 'x');
-- a whole tree in one call (default limit)
SELECT inode AS big FROM jfs.mknod(1, 'big', 2, 493, 0, 0) \gset
SELECT count(*) FROM generate_series(1, 50) i, jfs.mknod(:big, convert_to('d' || i, 'UTF8'), 2, 493, 0, 0) m WHERE m.errno = 0;
SELECT count(*) FROM generate_series(1, 50) d, generate_series(1, 20) i,
       jfs.mknod((SELECT inode FROM jfs.lookup(:big, convert_to('d' || d, 'UTF8'))), convert_to('f' || i, 'UTF8'), 1, 420, 0, 0) m
 WHERE m.errno = 0;
SELECT errno, removed, done FROM jfs.rmr(1, 'big');
SELECT used_inodes FROM jfs.statfs();
SELECT * FROM jfs.fsck();
