-- Namespace procedures: lookup, getattr, mknod (every type), symlink,
-- readlink, link, unlink, rmdir. Each is one call, one transaction; expected
-- failures come back as errno, and row locks are taken in ascending inode order.

-- errno for an entry (p_parent, p_name) that was not found.
CREATE FUNCTION _missing(p_parent bigint, p_name bytea) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM node WHERE inode = p_parent) THEN 2
        WHEN (SELECT type FROM node WHERE inode = p_parent) <> 2 THEN 20
        WHEN _check_name(p_name) <> 0 THEN _check_name(p_name)
        ELSE 2
    END
$$;

-- Locks one node in the given mode ('share' = FOR KEY SHARE, 'nokey' = FOR
-- NO KEY UPDATE, 'update' = FOR UPDATE); false if it does not exist.
CREATE FUNCTION _lock_node(p_inode bigint, p_mode text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_mode = 'share' THEN
        PERFORM 1 FROM node WHERE inode = p_inode FOR KEY SHARE;
    ELSIF p_mode = 'nokey' THEN
        PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    ELSE
        PERFORM 1 FROM node WHERE inode = p_inode FOR UPDATE;
    END IF;
    RETURN FOUND;
END
$$;

-- Locks nodes in ascending inode order (the global lock order), each in its
-- mode; a node listed twice is locked once in the strongest of its modes.
-- Returns false if any of them does not exist.
CREATE FUNCTION _lock_nodes(p_inodes bigint[], p_modes text[]) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    ok boolean := true;
BEGIN
    FOR r IN
        SELECT i, max(CASE m WHEN 'update' THEN 3 WHEN 'nokey' THEN 2 ELSE 1 END) AS strength
          FROM unnest(p_inodes, p_modes) AS u(i, m)
         WHERE i IS NOT NULL
         GROUP BY i ORDER BY i
    LOOP
        IF NOT _lock_node(r.i, CASE r.strength WHEN 3 THEN 'update' WHEN 2 THEN 'nokey' ELSE 'share' END) THEN
            ok := false;
        END IF;
    END LOOP;
    RETURN ok;
END
$$;

-- The node a name refers to in a directory.
CREATE FUNCTION lookup(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    r attr;
BEGIN
    SELECT 0, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier
      INTO r
      FROM edge e JOIN node n ON n.inode = e.inode
     WHERE e.parent = p_parent AND e.name = p_name;
    IF FOUND THEN
        RETURN r;
    END IF;
    IF _is_dot(p_name) THEN
        r := _attr(p_parent);
        IF r.errno <> 0 THEN
            RETURN r;
        ELSIF r.type <> 2 THEN
            RETURN _err(20);
        ELSIF p_name = '\x2e2e'::bytea THEN
            RETURN _attr(r.parent);
        END IF;
        RETURN r;
    END IF;
    RETURN _err(_missing(p_parent, p_name));
END
$$;

CREATE FUNCTION getattr(p_inode bigint) RETURNS attr
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS
$$ SELECT _attr(p_inode) $$;

-- Creates a node of any type in p_parent: 1 file, 2 directory, 3 symlink
-- (p_target), 4 fifo, 5 block and 6 char device (p_rdev), 7 socket.
-- p_inode is an id from a range the client reserved with alloc_ids; NULL
-- allocates one here. A directory with the set-group-id bit passes its group
-- (and, to subdirectories, the bit) on.
CREATE FUNCTION mknod(
    p_parent bigint, p_name bytea, p_type integer, p_mode integer, p_uid bigint, p_gid bigint,
    p_rdev bigint DEFAULT 0, p_target bytea DEFAULT NULL, p_inode bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    par node;
    n node;
BEGIN
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    ELSIF p_type IS NULL OR p_type NOT BETWEEN 1 AND 7 OR p_mode IS NULL OR p_uid IS NULL OR p_gid IS NULL THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND (p_target IS NULL OR length(p_target) = 0) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND length(p_target) > 4096 THEN
        RETURN _err(36);
    END IF;

    IF p_type = 2 THEN
        SELECT * INTO par FROM node WHERE inode = p_parent FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF par.type <> 2 THEN
        RETURN _err(20);
    END IF;

    n.inode := coalesce(p_inode, _next_ids('inode', 1));
    n.type := p_type::smallint;
    n.mode := p_mode & 4095;
    n.uid := p_uid;
    n.gid := p_gid;
    IF par.mode & 1024 <> 0 THEN
        n.gid := par.gid;
        IF p_type = 2 THEN
            n.mode := n.mode | 1024;
        END IF;
    END IF;
    n.atime := v_now; n.mtime := v_now; n.ctime := v_now;
    n.nlink := CASE WHEN p_type = 2 THEN 2 ELSE 1 END;
    n.length := CASE WHEN p_type = 3 THEN length(p_target) ELSE 0 END;
    n.rdev := CASE WHEN p_type IN (5, 6) THEN coalesce(p_rdev, 0) ELSE 0 END;
    n.parent := CASE WHEN p_type = 2 THEN p_parent ELSE 0 END;
    n.tier := par.tier;

    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, n.inode, p_type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        RETURN _err(17);
    END IF;
    INSERT INTO node VALUES (n.*);
    IF p_type = 3 THEN
        INSERT INTO symlink (inode, target) VALUES (n.inode, p_target);
    END IF;
    IF p_type = 2 THEN
        UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE inode = p_parent;
    ELSE
        PERFORM _touch_dir(p_parent, v_now, s.skip_dir_mtime_ns);
    END IF;
    PERFORM _charge(1, 4096);
    RETURN _to_attr(n);
END
$$;

CREATE FUNCTION symlink(p_parent bigint, p_name bytea, p_target bytea, p_uid bigint, p_gid bigint,
                        p_inode bigint DEFAULT NULL)
RETURNS attr
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS
$$ SELECT mknod(p_parent, p_name, 3, 511, p_uid, p_gid, 0, p_target, p_inode) $$;

CREATE FUNCTION readlink(p_inode bigint, OUT errno integer, OUT target bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    SELECT s.target INTO target FROM symlink s WHERE s.inode = p_inode;
    IF FOUND THEN
        errno := 0;
    ELSIF EXISTS (SELECT 1 FROM node WHERE inode = p_inode) THEN
        errno := 22;
    ELSE
        errno := 2;
    END IF;
END
$$;

-- A new name p_name in p_parent for the non-directory p_inode.
CREATE FUNCTION link(p_inode bigint, p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    v_ptype smallint;
    n node;
BEGIN
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    END IF;
    PERFORM _lock_nodes(ARRAY[p_inode, p_parent], ARRAY['nokey', 'share']);
    SELECT * INTO n FROM node WHERE inode = p_inode;
    SELECT type INTO v_ptype FROM node WHERE inode = p_parent;
    IF n.inode IS NULL OR n.nlink = 0 OR v_ptype IS NULL THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(1);
    ELSIF v_ptype <> 2 THEN
        RETURN _err(20);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, n.type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        RETURN _err(17);
    END IF;
    UPDATE node SET nlink = nlink + 1, ctime = v_now WHERE inode = p_inode RETURNING * INTO n;
    PERFORM _touch_dir(p_parent, v_now, s.skip_dir_mtime_ns);
    RETURN _to_attr(n);
END
$$;

-- Removes the name p_name (not a directory) from p_parent. At zero links
-- the node is freed, unless p_open_inode says the calling session p_sid has
-- it open: then it stays (nlink 0) until that session releases it.
-- Returns the node as it is after the call (nlink 0 when it lost its last link).
CREATE FUNCTION unlink(p_parent bigint, p_name bytea, p_sid bigint DEFAULT 0, p_open_inode bigint DEFAULT 0)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_child bigint;
    v_type smallint;
    n node;
BEGIN
    IF _is_dot(p_name) THEN
        RETURN _err(21);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type INTO v_child, v_type FROM edge e WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v_type = 2 THEN
            RETURN _err(21);
        END IF;
        PERFORM _lock_nodes(ARRAY[p_parent, v_child], ARRAY['share', 'update']);
        -- the entry may have changed while we waited for the locks
        DELETE FROM edge WHERE parent = p_parent AND name = p_name AND inode = v_child;
        IF FOUND THEN
            UPDATE node SET nlink = nlink - 1, ctime = v_now WHERE inode = v_child RETURNING * INTO n;
            PERFORM _touch_dir(p_parent, v_now, s.skip_dir_mtime_ns);
            PERFORM _after_unlink(v_child, n.nlink, p_sid, p_open_inode);
            RETURN _to_attr(n);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'unlink: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- Removes the empty directory p_name from p_parent.
CREATE FUNCTION rmdir(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_child bigint;
    v_type smallint;
    n node;
BEGIN
    IF p_name = '\x2e'::bytea THEN
        RETURN _err(22);
    ELSIF p_name = '\x2e2e'::bytea THEN
        RETURN _err(39);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type INTO v_child, v_type FROM edge e WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v_type <> 2 THEN
            RETURN _err(20);
        END IF;
        PERFORM _lock_nodes(ARRAY[p_parent, v_child], ARRAY['nokey', 'update']);
        IF EXISTS (SELECT 1 FROM edge WHERE parent = p_parent AND name = p_name AND inode = v_child) THEN
            IF EXISTS (SELECT 1 FROM edge WHERE parent = v_child) THEN
                RETURN _err(39);
            END IF;
            DELETE FROM edge WHERE parent = p_parent AND name = p_name;
            DELETE FROM node WHERE inode = v_child RETURNING * INTO n;
            DELETE FROM xattr WHERE inode = v_child;
            DELETE FROM dir_stats WHERE inode = v_child;
            UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent;
            PERFORM _charge(-1, -4096);
            n.nlink := 0;
            RETURN _to_attr(n);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'rmdir: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;
