-- Bytes waiting for deletion are counted (delete_usage, kept by triggers on
-- delslice, whoever writes it), statfs counts them as used (the store
-- holds them), and past the volume's cap (administration) freed slices are
-- handed out for deletion whatever delay a mount asks for; fsck finds a
-- count that drifted and fsck_repair recounts it.
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
DROP ROLE IF EXISTS jfs_regress_dq;
CREATE ROLE jfs_regress_dq;
SELECT jfs.grant_client('jfs_regress_dq');
SELECT avail_space AS avail0 FROM jfs.statfs() \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT jfs.alloc_ids('slice', 10) AS s \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, :s, 1048576, 0, 1048576);
SELECT errno FROM jfs.write_slice(:f, 1, 0, :s + 1, 2097152, 0, 2097152);
SELECT :avail0 - avail_space AS charged FROM jfs.statfs();
-- removed: its 3 MiB wait for deletion, and still count in statfs
SELECT errno FROM jfs.unlink(1, 'f');
SELECT slices, bytes, cap FROM jfs.delete_queue();
SELECT :avail0 - avail_space AS still_held FROM jfs.statfs();
SELECT metric, value FROM jfs.metrics WHERE metric LIKE 'delete_queue%' ORDER BY metric;
-- a mount that keeps freed data an hour gets nothing yet
SELECT count(*) AS due FROM jfs.pending_delslices('1 hour');
-- a cap is administration; past it, the queue is due at once
SET SESSION AUTHORIZATION jfs_regress_dq;
SELECT jfs.set_delete_queue_cap(1);
SELECT slices, bytes FROM jfs.delete_queue();
RESET SESSION AUTHORIZATION;
SELECT jfs.set_delete_queue_cap(2097152);
SELECT size FROM jfs.pending_delslices('1 hour') ORDER BY slice_id;
SELECT jfs.set_delete_queue_cap(8388608);
SELECT count(*) AS due_under_cap FROM jfs.pending_delslices('1 hour');
SELECT jfs.set_delete_queue_cap(-1);
-- deleted: forgotten, the count follows
SELECT jfs.forget_delslices(ARRAY[:s]::bigint[]);
SELECT slices, bytes FROM jfs.delete_queue();
-- a count that drifted: fsck says so, fsck_repair recounts
UPDATE jfs.delete_usage SET bytes = bytes + 5;
SELECT problem, detail FROM jfs.fsck();
SELECT repaired, changed FROM jfs.fsck_repair() WHERE repaired = 'delete usage';
SELECT slices, bytes FROM jfs.delete_queue();
SELECT jfs.forget_delslices(ARRAY[:s + 1]::bigint[]);
SELECT slices, bytes FROM jfs.delete_queue();
SELECT avail_space = :avail0 AS all_back FROM jfs.statfs();
DROP OWNED BY jfs_regress_dq;
DROP ROLE jfs_regress_dq;
SELECT * FROM jfs.fsck();
