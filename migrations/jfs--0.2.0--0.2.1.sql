-- jfs 0.2.0 -> 0.2.1 (released: frozen, like every script here).
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.1 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- jfs.sync() flushes (sql/volume.sql): it assigned an xid and committed
-- with synchronous_commit on, but a transaction that wrote no WAL does not
-- wait for the flush, so fsync acknowledged commits a crash then erased.

-- Waits until everything committed so far (by any session) is flushed to
-- the WAL on disk (and, with synchronous standbys, replicated to them).
-- fsync, fsyncdir, syncfs and close after writes call it in 'fsync'
-- durability mode. Costs nothing when nothing is pending. A commit waits
-- for the flush only if its transaction wrote WAL (an xid alone writes
-- none, and its commit then is as asynchronous as the commits it was to
-- cover): the transactional message is that WAL, and the synchronous
-- commit of this transaction flushes everything inserted before it.
CREATE OR REPLACE FUNCTION sync() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn() THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
        PERFORM pg_catalog.pg_logical_emit_message(true, 'jfs.sync', '');
    END IF;
END
$$;
