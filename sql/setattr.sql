-- setattr: mode, owner, times and size (truncate) of one node in one call.
--
-- p_set is a bit mask (JuiceFS's values): 1 mode, 2 uid, 4 gid, 8 size,
-- 16 atime, 32 mtime, 64 ctime, 128 atime = now, 256 mtime = now.

-- Sets the length of the locked regular file p: shrinking drops the slices
-- of whole chunks past the end and covers the rest of the boundary chunk
-- with a hole slice (id 0), so growing it again later reads zeros. The
-- caller has charged the change of space (_charge_space).
CREATE FUNCTION _truncate(p node, p_length bigint, p_now bigint) RETURNS node
LANGUAGE plpgsql AS $$
DECLARE
    v_chunk bigint := _chunk_size();
    v_boundary bigint;
    v_pos bigint;
    v_end bigint;
    n node;
BEGIN
    IF p_length < p.length THEN
        -- what showed data past the new end goes from "used"
        p.used := CASE WHEN p_length = 0 THEN 0 ELSE p.used - _data_size(p.inode, p_length, p.length) END;
        IF (p_length + v_chunk - 1) / v_chunk <= 2147483647 THEN   -- else no whole chunk is past the end
            PERFORM _drop_slices(ARRAY[p.inode], ((p_length + v_chunk - 1) / v_chunk)::integer);
        END IF;
        IF p_length % v_chunk <> 0 THEN
            v_boundary := p_length / v_chunk;
            v_pos := p_length % v_chunk;
            v_end := least(p.length - v_boundary * v_chunk, v_chunk);
            IF v_end > v_pos THEN
                INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
                VALUES (p.inode, v_boundary, 0, 0, 0, v_end - v_pos, v_pos);
            END IF;
        END IF;
    END IF;
    UPDATE node SET length = p_length, used = p.used, mtime = p_now, ctime = p_now
     WHERE inode = p.inode RETURNING * INTO n;
    RETURN n;
END
$$;

-- A read of node p_inode (or a listing of it), now: its atime moves to now
-- when p_strict (strictatime), unless it moved less than a second ago;
-- else (relatime, as Linux's) only when it is not after the node's mtime
-- or ctime, or is a day old. The ctime stays, and nothing is logged for
-- other mounts (an atime is as loose as that everywhere). Its commit is
-- asynchronous: no fsync vouches for an atime. Returns the atime (NULL:
-- no such node).
CREATE FUNCTION touch_atime(p_inode bigint, p_strict boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_atime bigint;
BEGIN
    PERFORM _begin();
    PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
    UPDATE node n SET atime = v_now
     WHERE n.inode = p_inode AND n.atime < v_now - 1000000000
       AND (p_strict OR n.atime <= n.mtime OR n.atime <= n.ctime OR n.atime <= v_now - 86400000000000)
    RETURNING n.atime INTO v_atime;
    IF NOT FOUND THEN
        SELECT n.atime INTO v_atime FROM node n WHERE n.inode = p_inode;
    END IF;
    RETURN v_atime;
END
$$;

CREATE FUNCTION setattr(
    p_inode bigint, p_set integer,
    p_mode integer DEFAULT NULL, p_uid bigint DEFAULT NULL, p_gid bigint DEFAULT NULL,
    p_atime bigint DEFAULT NULL, p_mtime bigint DEFAULT NULL, p_ctime bigint DEFAULT NULL,
    p_length bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_set integer := coalesce(p_set, 0);
    v_errno integer;
    v_new_uid bigint;
    v_new_gid bigint;
    v_truncated boolean := false;
    v_squash record;
    f record;
    n node;
BEGIN
    IF (v_set & 1 <> 0 AND p_mode IS NULL) OR (v_set & 2 <> 0 AND p_uid IS NULL)
       OR (v_set & 4 <> 0 AND p_gid IS NULL) OR (v_set & 8 <> 0 AND (p_length IS NULL OR p_length < 0))
       OR (v_set & 16 <> 0 AND p_atime IS NULL) OR (v_set & 32 <> 0 AND p_mtime IS NULL)
       OR (v_set & 64 <> 0 AND p_ctime IS NULL)
       OR (v_set & 2 <> 0 AND NOT _id_ok(p_uid)) OR (v_set & 4 <> 0 AND NOT _id_ok(p_gid)) THEN
        RETURN _err(22);
    END IF;
    IF v_set & 8 <> 0 AND p_length >= 144115188075855872 THEN  -- 2^57: chunk index past int range
        RETURN _err(27);
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR UPDATE;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF v_set & 1 <> 0 AND NOT _mode_ok(p_mode, n.type) THEN
        RETURN _err(22);
    END IF;
    IF v_set & 8 <> 0 THEN
        IF n.type = 2 THEN
            RETURN _err(21);
        ELSIF n.type <> 1 THEN
            RETURN _err(22);
        END IF;
        IF p_length <> n.length THEN
            v_errno := _charge_space(n.inode, n.uid, n.gid, _space(p_length) - _space(n.length), true,
                                     p_length - n.length);
            IF v_errno <> 0 THEN
                RETURN _err(v_errno);
            END IF;
            n := _truncate(n, p_length, v_now);
            v_truncated := true;
        END IF;
    END IF;
    IF (v_set & 2 <> 0 AND p_uid <> n.uid) OR (v_set & 4 <> 0 AND p_gid <> n.gid) THEN
        -- a new owner: the node's usage moves to the new user/group quotas
        v_new_uid := CASE WHEN v_set & 2 <> 0 AND p_uid <> n.uid THEN p_uid END;
        v_new_gid := CASE WHEN v_set & 4 <> 0 AND p_gid <> n.gid THEN p_gid END;
        -- a squashed role gives nothing to root (root squash); under all
        -- squash it may only give its own nodes to its own group
        v_squash := _caller_squash();
        IF (v_squash.kind = 'root' AND (v_new_uid = 0 OR v_new_gid = 0))
           OR (v_squash.kind = 'all' AND (v_new_uid IS NOT NULL
                                          OR (v_new_gid IS NOT NULL
                                              AND (n.uid <> v_squash.uid OR v_new_gid <> v_squash.gid)))) THEN
            RETURN _err(1);
        END IF;
        SELECT quota_limits, owner_quotas INTO f FROM setting;
        IF f.owner_quotas THEN
            v_errno := _charge(false, v_new_uid, v_new_gid, '{}', 0, 1, _node_space(n.type, n.length), f.quota_limits);
            IF v_errno <> 0 THEN
                RETURN _err(v_errno);
            END IF;
            PERFORM _charge(false, CASE WHEN v_new_uid IS NOT NULL THEN n.uid END,
                            CASE WHEN v_new_gid IS NOT NULL THEN n.gid END, '{}', 0, -1, -_node_space(n.type, n.length),
                            false);
        END IF;
    END IF;
    IF v_set & 1 <> 0 THEN n.mode := p_mode & 4095; END IF;
    IF v_set & 2 <> 0 THEN n.uid := p_uid; END IF;
    IF v_set & 4 <> 0 THEN n.gid := p_gid; END IF;
    IF v_set & 128 <> 0 THEN n.atime := v_now; ELSIF v_set & 16 <> 0 THEN n.atime := p_atime; END IF;
    IF v_set & 256 <> 0 THEN n.mtime := v_now; ELSIF v_set & 32 <> 0 THEN n.mtime := p_mtime; END IF;
    n.ctime := CASE WHEN v_set & 64 <> 0 THEN p_ctime ELSE v_now END;
    IF v_set & ~8 <> 0 THEN
        UPDATE node SET mode = n.mode, uid = n.uid, gid = n.gid, atime = n.atime, mtime = n.mtime, ctime = n.ctime
         WHERE inode = p_inode;
    END IF;
    IF v_set & ~8 <> 0 OR v_truncated THEN
        INSERT INTO change (op, inode, uid, gid)
        VALUES (CASE WHEN v_truncated THEN 'truncate' ELSE 'setattr' END, n.inode, n.uid, n.gid);
    END IF;
    RETURN _to_attr(n);
END
$$;
