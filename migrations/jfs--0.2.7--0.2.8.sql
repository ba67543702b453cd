-- jfs 0.2.7 -> 0.2.8.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.8 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- jfs.sync() waits for the synchronous standbys too when the local flush
-- has caught up but theirs has not (sql/volume.sql): what an fsync vouched
-- for survives a failover to one.

CREATE OR REPLACE FUNCTION sync() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_end pg_lsn := pg_current_wal_insert_lsn();
BEGIN
    IF pg_current_wal_flush_lsn() < v_end
       OR (current_setting('synchronous_standby_names') <> ''
           AND coalesce((SELECT min(r.flush_lsn) FROM pg_stat_replication r
                          WHERE r.sync_state IN ('sync', 'quorum')), '0/0'::pg_lsn) < v_end) THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
        PERFORM pg_catalog.pg_logical_emit_message(true, 'jfs.sync', '');
    END IF;
END
$$;

