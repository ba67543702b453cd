-- jfs 0.2.15 -> 0.2.16.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.16 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Six helpers were SQL functions with a subquery, which PostgreSQL does not
-- inline and plans again at every call (30-100 us each): every logged
-- change (_change_session, the default of change.session), every new slice
-- (_handed_out, _fresh_slice_id, _range_size), every charge of a directory
-- quota chain (_quota_roots) and every last unlink (_others_live). As
-- PL/pgSQL their plans are kept for the session: creates with data and
-- unlinks cost about a third less in PostgreSQL. Same arguments, results
-- and volatility; no privilege changes (the roles never call them).

-- The session a change is logged under: the one the connection names in
-- its application_name (jfs:SID, as a mount's connections do), if the
-- caller's login role registered it; NULL otherwise (every mount then
-- applies the change). Another role cannot make its changes pass for a
-- mount's own, which that mount would skip.
CREATE OR REPLACE FUNCTION _change_session() RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.sid FROM session s
             WHERE s.sid = substring(pg_catalog.current_setting('application_name')
                                     FROM '^jfs:([0-9]{1,18})$')::bigint
               AND (s.role IS NULL OR s.role = session_user));
END
$$;

-- The directory quotas charged for an entry of a directory whose qroot is
-- p_qroot: that root, then the roots above it, nearest first (the root's
-- chain, kept by _quota_chains).
CREATE OR REPLACE FUNCTION _quota_roots(p_qroot bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_qroot > 0 THEN
        RETURN coalesce((SELECT q.chain FROM quota q WHERE q.kind = 'dir' AND q.key = p_qroot), '{}');
    END IF;
    RETURN '{}'::bigint[];
END
$$;

-- The bytes a multirange covers.
CREATE OR REPLACE FUNCTION _range_size(p_ranges int4multirange) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT coalesce(sum(upper(r) - lower(r)), 0)::bigint FROM unnest(p_ranges) r);
END
$$;

-- Whether p_id is an id of counter p_kind ('inode', 'slice') that was handed
-- out (by alloc_ids, or taken here): ids are never handed out twice.
CREATE OR REPLACE FUNCTION _handed_out(p_kind text, p_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_id > 0 AND p_id < (SELECT c.next FROM counter c WHERE c.name = p_kind);
END
$$;

-- Whether a client's slice id p_id can name a new slice: handed out, and
-- neither referenced already nor queued for deletion (its objects would be
-- deleted under the new reference).
CREATE OR REPLACE FUNCTION _fresh_slice_id(p_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN _handed_out('slice', p_id)
       AND NOT EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = p_id)
       AND NOT EXISTS (SELECT 1 FROM delslice d WHERE d.slice_id = p_id);
END
$$;

-- Whether a session other than p_sid is live: one may have a file open
-- that p_sid's call removes the last name of.
CREATE OR REPLACE FUNCTION _others_live(p_sid bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM session WHERE sid IS DISTINCT FROM p_sid);
END
$$;
