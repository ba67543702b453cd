-- jfs 0.2.4 -> 0.2.5.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.5 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Limits of a client role, enforced by the procedures (sql/schema.sql,
-- internal.sql, security.sql): read-only (no EXECUTE on the procedures that
-- write) and the squash of owner ids. Roles granted before have none: run
-- SELECT jfs.grant_client('ROLE') again for the new procedures.

CREATE TABLE client_role (
    role       name    PRIMARY KEY,
    read_only  boolean NOT NULL DEFAULT false,
    squash     text    NOT NULL DEFAULT 'none' CHECK (squash IN ('none', 'root', 'all')),
    squash_uid bigint  NOT NULL DEFAULT 65534 CHECK (squash_uid BETWEEN 0 AND 4294967294),
    squash_gid bigint  NOT NULL DEFAULT 65534 CHECK (squash_gid BETWEEN 0 AND 4294967294)
);
SELECT pg_catalog.pg_extension_config_dump('client_role', '');
REVOKE ALL ON TABLE client_role FROM PUBLIC;

CREATE FUNCTION _caller_limits() RETURNS SETOF client_role
LANGUAGE sql STABLE AS $$
    SELECT r.* FROM client_role r JOIN pg_catalog.pg_roles g ON g.rolname = r.role
     WHERE pg_catalog.pg_has_role(session_user, g.oid, 'MEMBER')
       AND NOT coalesce((SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = session_user), false)
$$;

CREATE FUNCTION _caller_squash(OUT kind text, OUT uid bigint, OUT gid bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(c.squash, 'none'), c.squash_uid, c.squash_gid
      FROM (SELECT 1) one LEFT JOIN LATERAL (
          SELECT r.squash, r.squash_uid, r.squash_gid FROM _caller_limits() r
           WHERE r.squash <> 'none'
           ORDER BY r.squash = 'all' DESC, r.role
           LIMIT 1) c ON true
$$;

CREATE FUNCTION _squashed(p_id bigint, p_kind text, p_to bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_kind = 'all' OR (p_kind = 'root' AND p_id = 0) THEN p_to ELSE p_id END
$$;

DROP FUNCTION grant_client(name);
DROP FUNCTION _grant_procedures(name, boolean);

CREATE FUNCTION write_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['mknod', 'symlink', 'link', 'unlink', 'rmdir', 'rename', 'setattr', 'set_acl',
             'setxattr', 'removexattr', 'write_slice', 'write_slices', 'zero_range', 'copy_range',
             'batch_unlink', 'rmr', 'clone_node', 'clone', 'compact_chunk', 'restore', 'trash_purge',
             'changelog_prune', 'free_unlinked', 'forget_delslices', 'alloc_ids', 'backup_claim',
             'backup_release', 'session_cleanup']::name[];

CREATE FUNCTION _grant_procedures(p_role name, p_admin boolean, p_read_only boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    FOR f IN SELECT p.oid::regprocedure AS proc, p.proname = ANY (jfs.write_procedures()) AS writes
               FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef
                AND (p_admin OR p.proname <> ALL (jfs.admin_procedures()))
              ORDER BY p.oid
    LOOP
        IF p_read_only AND f.writes THEN
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', f.proc, p_role);
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.proc, p_role);
        END IF;
    END LOOP;
END
$$;

CREATE FUNCTION grant_client(p_role name, p_read_only boolean DEFAULT NULL,
                             p_root_squash text DEFAULT NULL, p_all_squash text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_limits jfs.client_role;
    v_squash text := coalesce(nullif(p_all_squash, ''), nullif(p_root_squash, ''));
    v_ids text[];
BEGIN
    IF p_root_squash <> '' AND p_all_squash <> '' THEN
        RAISE EXCEPTION 'jfs.grant_client: a role has a root squash or an all squash, not both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_limits FROM jfs.client_role c WHERE c.role = p_role;
    IF NOT FOUND THEN
        v_limits := ROW(p_role, false, 'none', 65534, 65534);
    END IF;
    v_limits.read_only := coalesce(p_read_only, v_limits.read_only);
    IF v_squash IS NOT NULL THEN
        v_ids := regexp_match(v_squash, '^([0-9]{1,10}):([0-9]{1,10})$');
        IF v_ids IS NULL OR NOT jfs._id_ok(v_ids[1]::bigint) OR NOT jfs._id_ok(v_ids[2]::bigint) THEN
            RAISE EXCEPTION 'jfs.grant_client: a squash is UID:GID (each 0 .. 4294967294), not "%"', v_squash
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_limits.squash := CASE WHEN p_all_squash <> '' THEN 'all' ELSE 'root' END;
        v_limits.squash_uid := v_ids[1]::bigint;
        v_limits.squash_gid := v_ids[2]::bigint;
    ELSIF p_root_squash = '' OR p_all_squash = '' THEN
        v_limits.squash := 'none';
    END IF;
    PERFORM jfs._grant_procedures(p_role, false, v_limits.read_only);
    INSERT INTO jfs.client_role AS c VALUES (v_limits.*)
        ON CONFLICT (role) DO UPDATE
       SET read_only = excluded.read_only, squash = excluded.squash,
           squash_uid = excluded.squash_uid, squash_gid = excluded.squash_gid;
END
$$;

CREATE FUNCTION client_limits(OUT read_only boolean, OUT squash text, OUT squash_uid bigint, OUT squash_gid bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT coalesce((SELECT bool_or(r.read_only) FROM _caller_limits() r), false), q.kind, q.uid, q.gid
      FROM _caller_squash() q
$$;

CREATE OR REPLACE FUNCTION grant_admin(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jfs._grant_procedures(p_role, true, false);
    DELETE FROM jfs.client_role c WHERE c.role = p_role;
END
$$;

REVOKE EXECUTE ON FUNCTION _caller_limits(), _caller_squash(), _squashed(bigint, text, bigint),
    grant_client(name, boolean, text, text), write_procedures(), client_limits(),
    _grant_procedures(name, boolean, boolean) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Owner ids squashed where nodes are made or given (namespace.sql,
-- setattr.sql, clone.sql); a symlink target with a NUL byte and clone
-- owner ids out of range refused; forget_delslices only forgets slices
-- past the retention of freed objects (data.sql).

CREATE OR REPLACE FUNCTION mknod(
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
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR NO KEY UPDATE OF d;
    ELSE
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR KEY SHARE OF d;
    END IF;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF par.type <> 2 THEN
        RETURN _err(20);
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
    IF v_acl_tags IS NULL THEN
        n.mode := p_mode & 4095 & ~coalesce(p_umask, 0);
    ELSE
        n.mode := _acl_create_mode(p_mode & 4095, v_acl_tags, v_acl_perms);
    END IF;
    n.uid := p_uid;
    n.gid := p_gid;
    IF NOT (p_type = 2 AND p_mode & 4095 = 448 AND p_uid = 0 AND p_gid = 0
            AND (p_inode = _trash_inode() OR p_parent = _trash_inode())) THEN
        v_squash := _caller_squash();
        n.uid := _squashed(p_uid, v_squash.kind, v_squash.uid);
        n.gid := _squashed(p_gid, v_squash.kind, v_squash.gid);
    END IF;
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
    n.qroot := CASE WHEN p_type = 2 THEN par.qroot ELSE 0 END;
    n.used := 0;

    -- the new node and its entry, within every limit
    v_errno := _charge(true, _owner_key(par.owner_quotas, par.quota_uids, n.uid),
                       _owner_key(par.owner_quotas, par.quota_gids, n.gid), par.chain, p_parent, 1, 4096,
                       par.quota_limits);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, n.inode, p_type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, par.qroot, 1, 4096);
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

CREATE OR REPLACE FUNCTION setattr(
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
            v_errno := _charge_space(n.inode, n.uid, n.gid, _space(p_length) - _space(n.length), true);
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

CREATE OR REPLACE FUNCTION clone_node(p_src bigint, p_dst_parent bigint, p_dst_name bytea,
                           p_uid bigint DEFAULT NULL, p_gid bigint DEFAULT NULL)
RETURNS TABLE (errno integer, inode bigint, nodes bigint, space bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_errno integer := _check_name(p_dst_name);
    par record;
    v_src_type smallint;
    v_res record;
    v_roots bigint[];
    v_quota_errno integer := 0;
    v_owner record;
    v_squash record := _caller_squash();
BEGIN
    IF v_errno = 0 AND (NOT coalesce(_id_ok(p_uid), true) OR NOT coalesce(_id_ok(p_gid), true)) THEN
        v_errno := 22;
    END IF;
    IF v_errno <> 0 THEN
        RETURN QUERY SELECT v_errno, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    ELSIF _is_dot(p_dst_name) OR _reserved_name(p_dst_parent, p_dst_name) THEN
        RETURN QUERY SELECT 17, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    SELECT n.type INTO v_src_type FROM node n WHERE n.inode = p_src AND (n.nlink > 0 OR n.inode = 1);
    IF v_src_type IS NULL THEN
        RETURN QUERY SELECT 2, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    -- the destination directory: stays a directory, gains an entry (and a
    -- link when the clone is a directory)
    SELECT d.type, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns, s.quota_limits, s.owner_quotas
      INTO par
      FROM node d, setting s WHERE d.inode = p_dst_parent FOR NO KEY UPDATE OF d;
    IF NOT FOUND OR par.type <> 2 THEN
        RETURN QUERY SELECT CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_dst_parent AND e.name = p_dst_name) THEN
        RETURN QUERY SELECT 17, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    PERFORM _durability(par.meta_durability);

    -- the one statement: read the source tree and write its copy
    WITH RECURSIVE dirs(inode) AS (
        SELECT p_src WHERE v_src_type = 2
        UNION ALL
        SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2
    ), entries AS (
        SELECT e.parent, e.name, e.inode, e.type FROM edge e WHERE e.parent IN (SELECT d.inode FROM dirs d)
    ), links AS (
        -- entries naming each node inside the clone (the root: the new entry)
        SELECT x.inode, count(*)::integer AS k
          FROM (SELECT en.inode FROM entries en UNION ALL SELECT p_src) x GROUP BY x.inode
    ), numbered AS (
        SELECT l.inode, l.k, row_number() OVER () - 1 AS i FROM links l
    ), ids AS (
        UPDATE counter c SET next = c.next + (SELECT count(*) FROM numbered)
         WHERE c.name = 'inode'
        RETURNING c.next - (SELECT count(*) FROM numbered) AS first
    ), map AS (
        SELECT nb.inode AS old, ids.first + nb.i AS new, nb.k FROM numbered nb, ids
    ), new_nodes AS (
        INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, rdev, parent, tier, qroot, used)
        SELECT m.new, n.type, n.mode, _squashed(coalesce(p_uid, n.uid), v_squash.kind, v_squash.uid),
               _squashed(coalesce(p_gid, n.gid), v_squash.kind, v_squash.gid), n.atime, n.mtime, v_now,
               CASE WHEN n.type = 2 THEN n.nlink ELSE m.k END, n.length, n.rdev,
               CASE WHEN n.type <> 2 THEN 0 WHEN n.inode = p_src THEN p_dst_parent ELSE mp.new END,
               n.tier, CASE WHEN n.type = 2 THEN par.qroot ELSE 0 END, n.used
          FROM map m JOIN node n ON n.inode = m.old LEFT JOIN map mp ON mp.old = n.parent AND n.type = 2
        RETURNING node.inode, node.type, node.length, node.uid, node.gid
    ), new_entries AS (
        INSERT INTO edge (parent, name, inode, type)
        SELECT mp.new, en.name, mi.new, en.type
          FROM entries en JOIN map mp ON mp.old = en.parent JOIN map mi ON mi.old = en.inode
        UNION ALL
        SELECT p_dst_parent, p_dst_name, m.new, v_src_type FROM map m WHERE m.old = p_src
        RETURNING edge.parent, edge.inode
    ), entry_usage AS (
        -- what the new entries add to each directory holding them
        SELECT ne.parent, count(*) AS inodes, sum(_node_space(nn.type, nn.length)) AS space
          FROM new_entries ne JOIN new_nodes nn ON nn.inode = ne.inode GROUP BY ne.parent
    ), owner_usage AS (
        SELECT nn.uid, nn.gid, count(*) AS inodes, sum(_node_space(nn.type, nn.length)) AS space
          FROM new_nodes nn GROUP BY nn.uid, nn.gid
    ), old_slices AS (
        SELECT s.*, m.new FROM slice s JOIN map m ON s.inode = m.old
    ), new_slices AS (
        -- seq is kept: it orders the slices of one chunk, and the inode is new
        INSERT INTO slice (inode, chunk_index, seq, slice_id, slice_size, slice_off, len, pos)
        SELECT o.new, o.chunk_index, o.seq, o.slice_id, o.slice_size, o.slice_off, o.len, o.pos FROM old_slices o
        RETURNING 1
    ), shared AS (
        SELECT o.slice_id, count(*)::integer AS k FROM old_slices o WHERE o.slice_id <> 0 GROUP BY o.slice_id
    ), referenced AS (
        UPDATE slice_ref r SET refs = r.refs + sh.k FROM shared sh WHERE r.slice_id = sh.slice_id
        RETURNING r.slice_id
    ), new_targets AS (
        INSERT INTO symlink (inode, target) SELECT m.new, l.target FROM symlink l JOIN map m ON m.old = l.inode
        RETURNING 1
    ), new_xattrs AS (
        INSERT INTO xattr (inode, name, value) SELECT m.new, x.name, x.value FROM xattr x JOIN map m ON m.old = x.inode
        RETURNING 1
    ), new_acls AS (
        INSERT INTO acl (inode, kind, tag, qualifier, perm)
        SELECT m.new, a.kind, a.tag, a.qualifier, a.perm FROM acl a JOIN map m ON m.old = a.inode
        RETURNING 1
    )
    SELECT (SELECT m.new FROM map m WHERE m.old = p_src) AS root,
           (SELECT count(*) FROM map) AS mapped,
           (SELECT count(*) FROM new_nodes) AS nodes,
           (SELECT coalesce(sum(o.space), 0)::bigint FROM owner_usage o) AS space,
           (SELECT array_agg(o.uid) FROM owner_usage o) AS uids,
           (SELECT array_agg(o.gid) FROM owner_usage o) AS gids,
           (SELECT array_agg(o.inodes) FROM owner_usage o) AS owner_inodes,
           (SELECT array_agg(o.space::bigint) FROM owner_usage o) AS owner_spaces,
           (SELECT array_agg(u.parent) FROM entry_usage u) AS dirs,
           (SELECT array_agg(u.inodes) FROM entry_usage u) AS dir_inodes,
           (SELECT array_agg(u.space::bigint) FROM entry_usage u) AS dir_spaces,
           (SELECT count(*) FROM shared) AS shared,
           (SELECT count(*) FROM referenced) AS referenced,
           (SELECT count(*) FROM new_slices)
             + (SELECT count(*) FROM new_targets) + (SELECT count(*) FROM new_xattrs)
             + (SELECT count(*) FROM new_acls) AS rows
      INTO v_res;

    IF v_res.nodes <> v_res.mapped THEN
        -- the source itself went away between the first look and the copy
        RAISE EXCEPTION USING ERRCODE = 'no_data_found';
    ELSIF v_res.referenced <> v_res.shared THEN
        RAISE EXCEPTION 'jfs.clone: % of the source''s slices were freed while the clone ran', v_res.shared - v_res.referenced
            USING ERRCODE = 'serialization_failure', HINT = 'The source changed under the clone; run it again.';
    END IF;
    UPDATE node SET nlink = nlink + CASE WHEN v_src_type = 2 THEN 1 ELSE 0 END, mtime = v_now, ctime = v_now
     WHERE node.inode = p_dst_parent;

    -- usage: every entry of the clone is under the destination's quota
    -- roots (the new directories have no quota of their own); the new
    -- nodes count for the volume and their owners. Over a limit, the
    -- whole clone is undone.
    v_roots := _quota_roots(par.qroot);
    v_quota_errno := _charge(false, NULL, NULL, v_roots, 0,
                             (SELECT sum(i)::bigint FROM unnest(v_res.dir_inodes) i),
                             (SELECT sum(sp)::bigint FROM unnest(v_res.dir_spaces) sp), par.quota_limits);
    IF v_quota_errno = 0 THEN
        v_quota_errno := _charge(true, NULL, NULL, '{}', 0, v_res.nodes, v_res.space, par.quota_limits);
    END IF;
    IF par.owner_quotas THEN
        FOR v_owner IN SELECT * FROM unnest(v_res.uids, v_res.gids, v_res.owner_inodes, v_res.owner_spaces)
                                     u(uid, gid, inodes, space)
        LOOP
            EXIT WHEN v_quota_errno <> 0;
            v_quota_errno := _charge(false, v_owner.uid, v_owner.gid, '{}', 0, v_owner.inodes, v_owner.space,
                                     par.quota_limits);
        END LOOP;
    END IF;
    IF v_quota_errno <> 0 THEN
        -- what was charged already goes with the rest of the clone
        RAISE EXCEPTION 'over quota' USING ERRCODE = 'JQ000';
    END IF;
    INSERT INTO dir_stats AS d (inode, stripe, space, inodes)
    SELECT u.dir, _stripe(), u.space, u.inodes FROM unnest(v_res.dirs, v_res.dir_spaces, v_res.dir_inodes) u(dir, space, inodes)
        ON CONFLICT ON CONSTRAINT dir_stats_pkey
        DO UPDATE SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes;
    INSERT INTO change (op, inode, parent, name, inode2, uid, gid)
    SELECT 'clone', n.inode, p_dst_parent, p_dst_name, p_src, n.uid, n.gid FROM node n WHERE n.inode = v_res.root;
    RETURN QUERY SELECT 0, v_res.root, v_res.nodes, v_res.space;
EXCEPTION
    WHEN unique_violation THEN
        -- the name was taken by a create that committed after the check above
        RETURN QUERY SELECT 17, NULL::bigint, 0::bigint, 0::bigint;
    WHEN no_data_found THEN
        RETURN QUERY SELECT 2, NULL::bigint, 0::bigint, 0::bigint;
    WHEN SQLSTATE 'JQ000' THEN
        RETURN QUERY SELECT v_quota_errno, NULL::bigint, 0::bigint, 0::bigint;
END
$$;

CREATE OR REPLACE FUNCTION forget_delslices(p_slice_ids bigint[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM _begin();
    DELETE FROM delslice d
     WHERE d.slice_id = ANY (p_slice_ids)
       AND d.queued_at <= now() - (SELECT s.retain_deleted FROM setting s);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

