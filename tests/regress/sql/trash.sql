-- trash: removed entries move to /.trash/HOUR, stay charged to the volume but
-- leave their directory quota, come back with restore, and expire
\set VERBOSITY terse
\ir tests/regress/fresh_extension.sql
SELECT errno FROM jfs.format('regress', p_trash_days => 1);
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS a FROM jfs.mknod(1, 'a', 2, 493, 0, 0) \gset
SELECT inode AS b FROM jfs.mknod(1, 'b', 2, 493, 0, 0) \gset
SELECT inode AS f FROM jfs.mknod(:a, 'f', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, 1, 8192, 0, 8192);
SELECT inode AS g FROM jfs.mknod(:a, 'g', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.link(:g, :b, 'g2');
SELECT errno FROM jfs.mknod(:a, 'd', 2, 493, 0, 0);
SELECT inode AS t FROM jfs.mknod(:a, 't', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:t, 'x', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(:a, 'h', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(:a, 'h2', 1, 420, 0, 0);
SELECT used_inodes FROM jfs.set_quota('/a', 0, 100);
SELECT used_inodes, used_space FROM jfs.usage;

-- a last link, an empty directory, a tree, a replaced file: to the trash
SELECT errno, nlink FROM jfs.unlink(:a, 'f');
SELECT errno FROM jfs.rmdir(:a, 'd');
SELECT errno, removed, done FROM jfs.rmr(:a, 't');
SELECT errno, replaced > 0 AS replaced, replaced_nlink FROM jfs.rename(:a, 'h', :a, 'h2');
-- a link that is not the last one is just removed
SELECT errno, nlink FROM jfs.unlink(:a, 'g');
SELECT hour ~ '^\d{4}-\d\d-\d\d-\d\d$' AS hourly, parent_path, name, type, size FROM jfs.trash ORDER BY name;
SELECT name FROM jfs.ls('/a') ORDER BY name;
-- the volume still counts them, the directory quota does not; no data freed
SELECT used_inodes, used_space FROM jfs.usage;
SELECT used_inodes FROM jfs.quotas WHERE path = '/a';
SELECT slice_id, refs FROM jfs.slice_ref;
SELECT count(*) AS queued FROM jfs.delslice;
SELECT * FROM jfs.fsck();

-- restore puts them back where they were
SELECT hour ~ '^\d{4}' AS hourly, path, errno FROM jfs.restore() ORDER BY path;
SELECT name FROM jfs.ls('/a') ORDER BY name;
SELECT count(*) AS left_in_trash FROM jfs.trash;
SELECT used_inodes FROM jfs.quotas WHERE path = '/a';
SELECT errno, length FROM jfs.getattr(jfs.resolve('/a/f'));
-- a name taken again stays in the trash
SELECT errno FROM jfs.unlink(:a, 'f');
SELECT errno FROM jfs.mknod(:a, 'f', 1, 420, 0, 0);
SELECT path, errno FROM jfs.restore();
SELECT * FROM jfs.fsck();

-- expired hours are purged (the hour is renamed into the past to expire it)
UPDATE jfs.edge SET name = '2000-01-01-00' WHERE parent = 9223372032828243968;
SELECT jfs.trash_purge();
SELECT count(*) AS left_in_trash FROM jfs.trash;
SELECT slice_id FROM jfs.delslice;
SELECT used_inodes FROM jfs.usage;
-- removing inside the trash deletes for real
SELECT errno FROM jfs.unlink(:a, 'f');
SELECT errno FROM jfs.unlink((SELECT inode FROM jfs.edge WHERE parent = 9223372032828243968), (SELECT e.name FROM jfs.edge e JOIN jfs.edge h ON e.parent = h.inode WHERE h.parent = 9223372032828243968));
SELECT count(*) AS left_in_trash FROM jfs.trash;
-- batch_unlink with a trash: one row per name, last links moved
SELECT convert_from(name, 'UTF8') AS name, errno FROM jfs.batch_unlink(:a, ARRAY['.'::bytea, 'nope'::bytea, 'h2'::bytea]);
SELECT name FROM jfs.trash;
-- a directory made in /.trash by hand does not stop the purge
SELECT errno FROM jfs.mknod(9223372032828243968, 'not-an-hour', 2, 493, 0, 0);
SELECT jfs.trash_purge() >= 0 AS purged;
SELECT * FROM jfs.fsck();
