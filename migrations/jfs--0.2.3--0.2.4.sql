-- jfs 0.2.3 -> 0.2.4.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.4 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Sessions belong to the role that registered them (sql/schema.sql,
-- internal.sql, session.sql, lock.sql, batch.sql, quota.sql). Sessions
-- that exist now keep no role: any role may still act for them.

ALTER TABLE session ADD COLUMN role name;
ALTER TABLE session ALTER COLUMN role SET DEFAULT session_user;
ALTER TABLE session ADD COLUMN session_timeout interval;


-- The session a change is logged under: the one the connection names in
-- its application_name (jfs:SID, as a mount's connections do), if the
-- caller's login role registered it; NULL otherwise (every mount then
-- applies the change). Another role cannot make its changes pass for a
-- mount's own, which that mount would skip.
CREATE FUNCTION _change_session() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT s.sid FROM session s
     WHERE s.sid = substring(pg_catalog.current_setting('application_name')
                             FROM '^jfs:([0-9]{1,18})$')::bigint
       AND (s.role IS NULL OR s.role = session_user)
$$;

ALTER TABLE change ALTER COLUMN session SET DEFAULT _change_session();

-- Whether the caller's login role administers jfs: a superuser, or a role
-- granted the procedures of administration (jfs.grant_admin).
CREATE FUNCTION _is_admin() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
        OR pg_catalog.has_function_privilege(session_user, 'jfs.set_retain_deleted(interval)', 'EXECUTE')
$$;

-- Whether the caller may act for session p_sid: its login role registered
-- it (or the session is from before sessions had roles), or it is an
-- administrator. NULL when there is no such session.
CREATE FUNCTION _may_act_for(p_sid bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT s.role IS NULL OR s.role = session_user OR _is_admin() FROM session s WHERE s.sid = p_sid
$$;

-- Refuses a call about session p_sid made by another role than the one
-- that registered it (a client role cannot act as another mount).
CREATE FUNCTION _check_session(p_sid bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT coalesce(_may_act_for(p_sid), true) THEN
        RAISE EXCEPTION 'jfs: session % was registered by another role', p_sid
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- Whether a node that just lost its last link stays: when the calling
-- session p_sid has it open (p_open_inodes lists the inodes the client has
-- open) it is kept with nlink 0 in sustained until released; a regular
-- file is also kept, in unlinked, while another session is live (it may
-- have the file open: see jfs.sustain and jfs.free_unlinked).
-- The caller has stored nlink 0 or frees the node when this says false.
CREATE OR REPLACE FUNCTION _keep_open(p_inode bigint, p_sid bigint, p_open_inodes bigint[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_sid > 0 AND p_inode = ANY (p_open_inodes) AND coalesce(_may_act_for(p_sid), false) THEN
        UPDATE node SET nlink = 0, ctime = _now() WHERE inode = p_inode;
        INSERT INTO sustained (sid, inode) VALUES (p_sid, p_inode) ON CONFLICT DO NOTHING;
        RETURN true;
    END IF;
    IF _others_live(p_sid) THEN
        UPDATE node SET nlink = 0, ctime = _now() WHERE inode = p_inode AND type = 1;
        IF FOUND THEN
            INSERT INTO unlinked (inode) VALUES (p_inode) ON CONFLICT DO NOTHING;
            RETURN true;
        END IF;
    END IF;
    RETURN false;
END
$$;

-- Drops one link of a node per element of p_inodes (the entries just
-- deleted; a node named twice loses two): nodes keeping other links get a
-- lower nlink; nodes left with none are freed, except those the session p_sid
-- has open (p_open_inodes), which stay with nlink 0 in sustained until
-- released, and regular files while other sessions are live, which stay in
-- unlinked (see _keep_open). Nodes about to be freed are not updated first
-- (for a big batch that halves the rows written).
CREATE OR REPLACE FUNCTION _drop_links(p_inodes bigint[], p_now bigint, p_sid bigint, p_open_inodes bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_zero bigint[];
    v_keep bigint[] := '{}';
    v_parked bigint[];
BEGIN
    IF p_inodes IS NULL THEN
        RETURN;
    END IF;
    WITH per_node AS (
        SELECT i AS inode, count(*)::integer AS n FROM unnest(p_inodes) i GROUP BY i
    ), linked AS (
        UPDATE node x SET nlink = x.nlink - p.n, ctime = p_now FROM per_node p
         WHERE x.inode = p.inode AND x.nlink > p.n
        RETURNING x.inode
    )
    SELECT array_agg(p.inode) INTO v_zero FROM per_node p WHERE p.inode NOT IN (SELECT l.inode FROM linked l);
    IF v_zero IS NULL THEN
        RETURN;
    END IF;
    IF p_sid > 0 AND cardinality(p_open_inodes) > 0 AND coalesce(_may_act_for(p_sid), false) THEN
        SELECT coalesce(array_agg(z), '{}') INTO v_keep FROM unnest(v_zero) z WHERE z = ANY (p_open_inodes);
        UPDATE node SET nlink = 0, ctime = p_now WHERE inode = ANY (v_keep);
        INSERT INTO sustained (sid, inode) SELECT p_sid, k FROM unnest(v_keep) k ON CONFLICT DO NOTHING;
    END IF;
    v_zero := ARRAY(SELECT z FROM unnest(v_zero) z WHERE NOT z = ANY (v_keep));
    IF _others_live(p_sid) THEN
        WITH parked AS (
            UPDATE node SET nlink = 0, ctime = p_now WHERE inode = ANY (v_zero) AND type = 1
            RETURNING inode
        ), kept AS (
            INSERT INTO unlinked (inode) SELECT inode FROM parked ON CONFLICT DO NOTHING RETURNING inode
        )
        SELECT coalesce(array_agg(inode), '{}') INTO v_parked FROM parked;
        v_zero := ARRAY(SELECT z FROM unnest(v_zero) z WHERE NOT z = ANY (v_parked));
    END IF;
    PERFORM _free_nodes(v_zero);
END
$$;

-- A new session of the caller's login role (only it, or an administrator,
-- acts for it), which other mounts end only after p_timeout without a
-- heartbeat (its mount's --session-timeout, at least a second).
CREATE FUNCTION session_open(p_host text, p_pid integer, p_info jsonb, p_timeout interval)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    INSERT INTO session (host, pid, info, session_timeout)
    VALUES (coalesce(p_host, ''), coalesce(p_pid, 0), coalesce(p_info, '{}'),
            greatest(coalesce(p_timeout, '5 minutes'), '1 second'))
    RETURNING sid
$$;

-- 0, or 2 (ENOENT) when the session was cleaned up as dead: the client must
-- register again (and its sustained inodes are gone).
CREATE OR REPLACE FUNCTION session_heartbeat(p_sid bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    UPDATE session SET heartbeat = now() WHERE sid = p_sid;
    RETURN CASE WHEN FOUND THEN 0 ELSE 2 END;
END
$$;

CREATE OR REPLACE FUNCTION session_close(p_sid bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    PERFORM 1 FROM session WHERE sid = p_sid FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    PERFORM _end_session(p_sid);
    RETURN 0;
END
$$;

-- Ends every session whose last heartbeat is older than p_timeout and than
-- the session's own timeout (so no caller can end a live one); any client
-- may call it. Returns the number of sessions ended.
CREATE OR REPLACE FUNCTION session_cleanup(p_timeout interval DEFAULT '5 minutes') RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
    v_count integer := 0;
BEGIN
    PERFORM _begin();
    FOR v_sid IN SELECT sid FROM session
                  WHERE heartbeat < now() - greatest(p_timeout, coalesce(session_timeout, p_timeout))
                  ORDER BY sid FOR UPDATE SKIP LOCKED LOOP
        PERFORM _end_session(v_sid);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

-- The session closed its last handle of p_inode: an unlinked inode no
-- other session holds is freed. 0, or 2 if p_sid did not hold it.
CREATE OR REPLACE FUNCTION release(p_sid bigint, p_inode bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    PERFORM 1 FROM node WHERE inode = p_inode FOR UPDATE;
    DELETE FROM sustained WHERE sid = p_sid AND inode = p_inode;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    IF _unheld(p_inode) THEN
        PERFORM _free_node(p_inode);
    END IF;
    RETURN 0;
END
$$;

-- Session p_sid holds those of p_inodes (files it has open) that lost
-- their last name elsewhere and are still kept (nlink 0, in unlinked or
-- held by another session): they stay until it releases them (release,
-- or the end of its session). A mount calls it when it reads a removal
-- from the change log. Returns the inodes among p_inodes it holds.
CREATE OR REPLACE FUNCTION sustain(p_sid bigint, p_inodes bigint[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    PERFORM 1 FROM session WHERE sid = p_sid FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN '{}';
    END IF;
    PERFORM 1 FROM node WHERE inode = ANY (p_inodes) AND nlink = 0 ORDER BY inode FOR UPDATE;
    INSERT INTO sustained (sid, inode)
    SELECT p_sid, n.inode FROM node n WHERE n.inode = ANY (p_inodes) AND n.nlink = 0
    ON CONFLICT DO NOTHING;
    RETURN ARRAY(SELECT s.inode FROM sustained s WHERE s.sid = p_sid AND s.inode = ANY (p_inodes) ORDER BY 1);
END
$$;

-- Locks (p_type 0 shared, 1 exclusive) or unlocks (2) bytes p_start..p_end
-- (inclusive) of file p_inode for owner p_owner of session p_sid, as
-- fcntl(F_SETLK) does: the owner's own locks in the range are replaced
-- (split where they reach past it), touching locks of the same type merged.
-- Returns errno: 0 done; 11 (EAGAIN) another owner holds a conflicting
-- lock; with p_wait (the caller will wait and call again) 35 (EDEADLK)
-- when that owner waits, through others, for this one; 22 bad range or
-- type; 2 no such file; 37 (ENOLCK) the session is gone.
CREATE OR REPLACE FUNCTION setlk(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
                      p_start bigint, p_end bigint, p_pid integer, p_wait boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_start bigint := p_start;
    v_end bigint := p_end;
    r plock;
BEGIN
    PERFORM _begin();
    IF p_type NOT IN (0, 1, 2) OR p_start < 0 OR p_end < p_start THEN
        RETURN 22;
    END IF;
    PERFORM _check_session(p_sid);
    PERFORM 1 FROM session WHERE sid = p_sid FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN 37;
    END IF;
    -- one change of a file's locks at a time
    PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    IF p_type <> 2 AND EXISTS (SELECT 1 FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end)) THEN
        IF NOT p_wait THEN
            RETURN 11;
        END IF;
        IF _lock_deadlock(p_sid, p_owner, p_inode, p_type, p_start, p_end) THEN
            DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
            RETURN 35;
        END IF;
        INSERT INTO lock_wait (sid, owner, inode, ltype, lstart, lend)
        VALUES (p_sid, p_owner, p_inode, p_type, p_start, p_end)
        ON CONFLICT (sid, owner, inode) DO UPDATE
            SET ltype = excluded.ltype, lstart = excluded.lstart, lend = excluded.lend, at = now();
        RETURN 11;
    END IF;
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
    -- the owner's locks that overlap or touch the range (no overflow: both >= 0)
    FOR r IN DELETE FROM plock
              WHERE inode = p_inode AND sid = p_sid AND owner = p_owner
                AND lstart - 1 <= p_end AND lend >= p_start - 1
              RETURNING * LOOP
        IF p_type <> 2 AND r.ltype = p_type THEN
            v_start := least(v_start, r.lstart);
            v_end := greatest(v_end, r.lend);
        ELSE
            IF r.lstart < p_start THEN
                INSERT INTO plock VALUES (p_inode, p_sid, p_owner, r.ltype, r.lstart, p_start - 1, r.pid);
            END IF;
            IF r.lend > p_end THEN
                INSERT INTO plock VALUES (p_inode, p_sid, p_owner, r.ltype, p_end + 1, r.lend, r.pid);
            END IF;
        END IF;
    END LOOP;
    IF p_type <> 2 THEN
        INSERT INTO plock VALUES (p_inode, p_sid, p_owner, p_type, v_start, v_end, p_pid);
    END IF;
    RETURN 0;
END
$$;

-- Drops every lock owner p_owner of session p_sid holds on file p_inode
-- (the close of a file by a process, the last close of an flock'd open
-- file); returns how many ranges went.
CREATE OR REPLACE FUNCTION unlock_owner(p_inode bigint, p_sid bigint, p_owner bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
    DELETE FROM plock WHERE inode = p_inode AND sid = p_sid AND owner = p_owner;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Owner p_owner of session p_sid no longer waits for a lock of p_inode (its
-- wait was interrupted): deadlock detection stops following it at once.
CREATE OR REPLACE FUNCTION cancel_lock_wait(p_inode bigint, p_sid bigint, p_owner bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _check_session(p_sid);
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
END
$$;

-- Recounts quotas (all, or one kind, or one key) from the namespace beside
-- their counters; with p_repair (administration: it locks every writer
-- out while it counts), writes the recount where they differ (and,
-- when checking all, recounts every directory's dir_stats too). Metadata
-- changes wait while a repair counts.
CREATE OR REPLACE FUNCTION check_quota(p_kind text DEFAULT NULL, p_key bigint DEFAULT NULL, p_repair boolean DEFAULT false)
RETURNS TABLE (kind text, key bigint, path text, counted_inodes bigint, counted_space bigint,
               recorded_inodes bigint, recorded_space bigint, ok boolean, repaired boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    q record;
    c record;
    u record;
BEGIN
    IF p_repair THEN
        IF NOT _is_admin() THEN
            RAISE EXCEPTION 'jfs: repairing quotas is administration (jfs.grant_admin)'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        LOCK TABLE node IN EXCLUSIVE MODE;
    END IF;
    FOR q IN SELECT x.kind, x.key FROM quota x
              WHERE (p_kind IS NULL OR x.kind = p_kind) AND (p_key IS NULL OR x.key = p_key)
              ORDER BY x.kind, x.key
    LOOP
        c := _quota_count(q.kind, q.key);
        SELECT coalesce(sum(x.inodes), 0) AS inodes, coalesce(sum(x.space), 0) AS space INTO u
          FROM quota_usage x WHERE x.kind = q.kind AND x.key = q.key;
        kind := q.kind; key := q.key;
        path := CASE WHEN q.kind = 'dir' THEN jfs.path(q.key) END;
        counted_inodes := c.inodes; counted_space := c.space;
        recorded_inodes := u.inodes; recorded_space := u.space;
        ok := c.inodes = u.inodes AND c.space = u.space;
        repaired := p_repair AND NOT ok;
        IF repaired THEN
            PERFORM _quota_store(q.kind, q.key, c.inodes, c.space);
            PERFORM _quota_reshare(q.kind, q.key, 0, 0);
        END IF;
        RETURN NEXT;
    END LOOP;
    IF p_repair AND p_kind IS NULL AND p_key IS NULL THEN
        DELETE FROM dir_stats;
        INSERT INTO dir_stats (inode, stripe, space, inodes)
        SELECT e.parent, 0, sum(_node_space(n.type, n.length)), count(*)
          FROM edge e JOIN node n ON n.inode = e.inode GROUP BY e.parent;
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION _change_session(), _is_admin(), _may_act_for(bigint), _check_session(bigint),
    session_open(text, integer, jsonb, interval) FROM PUBLIC;
