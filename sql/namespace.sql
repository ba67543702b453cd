-- Namespace procedures: lookup, getattr, mknod (every type), symlink,
-- readlink, link (unlink and rmdir: remove.sql). Each is one call, one transaction; expected
-- failures come back as errno, and row locks are taken in ascending inode order.

-- errno for an entry (p_parent, p_name) that was not found.
CREATE FUNCTION _missing(p_parent bigint, p_name bytea) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_type smallint;
BEGIN
    SELECT type INTO v_type FROM node WHERE inode = p_parent;
    IF v_type IS NULL THEN
        RETURN 2;
    ELSIF v_type <> 2 THEN
        RETURN 20;
    ELSIF _check_name(p_name) <> 0 THEN
        RETURN _check_name(p_name);
    END IF;
    RETURN 2;
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
    v_inodes bigint[];
    v_strengths integer[];
    ok boolean := true;
BEGIN
    IF cardinality(p_inodes) = 2 AND p_inodes[1] IS NOT NULL AND p_inodes[2] IS NOT NULL
       AND p_inodes[1] <> p_inodes[2] THEN
        -- the common case (a directory and one entry) without a sorting query
        -- (both locked even when the first is missing: a shard root has no
        -- node here, and its parent must still be locked)
        IF p_inodes[1] < p_inodes[2] THEN
            ok := _lock_node(p_inodes[1], p_modes[1]);
            RETURN _lock_node(p_inodes[2], p_modes[2]) AND ok;
        END IF;
        ok := _lock_node(p_inodes[2], p_modes[2]);
        RETURN _lock_node(p_inodes[1], p_modes[1]) AND ok;
    END IF;
    SELECT array_agg(i ORDER BY i), array_agg(strength ORDER BY i) INTO v_inodes, v_strengths
      FROM (SELECT i, max(CASE m WHEN 'update' THEN 3 WHEN 'nokey' THEN 2 ELSE 1 END) AS strength
              FROM unnest(p_inodes, p_modes) AS u(i, m)
             WHERE i IS NOT NULL
             GROUP BY i) x;
    FOR k IN 1..coalesce(cardinality(v_inodes), 0) LOOP
        IF NOT _lock_node(v_inodes[k], CASE v_strengths[k] WHEN 3 THEN 'update' WHEN 2 THEN 'nokey' ELSE 'share' END) THEN
            ok := false;
        END IF;
    END LOOP;
    RETURN ok;
END
$$;

-- Whether a directory has no entries. The ORDER BY matches the primary key
-- so the plan is always an index probe: a generic plan for a bare
-- EXISTS (... WHERE parent = $1) may pick a sequential scan, which finds
-- nothing only after reading every entry of the volume.
CREATE FUNCTION _dir_is_empty(p_dir bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM 1 FROM edge WHERE parent = p_dir ORDER BY parent, name LIMIT 1;
    RETURN NOT FOUND;
END
$$;

-- The node a name refers to in a directory. A shard root (a directory of
-- another shard, sql/shard.sql) is answered with errno 18 (EXDEV), its
-- inode and its type: its attributes are its shard's to give.
CREATE FUNCTION lookup(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    r attr;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    SELECT 0, e.inode, e.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
      INTO r
      FROM edge e LEFT JOIN node n ON n.inode = e.inode
     WHERE e.parent = p_parent AND e.name = p_name;
    IF FOUND AND r.mode IS NOT NULL THEN
        RETURN r;
    ELSIF FOUND AND _remote(r.inode) THEN
        r.errno := 18;
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

-- Makes every name of p_names in directory p_parent, in one call and one
-- transaction: regular files (p_type 1) or directories (2) of mode p_mode
-- less p_umask, owned by p_uid:p_gid, each as mknod makes it (a
-- directory's default ACL, setgid bit, the caller's squash, quotas: a name
-- refused is refused alone, with its errno). What a script that makes
-- many entries from SQL wants (JuiceFS users ask for it, #7278); at most
-- 100,000 names a call. Returns each name, in order, with its errno and
-- inode.
CREATE FUNCTION create_many(p_parent bigint, p_names bytea[], p_type integer DEFAULT 1,
                            p_mode integer DEFAULT 420, p_uid bigint DEFAULT 0, p_gid bigint DEFAULT 0,
                            p_umask integer DEFAULT 0)
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_type IS NULL OR p_type NOT IN (1, 2) THEN
        RAISE EXCEPTION 'jfs.create_many: makes files (type 1) or directories (2), not type %', p_type
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF coalesce(cardinality(p_names), 0) > 100000 THEN
        RAISE EXCEPTION 'jfs.create_many: at most 100000 names a call, not %', cardinality(p_names)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    RETURN QUERY
        SELECT u.name, m.errno, CASE WHEN m.errno = 0 THEN m.inode END
          FROM unnest(p_names) WITH ORDINALITY u(name, i)
         CROSS JOIN LATERAL mknod(p_parent, u.name, p_type, p_mode, p_uid, p_gid, 0, NULL, NULL, p_umask) m
         ORDER BY u.i;
END
$$;

CREATE FUNCTION getattr(p_inode bigint) RETURNS attr
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN _attr(p_inode);
END
$$;

-- The mode and owner of a node of type p_type asked for with mode p_mode
-- less p_umask, as p_uid:p_gid, in a directory of mode p_dir_mode and group
-- p_dir_gid: the directory's default ACL (p_acl_tags, p_acl_perms; NULL:
-- none) replaces the umask, the caller's squash (p_squash_kind 'none',
-- 'root' or 'all', to p_squash_uid:p_squash_gid) applies to the ids, and
-- a setgid directory gives its group (and, to a directory, the bit). The
-- one definition of what mknod and lease_commit make (a regress test runs
-- both over a matrix: tests/regress/sql/make_file.sql).
CREATE FUNCTION _made_node(p_type integer, p_mode integer, p_umask integer, p_uid bigint, p_gid bigint,
                           p_dir_mode integer, p_dir_gid bigint, p_acl_tags smallint[], p_acl_perms smallint[],
                           p_squash_kind text, p_squash_uid bigint, p_squash_gid bigint)
RETURNS TABLE (mode integer, uid bigint, gid bigint)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_acl_tags IS NULL THEN p_mode & 4095 & ~coalesce(p_umask, 0)
                ELSE _acl_create_mode(p_mode & 4095, p_acl_tags, p_acl_perms) END
           | CASE WHEN p_type = 2 AND p_dir_mode & 1024 <> 0 THEN 1024 ELSE 0 END,
           _squashed(p_uid, p_squash_kind, p_squash_uid),
           CASE WHEN p_dir_mode & 1024 <> 0 THEN p_dir_gid
                ELSE _squashed(p_gid, p_squash_kind, p_squash_gid) END
$$;

-- Creates a node of any type in p_parent: 1 file, 2 directory, 3 symlink
-- (p_target), 4 fifo, 5 block and 6 char device (p_rdev), 7 socket.
-- p_inode is an id from a range the client reserved with alloc_ids (another
-- is EINVAL); NULL allocates one here. /.trash and /.jfs.control are EEXIST
-- (the trash's own inode makes /.trash, owned by root, 0700: EPERM else). A directory with the set-group-id bit passes its group
-- (and, to subdirectories, the bit) on. A squashed role's owner ids are
-- squashed (_caller_squash, looked up only when some role is squashed:
-- setting.squash_roles), but for the trash's own directories. A
-- symlink target holds no NUL byte (EINVAL).
CREATE FUNCTION mknod(
    p_parent bigint, p_name bytea, p_type integer, p_mode integer, p_uid bigint, p_gid bigint,
    p_rdev bigint DEFAULT 0, p_target bytea DEFAULT NULL, p_inode bigint DEFAULT NULL,
    p_umask integer DEFAULT 0)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    par record;
    n node;
    v_acl_tags smallint[];
    v_acl_ids bigint[];
    v_acl_perms smallint[];
    v_squash record;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    ELSIF p_type IS NULL OR p_type NOT BETWEEN 1 AND 7 OR p_mode IS NULL OR p_uid IS NULL OR p_gid IS NULL
          OR NOT _mode_ok(p_mode, p_type) OR NOT _id_ok(p_uid) OR NOT _id_ok(p_gid) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND (p_target IS NULL OR length(p_target) = 0 OR position('\x00'::bytea IN p_target) > 0) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND length(p_target) > 4096 THEN
        RETURN _err(36);
    ELSIF p_inode = _trash_inode() THEN
        IF p_parent <> 1 OR p_name <> '\x2e7472617368'::bytea OR p_type <> 2 OR p_uid <> 0 OR p_gid <> 0
           OR p_mode & 4095 <> 448 THEN
            RETURN _err(1);
        END IF;
    ELSIF _reserved_name(p_parent, p_name) THEN
        RETURN _err(17);
    ELSIF p_inode IS NOT NULL AND (p_inode < 2 OR NOT _handed_out('inode', p_inode)
                                   OR EXISTS (SELECT 1 FROM node x WHERE x.inode = p_inode)) THEN
        RETURN _err(22);
    END IF;

    -- the parent must stay a directory until we commit: FOR KEY SHARE keeps
    -- rmdir out but lets other creates in (mkdir changes its nlink: NO KEY UPDATE)
    -- (with the settings and the chain of quota roots the entry is charged to)
    IF p_type = 2 THEN
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
               s.squash_roles, s.destroying
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR NO KEY UPDATE OF d;
    ELSE
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
               s.squash_roles, s.destroying
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR KEY SHARE OF d;
    END IF;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF par.type <> 2 THEN
        RETURN _err(20);
    ELSIF par.destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    IF par.meta_durability = 'fsync' THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);  -- _durability, without its call
    END IF;

    -- a directory's default ACL, if any, replaces the umask (sql/acl.sql)
    IF par.enable_acl AND p_type <> 3 THEN
        SELECT array_agg(a.tag ORDER BY a.tag, a.qualifier), array_agg(a.qualifier ORDER BY a.tag, a.qualifier),
               array_agg(a.perm ORDER BY a.tag, a.qualifier)
          INTO v_acl_tags, v_acl_ids, v_acl_perms
          FROM acl a WHERE a.inode = p_parent AND a.kind = 'd';
    END IF;

    n.inode := coalesce(p_inode, _next_ids('inode', 1));
    n.type := p_type::smallint;
    IF par.squash_roles AND NOT (p_type = 2 AND p_mode & 4095 = 448 AND p_uid = 0 AND p_gid = 0
                                 AND (p_inode = _trash_inode() OR p_parent = _trash_inode())) THEN
        v_squash := _caller_squash();
    ELSE
        SELECT 'none'::text AS kind, NULL::bigint AS uid, NULL::bigint AS gid INTO v_squash;
    END IF;
    SELECT m.mode, m.uid, m.gid INTO n.mode, n.uid, n.gid
      FROM _made_node(p_type, p_mode, p_umask, p_uid, p_gid, par.mode, par.gid, v_acl_tags, v_acl_perms,
                      v_squash.kind, v_squash.uid, v_squash.gid) m;
    n.atime := v_now; n.mtime := v_now; n.ctime := v_now;
    n.nlink := CASE WHEN p_type = 2 THEN 2 ELSE 1 END;
    n.length := CASE WHEN p_type = 3 THEN length(p_target) ELSE 0 END;
    n.rdev := CASE WHEN p_type IN (5, 6) THEN coalesce(p_rdev, 0) ELSE 0 END;
    n.parent := CASE WHEN p_type = 2 THEN p_parent ELSE 0 END;
    n.tier := par.tier;
    n.qroot := CASE WHEN p_type = 2 THEN par.qroot ELSE 0 END;
    n.used := 0;

    -- the new node and its entry, within every limit
    v_errno := _charge(true, _owner_key(par.owner_quotas, par.quota_uids, n.uid),
                       _owner_key(par.owner_quotas, par.quota_gids, n.gid), par.chain, p_parent, 1, 4096,
                       par.quota_limits, n.length);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, n.inode, p_type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, par.qroot, 1, 4096, n.length);
        PERFORM _uncharge_nodes(ARRAY[n.uid], ARRAY[n.gid], ARRAY[4096::bigint]);
        RETURN _err(17);
    END IF;
    INSERT INTO node VALUES (n.*);
    IF p_type = 3 THEN
        INSERT INTO symlink (inode, target) VALUES (n.inode, p_target);
    ELSIF v_acl_tags IS NOT NULL THEN
        PERFORM _acl_inherit(n.inode, p_type = 2, v_acl_tags, v_acl_ids, v_acl_perms);
    END IF;
    IF p_type = 2 THEN
        UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE inode = p_parent;
    ELSIF _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
    END IF;
    INSERT INTO change (op, inode, parent, name, uid, gid)
    VALUES ((ARRAY['create', 'mkdir', 'symlink', 'mknod', 'mknod', 'mknod', 'mknod'])[p_type],
            n.inode, p_parent, p_name, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

CREATE FUNCTION symlink(p_parent bigint, p_name bytea, p_target bytea, p_uid bigint, p_gid bigint,
                        p_inode bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN mknod(p_parent, p_name, 3, 511, p_uid, p_gid, 0, p_target, p_inode);
END
$$;

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
    v_pqroot bigint;
    v_limits boolean;
    n node;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) OR _reserved_name(p_parent, p_name) THEN
        RETURN _err(17);
    END IF;
    PERFORM _lock_nodes(ARRAY[p_inode, p_parent], ARRAY['nokey', 'share']);
    SELECT * INTO n FROM node WHERE inode = p_inode;
    SELECT d.type, d.qroot, st.quota_limits INTO v_ptype, v_pqroot, v_limits FROM node d, setting st WHERE d.inode = p_parent;
    IF (n.inode IS NULL OR v_ptype IS NULL) AND (p_inode >> 48 NOT IN (32767, s.shard)
                                                 OR p_parent >> 48 NOT IN (32767, s.shard)) THEN
        -- a link across shards, as across file systems
        RETURN _err(18);
    ELSIF n.inode IS NULL OR n.nlink = 0 OR v_ptype IS NULL THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(1);
    ELSIF v_ptype <> 2 THEN
        RETURN _err(20);
    END IF;
    -- a new entry: counted under p_parent and the directory quotas above it
    v_errno := _charge(false, NULL, NULL, _quota_roots(v_pqroot), p_parent, 1, _node_space(n.type, n.length), v_limits,
                       n.length);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, n.type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, v_pqroot, 1, _node_space(n.type, n.length), n.length);
        RETURN _err(17);
    END IF;
    UPDATE node SET nlink = nlink + 1, ctime = v_now WHERE inode = p_inode RETURNING * INTO n;
    PERFORM _touch_dir(p_parent, v_now, s.skip_dir_mtime_ns);
    INSERT INTO change (op, inode, parent, name, uid, gid) VALUES ('link', n.inode, p_parent, p_name, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;
