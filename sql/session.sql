-- Mount sessions: register, heartbeat, close, clean up dead ones, and
-- release open-but-unlinked inodes (sustained) on last close.

-- Refuses a new session on a volume `jfs destroy` is removing
-- (destroy_begin). FOR SHARE: destroy_begin, which locks the row, waits for
-- the new session to commit, then sees it.
CREATE FUNCTION _refuse_if_destroying() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_destroying timestamptz;
BEGIN
    SELECT s.destroying INTO v_destroying FROM setting s FOR SHARE;
    IF NOT FOUND THEN
        -- (a destroy_finish that emptied the volume while this waited)
        RAISE EXCEPTION 'jfs: the database holds no volume: no session opens'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'jfs format makes one.';
    ELSIF v_destroying IS NOT NULL THEN
        RAISE EXCEPTION 'jfs: the volume is being destroyed (jfs destroy): no session opens'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('jfs destroy began at %s.', v_destroying),
                  HINT = 'Run jfs destroy again to finish removing it, then jfs format a new volume.';
    END IF;
END
$$;

CREATE FUNCTION session_register(p_host text DEFAULT '', p_pid integer DEFAULT 0, p_info jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
BEGIN
    PERFORM _refuse_if_destroying();
    INSERT INTO session (host, pid, info) VALUES (coalesce(p_host, ''), coalesce(p_pid, 0), coalesce(p_info, '{}'))
    RETURNING sid INTO v_sid;
    RETURN v_sid;
END
$$;

-- A new session of the caller's login role (only it, or an administrator,
-- acts for it), which other mounts end only after p_timeout without a
-- heartbeat (its mount's --session-timeout, at least a second and at most
-- an hour: a session that claimed a century kept its locks past its
-- mount's end). None opens on a volume being destroyed.
CREATE FUNCTION session_open(p_host text, p_pid integer, p_info jsonb, p_timeout interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
BEGIN
    PERFORM _refuse_if_destroying();
    INSERT INTO session (host, pid, info, session_timeout)
    VALUES (coalesce(p_host, ''), coalesce(p_pid, 0), coalesce(p_info, '{}'),
            least(greatest(coalesce(p_timeout, '5 minutes'), '1 second'), '1 hour'))
    RETURNING sid INTO v_sid;
    RETURN v_sid;
END
$$;

-- 0, or 2 (ENOENT) when the session was cleaned up as dead: the client must
-- register again (and its sustained inodes are gone).
CREATE FUNCTION session_heartbeat(p_sid bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    UPDATE session SET heartbeat = now() WHERE sid = p_sid;
    RETURN CASE WHEN FOUND THEN 0 ELSE 2 END;
END
$$;

-- Ends a locked session: its open-unlinked inodes are released (freed when
-- no other session holds them), its locks dropped, its row deleted.
CREATE FUNCTION _end_session(p_sid bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_inode bigint;
    v_released integer := 0;
BEGIN
    FOR v_inode IN DELETE FROM sustained WHERE sid = p_sid RETURNING inode LOOP
        PERFORM 1 FROM node WHERE inode = v_inode FOR UPDATE;
        IF _unheld(v_inode) THEN
            PERFORM _free_node(v_inode);
        END IF;
        v_released := v_released + 1;
    END LOOP;
    DELETE FROM lock_wait WHERE sid = p_sid;
    DELETE FROM plock WHERE sid = p_sid;
    DELETE FROM dir_lease WHERE sid = p_sid;
    DELETE FROM session WHERE sid = p_sid;
    RETURN v_released;
END
$$;

CREATE FUNCTION session_close(p_sid bigint) RETURNS integer
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
-- the session's own timeout (at most an hour: so no client can end a live
-- one, and none lives on silent); any client may call it. Returns the
-- number of sessions ended. (An administrator ends any session at once
-- with session_close.)
CREATE FUNCTION session_cleanup(p_timeout interval DEFAULT '5 minutes') RETURNS integer
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

-- Ends the transactions that keep others waiting for their locks: a
-- transaction of a role that does not administer jfs, open for 5 seconds
-- or more, that holds a lock some backend of this database has waited for
-- 5 seconds or more, and that is not itself at work: idle in its
-- transaction (BEGIN; SELECT jfs.rename(...) and no COMMIT), asleep
-- (pg_sleep beside a procedure) or waiting for an advisory lock, or running
-- for 5 minutes. A row a procedure locked would otherwise stall every mount
-- that needs it for as long as such a client likes. A holder that waits
-- for a row lock itself is left: the end of the chain is ended instead.
-- Mounts call it when a call of theirs has waited 5 seconds (their own
-- call may be what waits); returns the number of backends ended.
CREATE FUNCTION end_stalling() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    h record;
    v_count integer := 0;
BEGIN
    FOR h IN
        SELECT DISTINCT b.pid, b.usename, b.state, now() - b.xact_start AS open_for
          FROM pg_locks w
         CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS k(pid)
          JOIN pg_stat_activity b ON b.pid = k.pid
          JOIN pg_roles r ON r.oid = b.usesysid
         WHERE NOT w.granted AND w.waitstart < now() - interval '5 seconds'
           AND b.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
           AND b.pid <> pg_backend_pid()
           AND b.xact_start < now() - interval '5 seconds'
           AND NOT r.rolsuper
           AND NOT has_function_privilege(r.oid, 'jfs.set_retain_deleted(interval)', 'EXECUTE')
           AND (b.state <> 'active'
                OR b.wait_event_type = 'Timeout'
                OR (b.wait_event_type = 'Lock' AND b.wait_event = 'advisory')
                OR b.xact_start < now() - interval '5 minutes')
    LOOP
        IF pg_terminate_backend(h.pid) THEN
            RAISE LOG 'jfs.end_stalling: ended backend % of role % (%, its transaction open for %), which held locks others waited for',
                h.pid, h.usename, h.state, h.open_for;
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END
$$;

-- The session closed its last handle of p_inode: an unlinked inode no
-- other session holds is freed. 0, or 2 if p_sid did not hold it.
CREATE FUNCTION release(p_sid bigint, p_inode bigint) RETURNS integer
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

-- Whether node p_inode (locked by the caller) has no name and nobody
-- holds it: no session has it open, and it is not kept in unlinked for
-- other mounts (free_unlinked frees those).
CREATE FUNCTION _unheld(p_inode bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM node WHERE inode = p_inode AND nlink = 0)
       AND NOT EXISTS (SELECT 1 FROM sustained WHERE inode = p_inode)
       AND NOT EXISTS (SELECT 1 FROM unlinked WHERE inode = p_inode);
END
$$;

-- Session p_sid holds those of p_inodes (files it has open) that lost
-- their last name elsewhere and are still kept (nlink 0, in unlinked or
-- held by another session): they stay until it releases them (release,
-- or the end of its session). A mount calls it when it reads a removal
-- from the change log. Returns the inodes among p_inodes it holds.
CREATE FUNCTION sustain(p_sid bigint, p_inodes bigint[]) RETURNS bigint[]
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

-- Frees the files kept in unlinked for longer than p_grace (at least a
-- second) that no session holds; those held are left to their last
-- holder's release. Any client may call it (mounts do, in the background).
-- Returns the number of files freed.
CREATE FUNCTION free_unlinked(p_limit integer DEFAULT 10000, p_grace interval DEFAULT '10 seconds')
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_due bigint[];
    v_free bigint[];
BEGIN
    PERFORM _begin();
    SELECT array_agg(u.inode) INTO v_due
      FROM (SELECT inode FROM unlinked
             WHERE at < now() - greatest(p_grace, interval '1 second')
             ORDER BY at LIMIT p_limit FOR UPDATE SKIP LOCKED) u;
    IF v_due IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM node WHERE inode = ANY (v_due) ORDER BY inode FOR UPDATE;
    DELETE FROM unlinked WHERE inode = ANY (v_due);
    SELECT array_agg(n.inode) INTO v_free
      FROM node n
     WHERE n.inode = ANY (v_due) AND n.nlink = 0
       AND NOT EXISTS (SELECT 1 FROM sustained s WHERE s.inode = n.inode);
    IF v_free IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM _free_nodes(v_free);
    RETURN cardinality(v_free);
END
$$;

-- The mounted clients, for `jfs status` (clients may not read the tables).
CREATE FUNCTION sessions()
RETURNS TABLE (sid bigint, host text, pid integer, info jsonb, started timestamptz, heartbeat timestamptz,
               sustained bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.sid, s.host, s.pid, s.info, s.started, s.heartbeat,
           (SELECT count(*) FROM sustained u WHERE u.sid = s.sid)
      FROM session s ORDER BY s.sid
$$;
