-- File locks shared by every mount (table plock): POSIX record locks with
-- their split-and-merge rules, and BSD flock locks, which the kernel sends
-- as whole-file records of the open file's owner. A lock is taken or
-- refused in one transaction, serialized per file by its node row; a
-- blocked F_SETLKW is the client's loop of setlk calls with p_wait, each
-- refreshing its lock_wait row, which deadlock detection follows. Locks go
-- with their owner's close (unlock_owner) and with their session.

-- The locks of owners other than (p_sid, p_owner) on file p_inode that
-- conflict with locking p_start..p_end as p_type: overlapping ranges, one
-- side exclusive; first byte first.
CREATE FUNCTION _lock_conflicts(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
                                p_start bigint, p_end bigint) RETURNS SETOF plock
LANGUAGE sql STABLE AS $$
    SELECT * FROM plock l
     WHERE l.inode = p_inode AND (l.sid, l.owner) <> (p_sid, p_owner)
       AND l.lstart <= p_end AND l.lend >= p_start AND (l.ltype = 1 OR p_type = 1)
     ORDER BY l.lstart
$$;

-- Whether owner (p_sid, p_owner), waiting for the range, waits (through
-- other waiting owners) on itself. Wait rows not refreshed lately (a
-- client gone from its loop) do not count.
CREATE FUNCTION _lock_deadlock(p_sid bigint, p_owner bigint, p_inode bigint, p_type integer,
                               p_start bigint, p_end bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        WITH RECURSIVE blocker (sid, owner) AS (
            SELECT l.sid, l.owner FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end) l
            UNION
            SELECT l.sid, l.owner
              FROM blocker b
              JOIN lock_wait w ON w.sid = b.sid AND w.owner = b.owner AND w.at > now() - interval '5 seconds'
              CROSS JOIN LATERAL _lock_conflicts(w.inode, w.sid, w.owner, w.ltype, w.lstart, w.lend) l
        )
        SELECT EXISTS (SELECT 1 FROM blocker b WHERE b.sid = p_sid AND b.owner = p_owner));
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
CREATE FUNCTION setlk(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
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

-- fcntl(F_GETLK): the first lock of another owner that conflicts with
-- locking p_start..p_end as p_type, or ltype 2 (F_UNLCK) when none does.
CREATE FUNCTION getlk(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
                      p_start bigint, p_end bigint,
                      OUT ltype integer, OUT lstart bigint, OUT lend bigint, OUT pid integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    SELECT l.ltype, l.lstart, l.lend, l.pid INTO ltype, lstart, lend, pid
      FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end) l
     LIMIT 1;
    IF NOT FOUND THEN
        ltype := 2; lstart := p_start; lend := p_end; pid := 0;
    END IF;
END
$$;

-- Drops every lock owner p_owner of session p_sid holds on file p_inode
-- (the close of a file by a process, the last close of an flock'd open
-- file); returns how many ranges went.
CREATE FUNCTION unlock_owner(p_inode bigint, p_sid bigint, p_owner bigint) RETURNS integer
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
CREATE FUNCTION cancel_lock_wait(p_inode bigint, p_sid bigint, p_owner bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _check_session(p_sid);
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
END
$$;

-- Who holds which locks, for people: the file's path, the session's host.
CREATE VIEW locks AS
SELECT l.inode, path(l.inode) AS path, l.sid, s.host, l.pid, l.owner,
       CASE l.ltype WHEN 0 THEN 'shared' ELSE 'exclusive' END AS type,
       l.lstart AS start, CASE WHEN l.lend = 9223372036854775807 THEN NULL ELSE l.lend END AS "end"
  FROM plock l LEFT JOIN session s ON s.sid = l.sid;
