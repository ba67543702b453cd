-- meta_durability: 'fsync' commits without waiting for the WAL flush (jfs.sync() waits);
-- 'always' leaves synchronous_commit on. Atomicity is the same in both.
\ir tests/regress/fresh_volume.sql
SELECT meta_durability FROM jfs.setting;
SHOW synchronous_commit;
-- in 'fsync' mode a mutating procedure turns synchronous_commit off for its own transaction only
BEGIN;
SELECT errno FROM jfs.mknod(1, 'a', 1, 420, 0, 0);
SHOW synchronous_commit;
COMMIT;
SHOW synchronous_commit;
-- reads do not touch it
BEGIN;
SELECT errno FROM jfs.getattr(1);
SHOW synchronous_commit;
COMMIT;
-- jfs.sync() turns it back on, so its commit waits for the flush of all WAL before it
BEGIN;
SELECT errno FROM jfs.mknod(1, 'b', 1, 420, 0, 0);
SELECT jfs.sync();
SELECT current_setting('synchronous_commit') IN ('on', 'off') AS valid;
COMMIT;
SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() - 8192 AS flushed_after_sync;
-- and the flush covers every asynchronous commit before it, at once: with
-- the WAL writer slowed down, nothing else flushes them meanwhile
ALTER SYSTEM SET wal_writer_delay = '10s';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT errno FROM jfs.mknod(1, 'async', 1, 420, 0, 0);
SELECT pg_current_wal_insert_lsn() AS before_sync \gset
SELECT pg_current_wal_flush_lsn() < :'before_sync'::pg_lsn AS pending_before_sync;
SELECT jfs.sync();
SELECT pg_current_wal_flush_lsn() >= :'before_sync'::pg_lsn AS flushed_by_sync;
SELECT errno FROM jfs.unlink(1, 'async');
-- a close or fsync in one round trip: the client's statement turns
-- synchronous_commit on again in its select list, evaluated once
-- write_slices has run (which turned it off), so the commit flushes every
-- asynchronous commit before it, as jfs.sync() does; without, the commit
-- is asynchronous like the others
SELECT inode AS w FROM jfs.mknod(1, 'written', 1, 420, 0, 0) \gset
SELECT jfs.alloc_ids('slice', 2) AS s \gset
BEGIN;
SELECT committed FROM jfs.write_slices(:w, '{0}', '{0}', ARRAY[:s], '{10}', '{0}', '{10}');
SHOW synchronous_commit;
COMMIT;
SELECT pg_current_wal_insert_lsn() AS before_durable \gset
SELECT pg_current_wal_flush_lsn() < :'before_durable'::pg_lsn AS pending_before_durable;
BEGIN;
SELECT w.committed,
       CASE WHEN pg_catalog.current_setting('synchronous_commit') = 'off'
            THEN pg_catalog.set_config('synchronous_commit', 'on', true) END AS made_durable
  FROM jfs.write_slices(:w, '{0}', '{10}', ARRAY[:s + 1], '{10}', '{0}', '{10}') w;
SHOW synchronous_commit;
COMMIT;
SELECT pg_current_wal_flush_lsn() >= :'before_durable'::pg_lsn AS flushed_by_durable_commit;
SELECT errno FROM jfs.unlink(1, 'written');
-- a lease taken is durable at once (0.2.22): a crash that took it back
-- would leave its holder answering for a directory others then change;
-- a lease refused, or given up, keeps the volume's mode
SELECT inode AS ld FROM jfs.mknod(1, 'leased', 2, 493, 0, 0) \gset
SELECT jfs.session_open('h', 1, '{"version": "0.2.22"}', '1 minute') AS ls \gset
SELECT set_config('application_name', 'jfs:' || :ls, false) IS NOT NULL AS as_holder;
BEGIN;
SELECT errno FROM jfs.take_lease(:ls, :ld);
SHOW synchronous_commit;
SELECT pg_current_wal_insert_lsn() AS before_lease \gset
COMMIT;
SELECT pg_current_wal_flush_lsn() >= :'before_lease'::pg_lsn AS lease_flushed;
BEGIN;
SELECT errno FROM jfs.take_lease(:ls, 1, 1);
SHOW synchronous_commit;
COMMIT;
BEGIN;
SELECT kept FROM jfs.lease_unlink(:ls, :ld, '{}', '{}', '{}', false);
SHOW synchronous_commit;
COMMIT;
SELECT set_config('application_name', '', false) IS NOT NULL AS as_nobody;
SELECT jfs.session_close(:ls);
SELECT errno FROM jfs.rmdir(1, 'leased');
ALTER SYSTEM RESET wal_writer_delay;
SELECT pg_reload_conf();
-- an aborted procedure transaction leaves nothing behind, in either mode
BEGIN;
SELECT errno FROM jfs.mknod(1, 'rolled-back', 2, 493, 0, 0);
ROLLBACK;
SELECT errno FROM jfs.lookup(1, 'rolled-back');
SELECT nlink FROM jfs.getattr(1);
-- 'always': every procedure commits synchronously
SELECT errno FROM jfs.format('regress', p_meta_durability => 'always', p_force => true);
BEGIN;
SELECT errno FROM jfs.mknod(1, 'c', 1, 420, 0, 0);
SHOW synchronous_commit;
COMMIT;
BEGIN;
SELECT errno FROM jfs.rename(1, 'c', 1, 'd');
SELECT errno FROM jfs.unlink(1, 'd');
SHOW synchronous_commit;
COMMIT;
SELECT name FROM jfs.ls('/');
SELECT * FROM jfs.fsck();
