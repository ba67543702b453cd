-- jfs 0.2.16 -> 0.2.17.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.17 makes from sql/:
-- tests/upgrade/check.sh compares the two. Roles are granted the new
-- procedures (take_lease, lease_unlink, want_lease) by running
-- jfs.grant_client again.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Directory leases: a mount answers a run of unlinks in one directory
-- itself and commits them in batches, while other sessions' reads and
-- changes of the directory's entries wait (sql/lease.sql).

-- Directory leases (sql/lease.sql): the session that alone reads and
-- changes a directory's entries for now, and since when another asks for it.
CREATE TABLE dir_lease (
    dir    bigint      PRIMARY KEY,
    sid    bigint      NOT NULL,
    taken  timestamptz NOT NULL DEFAULT now(),
    wanted timestamptz
);
CREATE INDEX dir_lease_sid ON dir_lease (sid);

-- Refuses: directory p_dir's lease is held by session p_holder.
CREATE FUNCTION _leased(p_dir bigint, p_holder bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'jfs: directory % is leased by session %', p_dir, p_holder
        USING ERRCODE = 'JL000', DETAIL = p_dir::text,
              HINT = 'Ask for the lease with jfs.want_lease(dir) and call again: its holder gives it up within 50 ms.';
END
$$;

-- Refuses when a session other than the caller's holds the lease of any
-- of directories p_dirs (the caller's session is worked out only then).
CREATE FUNCTION _unleased(p_dirs bigint[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
    v_me bigint;
    v_known boolean := false;
BEGIN
    FOR l IN SELECT d.dir, d.sid FROM dir_lease d WHERE d.dir = ANY (p_dirs) LOOP
        IF NOT v_known THEN
            v_me := _change_session();
            v_known := true;
        END IF;
        IF l.sid IS DISTINCT FROM v_me THEN
            PERFORM _leased(l.dir, l.sid);
        END IF;
    END LOOP;
END
$$;

-- Reads and changes of a directory's entries check its lease first
-- (changes of jfs.edge are checked by a trigger too, below, but a change
-- that answers EEXIST, ENOENT or ENOTEMPTY reads the directory alone).

-- The node a name refers to in a directory.
CREATE OR REPLACE FUNCTION lookup(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    r attr;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    SELECT 0, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
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

-- Creates a node of any type in p_parent: 1 file, 2 directory, 3 symlink
-- (p_target), 4 fifo, 5 block and 6 char device (p_rdev), 7 socket.
-- p_inode is an id from a range the client reserved with alloc_ids (another
-- is EINVAL); NULL allocates one here. /.trash and /.jfs.control are EEXIST
-- (the trash's own inode makes /.trash, owned by root, 0700: EPERM else). A directory with the set-group-id bit passes its group
-- (and, to subdirectories, the bit) on. A squashed role's owner ids are
-- squashed (_caller_squash, looked up only when some role is squashed:
-- setting.squash_roles), but for the trash's own directories. A
-- symlink target holds no NUL byte (EINVAL).
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
    IF v_acl_tags IS NULL THEN
        n.mode := p_mode & 4095 & ~coalesce(p_umask, 0);
    ELSE
        n.mode := _acl_create_mode(p_mode & 4095, v_acl_tags, v_acl_perms);
    END IF;
    n.uid := p_uid;
    n.gid := p_gid;
    IF par.squash_roles AND NOT (p_type = 2 AND p_mode & 4095 = 448 AND p_uid = 0 AND p_gid = 0
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

-- A new name p_name in p_parent for the non-directory p_inode.
CREATE OR REPLACE FUNCTION link(p_inode bigint, p_parent bigint, p_name bytea) RETURNS attr
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
    IF n.inode IS NULL OR n.nlink = 0 OR v_ptype IS NULL THEN
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

-- Removes the name p_name (not a directory) from p_parent. At zero links
-- the node is freed, unless p_open_inodes (the inodes the calling session
-- p_sid has open) holds it: then it stays (nlink 0) until that session releases it.
-- Returns the node as it is after the call (nlink 0 when it lost its last link).
CREATE OR REPLACE FUNCTION unlink(p_parent bigint, p_name bytea, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}')
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v record;
    par record;
    c node;
    v_trashed integer;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    IF _is_dot(p_name) THEN
        RETURN _err(21);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days, s.destroying INTO v
          FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v.destroying IS NOT NULL THEN
            PERFORM _destroyed();
        ELSIF v.inode = _trash_inode() THEN
            RETURN _err(1);
        ELSIF v.type = 2 THEN
            RETURN _err(21);
        END IF;
        -- with a trash, a last link moves there instead
        IF attempt = 1 AND v.trash_days > 0 AND (SELECT n.nlink FROM node n WHERE n.inode = v.inode) = 1 THEN
            v_trashed := _to_trash(p_parent, p_name);
            IF v_trashed = 0 THEN
                RETURN _attr(v.inode);
            END IF;
        END IF;
        IF attempt = 1 THEN
            PERFORM _durability(v.meta_durability);
        END IF;
        -- lock order: ascending inode
        IF p_parent < v.inode THEN
            SELECT mtime, ctime, qroot INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
            SELECT * INTO c FROM node WHERE inode = v.inode FOR UPDATE;
        ELSE
            SELECT * INTO c FROM node WHERE inode = v.inode FOR UPDATE;
            SELECT mtime, ctime, qroot INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
        END IF;
        -- the entry may have changed while we waited for the locks
        DELETE FROM edge WHERE parent = p_parent AND name = p_name AND inode = v.inode;
        IF FOUND THEN
            PERFORM _uncharge_entry(p_parent, par.qroot, 1, _node_space(c.type, c.length), c.length);
            c.nlink := c.nlink - 1;
            c.ctime := v_now;
            IF c.nlink > 0 THEN
                UPDATE node SET nlink = c.nlink, ctime = v_now WHERE inode = c.inode;
            ELSIF NOT _keep_open(c.inode, p_sid, p_open_inodes) THEN
                -- a node that had links has no sustained rows: nobody else holds it
                PERFORM _free_node(c.inode);
            END IF;
            IF _dir_times_stale(par.mtime, par.ctime, v_now, v.skip_dir_mtime_ns) THEN
                UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
            END IF;
            INSERT INTO change (op, inode, parent, name, uid, gid)
            VALUES ('unlink', c.inode, p_parent, p_name, c.uid, c.gid);
            RETURN _to_attr(c);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'unlink: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- Removes the empty directory p_name from p_parent.
CREATE OR REPLACE FUNCTION rmdir(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_child bigint;
    v_type smallint;
    v_pqroot bigint;
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
        ELSIF v_child = _trash_inode() THEN
            RETURN _err(1);
        ELSIF v_type <> 2 THEN
            RETURN _err(20);
        END IF;
        -- (the directory removed is read: it must not be leased elsewhere either)
        PERFORM _unleased(ARRAY[p_parent, v_child]);
        PERFORM _lock_nodes(ARRAY[p_parent, v_child], ARRAY['nokey', 'update']);
        IF EXISTS (SELECT 1 FROM edge WHERE parent = p_parent AND name = p_name AND inode = v_child) THEN
            IF NOT _dir_is_empty(v_child) THEN
                RETURN _err(39);
            END IF;
            -- with a trash, the directory moves there instead
            IF s.trash_days > 0 AND _to_trash(p_parent, p_name) = 0 THEN
                RETURN _attr(v_child);
            END IF;
            DELETE FROM edge WHERE parent = p_parent AND name = p_name;
            DELETE FROM node WHERE inode = v_child RETURNING * INTO n;
            DELETE FROM xattr WHERE inode = v_child;
            DELETE FROM acl WHERE inode = v_child;
            PERFORM _forget_dirs(ARRAY[v_child]);
            UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent
            RETURNING qroot INTO v_pqroot;
            PERFORM _uncharge_entry(p_parent, v_pqroot, 1, 4096);
            PERFORM _uncharge_nodes(ARRAY[n.uid], ARRAY[n.gid], ARRAY[4096::bigint]);
            n.nlink := 0;
            INSERT INTO change (op, inode, parent, name, uid, gid)
            VALUES ('rmdir', n.inode, p_parent, p_name, n.uid, n.gid);
            RETURN _to_attr(n);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'rmdir: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- Moves (p_parent, p_name) to (p_new_parent, p_new_name). A replaced
-- non-directory loses that link and, at zero links, is freed unless the
-- session p_sid has it open (p_open_inodes). Directories that move between
-- parents take a volume-wide transaction lock first (as Linux takes its
-- per-superblock rename mutex), so two renames can never build a cycle.
-- Nothing moves to /.trash or /.jfs.control, and the trash does not move
-- (EPERM). Returns errno, the moved inode, and the replaced (or exchanged)
-- inode with its nlink after the call (0 and NULL when nothing was replaced).
CREATE OR REPLACE FUNCTION rename(
    p_parent bigint, p_name bytea, p_new_parent bigint, p_new_name bytea,
    p_flags integer DEFAULT 0, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}',
    OUT errno integer, OUT inode bigint, OUT replaced bigint, OUT replaced_nlink integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_exchange boolean := coalesce(p_flags, 0) & 2 <> 0;
    v_noreplace boolean := coalesce(p_flags, 0) & 1 <> 0;
    v_cross boolean := p_parent <> p_new_parent;
    v_src bigint; v_src_type smallint;
    v_dst bigint; v_dst_type smallint;
    v_dir_type smallint;
    v_mode text;
    v_skip bigint;
    v_destroying timestamptz;
    v_moves_dir boolean;
    v_locked_tree boolean := false;
    v_now_src bigint; v_now_dst bigint;
    v_nlink integer;
    v_src_node node;
    v_dst_node node;
    v_gone node;
BEGIN
    replaced := 0;
    PERFORM _unleased(ARRAY[p_parent, p_new_parent]);
    IF coalesce(p_flags, 0) & ~3 <> 0 OR (v_exchange AND v_noreplace) THEN
        errno := 22; RETURN;
    END IF;
    IF _is_dot(p_name) OR _is_dot(p_new_name) THEN
        errno := CASE WHEN v_noreplace THEN 17 ELSE 16 END; RETURN;
    END IF;
    errno := greatest(_check_name(p_name), _check_name(p_new_name));
    IF errno <> 0 THEN
        RETURN;
    ELSIF _reserved_name(p_new_parent, p_new_name) THEN
        errno := 1; RETURN;
    END IF;

    FOR attempt IN 1..5 LOOP
        SELECT se.inode, se.type, de.inode, de.type, st.meta_durability, st.skip_dir_mtime_ns, st.destroying
          INTO v_src, v_src_type, v_dst, v_dst_type, v_mode, v_skip, v_destroying
          FROM setting st
          LEFT JOIN edge se ON se.parent = p_parent AND se.name = p_name
          LEFT JOIN edge de ON de.parent = p_new_parent AND de.name = p_new_name;
        IF v_destroying IS NOT NULL THEN
            PERFORM _destroyed();
        ELSIF v_src IS NULL THEN
            errno := _missing(p_parent, p_name); RETURN;
        ELSIF v_src = _trash_inode() THEN
            errno := 1; RETURN;
        END IF;
        inode := v_src;
        IF v_dst IS NULL THEN
            SELECT n.type INTO v_dir_type FROM node n WHERE n.inode = p_new_parent;
            IF v_dir_type IS NULL THEN
                errno := 2; RETURN;
            ELSIF v_dir_type <> 2 THEN
                errno := 20; RETURN;
            ELSIF v_exchange THEN
                errno := 2; RETURN;
            END IF;
        ELSIF v_noreplace THEN
            errno := 17; RETURN;
        ELSIF v_dst = v_src THEN
            -- both names are links to one file: POSIX says do nothing
            errno := 0; RETURN;
        ELSIF NOT v_exchange AND v_src_type = 2 AND v_dst_type <> 2 THEN
            errno := 20; RETURN;
        ELSIF NOT v_exchange AND v_src_type <> 2 AND v_dst_type = 2 THEN
            errno := 21; RETURN;
        END IF;
        IF attempt = 1 THEN
            PERFORM _durability(v_mode);
        END IF;

        v_moves_dir := v_cross AND (v_src_type = 2 OR (v_exchange AND v_dst_type = 2));
        IF v_moves_dir AND NOT v_locked_tree THEN
            PERFORM pg_advisory_xact_lock(1785095027, 1);  -- 'jfs' rename lock
            v_locked_tree := true;
        END IF;
        IF v_cross OR v_dst IS NOT NULL THEN
            PERFORM _lock_nodes(ARRAY[p_parent, p_new_parent, v_src, v_dst],
                                ARRAY['share', 'share', 'update', 'update']);
        ELSE
            PERFORM _lock_nodes(ARRAY[p_parent, v_src], ARRAY['share', 'update']);
        END IF;
        -- both entries must still be what we read before waiting for the locks
        SELECT (SELECT e.inode FROM edge e WHERE e.parent = p_parent AND e.name = p_name),
               (SELECT e.inode FROM edge e WHERE e.parent = p_new_parent AND e.name = p_new_name)
          INTO v_now_src, v_now_dst;
        IF v_now_src IS DISTINCT FROM v_src OR v_now_dst IS DISTINCT FROM v_dst
           OR (v_moves_dir AND NOT v_locked_tree) THEN
            CONTINUE;
        END IF;

        IF v_cross AND v_src_type = 2 AND _is_ancestor(v_src, p_new_parent) THEN
            errno := 22; RETURN;
        END IF;
        IF v_cross AND v_exchange AND v_dst_type = 2 AND _is_ancestor(v_dst, p_parent) THEN
            errno := 22; RETURN;
        END IF;
        IF NOT v_exchange AND v_dst_type = 2 THEN
            PERFORM _unleased(ARRAY[v_dst]);
            IF NOT _dir_is_empty(v_dst) THEN
                errno := 39; RETURN;
            END IF;
        END IF;

        -- usage: a move between directories under different quota roots
        -- must fit the new roots' limits (refused before anything changes)
        IF v_cross THEN
            SELECT * INTO v_src_node FROM node WHERE node.inode = v_src;
            errno := _move_entry(v_src, v_src_node.type, v_src_node.length, p_parent, p_new_parent);
            IF errno <> 0 THEN
                RETURN;
            END IF;
            IF v_exchange THEN
                SELECT * INTO v_dst_node FROM node WHERE node.inode = v_dst;
                errno := _move_entry(v_dst, v_dst_node.type, v_dst_node.length, p_new_parent, p_parent);
                IF errno <> 0 THEN
                    -- undo the first move (it fitted where it was)
                    PERFORM _move_entry(v_src, v_src_node.type, v_src_node.length, p_new_parent, p_parent);
                    RETURN;
                END IF;
            END IF;
        END IF;

        IF v_exchange THEN
            UPDATE edge SET inode = v_dst, type = v_dst_type WHERE parent = p_parent AND name = p_name;
            UPDATE edge SET inode = v_src, type = v_src_type WHERE parent = p_new_parent AND name = p_new_name;
            UPDATE node SET ctime = v_now,
                   parent = CASE WHEN node.type <> 2 THEN node.parent
                                 WHEN node.inode = v_src THEN p_new_parent ELSE p_parent END
             WHERE node.inode IN (v_src, v_dst);
            IF v_cross THEN
                -- p_parent loses src if it is a directory and gains dst if that is one
                v_nlink := (v_dst_type = 2)::integer - (v_src_type = 2)::integer;
                IF v_nlink <> 0 THEN
                    UPDATE node SET nlink = nlink + CASE WHEN node.inode = p_parent THEN v_nlink ELSE -v_nlink END
                     WHERE node.inode IN (p_parent, p_new_parent);
                END IF;
            END IF;
            replaced := v_dst;
            SELECT n.nlink INTO replaced_nlink FROM node n WHERE n.inode = v_dst;
        ELSE
            IF v_dst IS NOT NULL AND v_dst_type <> 2
               AND (SELECT n.nlink FROM node n WHERE n.inode = v_dst) = 1
               AND _to_trash(p_new_parent, p_new_name) = 0 THEN
                -- with a trash, the replaced file moves there
                replaced := v_dst;
                replaced_nlink := 1;
            ELSIF v_dst IS NOT NULL THEN
                DELETE FROM edge WHERE parent = p_new_parent AND name = p_new_name;
                replaced := v_dst;
                SELECT * INTO v_gone FROM node WHERE node.inode = v_dst;
                PERFORM _uncharge_entry(p_new_parent, (SELECT n.qroot FROM node n WHERE n.inode = p_new_parent),
                                        1, _node_space(v_gone.type, v_gone.length), v_gone.length);
                IF v_dst_type = 2 THEN
                    DELETE FROM node WHERE node.inode = v_dst;
                    DELETE FROM xattr WHERE xattr.inode = v_dst;
                    DELETE FROM acl WHERE acl.inode = v_dst;
                    PERFORM _forget_dirs(ARRAY[v_dst]);
                    UPDATE node SET nlink = nlink - 1 WHERE node.inode = p_new_parent;
                    PERFORM _uncharge_nodes(ARRAY[v_gone.uid], ARRAY[v_gone.gid], ARRAY[4096::bigint]);
                    replaced_nlink := 0;
                ELSE
                    UPDATE node SET nlink = nlink - 1, ctime = v_now WHERE node.inode = v_dst
                    RETURNING nlink INTO replaced_nlink;
                    IF replaced_nlink = 0 AND NOT _keep_open(v_dst, p_sid, p_open_inodes) THEN
                        PERFORM _free_node(v_dst);
                    END IF;
                END IF;
            END IF;
            UPDATE edge SET parent = p_new_parent, name = p_new_name, cookie = nextval('edge_cookie')
             WHERE parent = p_parent AND name = p_name;
            IF v_cross AND v_src_type = 2 THEN
                UPDATE node SET ctime = v_now, parent = p_new_parent WHERE node.inode = v_src;
                UPDATE node SET nlink = nlink + CASE WHEN node.inode = p_new_parent THEN 1 ELSE -1 END
                 WHERE node.inode IN (p_parent, p_new_parent);
            ELSE
                UPDATE node SET ctime = v_now WHERE node.inode = v_src;
            END IF;
        END IF;
        PERFORM _touch_dir(p_parent, v_now, v_skip);
        IF v_cross THEN
            PERFORM _touch_dir(p_new_parent, v_now, v_skip);
        END IF;
        INSERT INTO change (op, inode, parent, name, parent2, name2, inode2, uid, gid)
        SELECT CASE WHEN v_exchange THEN 'exchange' ELSE 'rename' END, v_src, p_parent, p_name,
               p_new_parent, p_new_name, nullif(replaced, 0), n.uid, n.gid
          FROM node n WHERE n.inode = v_src;
        errno := 0;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'rename: entries kept changing under concurrent operations; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

CREATE OR REPLACE FUNCTION readdir(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    PERFORM _unleased(ARRAY[p_dir]);
    RETURN QUERY
        SELECT 0, e.cookie, e.name, e.inode, e.type
          FROM edge e
         WHERE e.parent = p_dir AND e.cookie > coalesce(p_cookie, 0)
         ORDER BY e.cookie
         LIMIT least(greatest(coalesce(p_limit, 1000), 1), 100000);
    IF NOT FOUND THEN
        v_errno := _readdir_error(p_dir);
        IF v_errno <> 0 THEN
            RETURN QUERY SELECT v_errno, NULL::bigint, NULL::bytea, NULL::bigint, NULL::smallint;
        END IF;
    END IF;
END
$$;

-- A page of a directory as readdirplus gives it, and whether each node has
-- extended attributes (any name getxattr could find; POSIX ACLs are kept
-- apart, sql/acl.sql): a mount answers getxattr of the others without
-- asking. `ls -l` asks each file for security.selinux, and backup tools
-- ask for more.
CREATE OR REPLACE FUNCTION readdirplus_xattrs(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint, mode integer,
               uid bigint, gid bigint, atime bigint, mtime bigint, ctime bigint, nlink integer,
               length bigint, rdev bigint, parent bigint, tier smallint, used bigint, xattrs boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    PERFORM _unleased(ARRAY[p_dir]);
    RETURN QUERY
        SELECT 0, e.cookie, e.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
               n.nlink, n.length, n.rdev, n.parent, n.tier, n.used,
               EXISTS (SELECT 1 FROM xattr x WHERE x.inode = n.inode)
          FROM edge e JOIN node n ON n.inode = e.inode
         WHERE e.parent = p_dir AND e.cookie > coalesce(p_cookie, 0)
         ORDER BY e.cookie
         LIMIT least(greatest(coalesce(p_limit, 1000), 1), 100000);
    IF NOT FOUND THEN
        v_errno := _readdir_error(p_dir);
        IF v_errno <> 0 THEN
            RETURN QUERY SELECT v_errno, NULL::bigint, NULL::bytea, NULL::bigint, NULL::smallint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::bigint, NULL::boolean;
        END IF;
    END IF;
END
$$;

-- A lookup that reads ahead, for a mount whose callers stat a directory's
-- entries one by one (find, du, ls -l, rsync walk a listing and stat each
-- name): entry p_name of p_dir and, after it, up to p_limit entries in
-- listing order (by cookie: find, du) and up to p_limit in name order (ls
-- sorts), each with its attributes, so that the next names are answered
-- from the mount's cache instead of a round trip each. No row for a name
-- that is not there (the caller looks it up alone); at most 10000 each way.
CREATE OR REPLACE FUNCTION lookup_ahead(p_dir bigint, p_name bytea, p_limit integer DEFAULT 1000)
RETURNS TABLE (name bytea, inode bigint, type smallint, mode integer, uid bigint, gid bigint, atime bigint,
               mtime bigint, ctime bigint, nlink integer, length bigint, rdev bigint, parent bigint,
               tier smallint, used bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _unleased(ARRAY[p_dir]);
    RETURN QUERY
    WITH here AS (
        SELECT e.cookie FROM edge e WHERE e.parent = p_dir AND e.name = p_name
    ), ahead AS (
        (SELECT e.name, e.inode FROM edge e, here h
          WHERE e.parent = p_dir AND e.cookie >= h.cookie
          ORDER BY e.cookie LIMIT least(greatest(coalesce(p_limit, 1000), 0), 10000) + 1)
        UNION
        (SELECT e.name, e.inode FROM edge e, here h
          WHERE e.parent = p_dir AND e.name >= p_name
          ORDER BY e.name LIMIT least(greatest(coalesce(p_limit, 1000), 0), 10000) + 1)
    )
    SELECT a.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
      FROM ahead a JOIN node n ON n.inode = a.inode;
END
$$;

-- batch_unlink's work, also for lease_unlink (names removed only while
-- they name the node given).

-- batch_unlink's work; with p_inodes (one per name, NULL: any), a name is
-- removed only while it names that node (jfs.lease_unlink).
CREATE FUNCTION _unlink_names(p_parent bigint, p_names bytea[], p_inodes bigint[], p_sid bigint,
                              p_open_inodes bigint[])
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now bigint := _now();
    par record;
    v_targets bigint[];
    v_done_names bytea[];
    v_done_inodes bigint[];
    v_spaces bigint[];
    v_lengths bigint[];
BEGIN
    SELECT d.type, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days, s.destroying INTO par
      FROM node d, setting s WHERE d.inode = p_parent;
    IF par.destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    IF par.type IS DISTINCT FROM 2 THEN
        RETURN QUERY SELECT u.n, CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, NULL::bigint
                       FROM unnest(p_names) WITH ORDINALITY u(n, i) ORDER BY u.i;
        RETURN;
    END IF;
    IF par.trash_days > 0 AND NOT _in_trash(p_parent) THEN
        -- with a trash: one unlink per name (each last link moves there), same
        -- transaction; with p_inodes, only a name that names its node
        FOR k IN 1..coalesce(cardinality(p_names), 0) LOOP
            name := p_names[k];
            IF _is_dot(name) THEN
                errno := 21; inode := NULL;
            ELSIF p_inodes IS NOT NULL AND NOT EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent
                                                          AND e.name = p_names[k] AND e.inode = p_inodes[k]) THEN
                errno := 2; inode := NULL;
            ELSE
                SELECT x.errno, CASE WHEN x.errno = 0 THEN x.inode END INTO errno, inode
                  FROM unlink(p_parent, p_names[k], p_sid, p_open_inodes) x;
            END IF;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;
    PERFORM _durability(par.meta_durability);

    -- lock the nodes named and the parent in ascending inode order
    SELECT array_agg(DISTINCT e.inode) INTO v_targets
      FROM edge e JOIN unnest(p_names, p_inodes) u(n, ino) ON e.name = u.n AND (u.ino IS NULL OR e.inode = u.ino)
     WHERE e.parent = p_parent AND e.type <> 2;
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_targets) AND n.inode < p_parent ORDER BY n.inode FOR UPDATE;
    PERFORM 1 FROM node n WHERE n.inode = p_parent FOR KEY SHARE;
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_targets) AND n.inode > p_parent ORDER BY n.inode FOR UPDATE;

    -- under the locks: drop the entries and the links they held
    WITH gone AS (
        DELETE FROM edge e USING unnest(p_names, p_inodes) u(n, ino)
         WHERE e.parent = p_parent AND e.name = u.n AND (u.ino IS NULL OR e.inode = u.ino) AND e.type <> 2
        RETURNING e.name, e.inode
    )
    SELECT array_agg(g.name), array_agg(g.inode), array_agg(_node_space(n.type, n.length)), array_agg(n.length)
      INTO v_done_names, v_done_inodes, v_spaces, v_lengths
      FROM gone g JOIN node n ON n.inode = g.inode;
    IF v_done_inodes IS NOT NULL THEN
        PERFORM _uncharge_entries(array_fill(p_parent, ARRAY[cardinality(v_done_inodes)]), v_spaces, v_lengths);
    END IF;
    PERFORM _drop_links(v_done_inodes, v_now, p_sid, p_open_inodes);
    IF v_done_names IS NOT NULL AND _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    END IF;
    INSERT INTO change (op, inode, parent, name)
    SELECT 'unlink', d.i, p_parent, d.nm FROM unnest(v_done_names, v_done_inodes) d(nm, i);

    RETURN QUERY
        SELECT u.n,
               CASE WHEN u.n = ANY (v_done_names) THEN 0
                    WHEN _check_name(u.n) <> 0 THEN _check_name(u.n)
                    WHEN _is_dot(u.n) THEN 21
                    WHEN EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = u.n) THEN 21
                    ELSE 2 END,
               (SELECT d.i FROM unnest(v_done_names, v_done_inodes) d(nm, i) WHERE d.nm = u.n LIMIT 1)
          FROM unnest(p_names) WITH ORDINALITY u(n, i)
         ORDER BY u.i;
END
$$;

-- Removes the non-directory entries p_names of p_parent: entries deleted,
-- nlink decremented, nodes at zero links freed (or kept for session p_sid if
-- listed in p_open_inodes), their slices released and freed slices queued in
-- delslice, usage updated: a handful of set-based statements whatever the
-- number of names. One row per given name: errno 0 (removed, with the inode),
-- 2 ENOENT, 21 EISDIR (a directory, or . / ..), 22/36 for a bad name.
CREATE OR REPLACE FUNCTION batch_unlink(p_parent bigint, p_names bytea[], p_sid bigint DEFAULT 0,
                             p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM _unlink_names(p_parent, p_names, NULL, p_sid, p_open_inodes);
END
$$;

-- A session that ends gives its leases up.

-- Ends a locked session: its open-unlinked inodes are released (freed when
-- no other session holds them), its locks dropped, its row deleted.
CREATE OR REPLACE FUNCTION _end_session(p_sid bigint) RETURNS integer
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

-- take_lease and lease_unlink write.
-- The procedures that change the file system (its names, attributes and
-- data, the trash, the change log, the queue of freed objects, backups,
-- other mounts' dead sessions): not granted to a read-only client role.
-- Such a role reads, keeps its own session, locks and files held open, and
-- calls sync.
CREATE OR REPLACE FUNCTION write_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['mknod', 'symlink', 'link', 'unlink', 'rmdir', 'rename', 'setattr', 'set_acl',
             'setxattr', 'removexattr', 'write_slice', 'write_slices', 'zero_range', 'copy_range',
             'batch_unlink', 'rmr', 'clone_node', 'clone', 'compact_chunk', 'restore', 'trash_purge',
             'changelog_prune', 'free_unlinked', 'forget_delslices', 'alloc_ids', 'backup_claim',
             'backup_release', 'session_cleanup', 'take_lease', 'lease_unlink']::name[];

-- ---------------------------------------------------------------------------
-- Directory leases. A mount that removes many entries of one directory
-- (rm -rf, a cleaner) takes the directory's lease (take_lease, which gives
-- it the directory's entries), answers the unlinks itself and commits them
-- in batches (lease_unlink). While a session holds a directory's lease, no
-- other session reads or changes its entries: lookup, lookup_ahead and the
-- readdirs refuse (_unleased), and so does any change of its entries (the
-- triggers on edge), with SQLSTATE JL000 and the directory in DETAIL. The
-- refused caller asks for the lease (want_lease) and calls again; the
-- holder gives it up at its next commit, within its batch window (50 ms).
-- A holder whose session is gone, or that has not committed for 5 seconds,
-- loses it at the first want_lease: what it had not committed is lost, as
-- in its crash (or, if it still lives, committed late: lease_unlink
-- removes a name only while it names the node the lease found).
-- The caller's session is its connection's (application_name jfs:SID,
-- checked against the role that registered it: _change_session).
-- Administration (dump, fsck, summary, jfs.ls) reads past leases.

-- After any statement that changes entries: their directories must not be
-- leased to another session. Every procedure that changes a directory's
-- entries locks the directory (FOR KEY SHARE at least) first, and
-- take_lease locks it FOR UPDATE: a change in flight when a lease is taken
-- commits before the lease does, and one after it sees the lease here.
-- (Its search_path is pinned: it also runs for statements outside the
-- procedures, a restore's COPY, an administrator's UPDATE.)
CREATE FUNCTION _edge_unleased() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM _unleased(ARRAY(SELECT DISTINCT a.parent FROM added a));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM _unleased(ARRAY(SELECT DISTINCT g.parent FROM gone g));
    ELSE
        PERFORM _unleased(ARRAY(SELECT a.parent FROM added a UNION SELECT g.parent FROM gone g));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER edge_unleased_insert AFTER INSERT ON edge
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION _edge_unleased();
CREATE TRIGGER edge_unleased_update AFTER UPDATE ON edge
    REFERENCING OLD TABLE AS gone NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION _edge_unleased();
CREATE TRIGGER edge_unleased_delete AFTER DELETE ON edge
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION _edge_unleased();

-- Asks for directory p_dir's lease, after a call was refused with SQLSTATE
-- JL000: its holder gives it up at its next commit. True when the
-- directory is free now: no lease, or one that ends here because its
-- holder's session is gone or silent past its timeout, or because the
-- holder has not committed for 5 seconds (a live holder commits, and so
-- renews it, every 50 ms, and gives it up after a window without unlinks).
CREATE FUNCTION want_lease(p_dir bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    l record;
BEGIN
    SELECT d.sid, d.taken, d.wanted,
           d.taken >= now() - interval '5 seconds' AND s.sid IS NOT NULL
           AND s.heartbeat >= now() - coalesce(s.session_timeout, interval '5 minutes') AS live
      INTO l
      FROM dir_lease d LEFT JOIN session s ON s.sid = d.sid WHERE d.dir = p_dir;
    IF NOT FOUND THEN
        RETURN true;
    ELSIF NOT l.live THEN
        -- (unless its holder committed meanwhile, and so renewed it)
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = l.sid AND taken = l.taken;
        RETURN FOUND OR NOT EXISTS (SELECT 1 FROM dir_lease WHERE dir = p_dir);
    ELSIF l.wanted IS NULL THEN
        UPDATE dir_lease SET wanted = now() WHERE dir = p_dir AND wanted IS NULL;
    END IF;
    RETURN false;
END
$$;

-- Whether a client of version p_version (a session's info->>'version')
-- asks for a lease a call was refused for: jfs 0.2.17 and later.
CREATE FUNCTION _knows_leases(p_version text) RETURNS boolean
LANGUAGE sql IMMUTABLE
RETURN coalesce(string_to_array(substring(p_version FROM '^[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}'), '.')::integer[]
                >= ARRAY[0, 2, 17], false);

-- Session p_sid takes directory p_dir's lease. Changes in flight in the
-- directory are waited for (their lock of it), then its entries are
-- returned: errno 0 and their names, inodes, types and link counts, in
-- name order. A lease the session holds already is taken again. Else no
-- lease, and errno 11 (EAGAIN) when another live session holds it (asked
-- for, as by want_lease), 27 (EFBIG) when the directory has more than
-- p_limit entries, 2 or 20 when it is missing or not a directory, 22 for a
-- session that is not registered, 95 (EOPNOTSUPP) while a session of an
-- older client, or of a role that may not call want_lease, is registered
-- (it would fail its calls in the directory instead of asking for the
-- lease). Taken again, a lease stays asked for if it was.
CREATE FUNCTION take_lease(p_sid bigint, p_dir bigint, p_limit integer DEFAULT 10000,
                           OUT errno integer, OUT names bytea[], OUT inodes bigint[], OUT types smallint[],
                           OUT nlinks integer[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_type smallint;
    v_holder bigint;
    v_limit integer := least(greatest(coalesce(p_limit, 10000), 1), 100000);
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF NOT EXISTS (SELECT 1 FROM session s WHERE s.sid = p_sid) THEN
        errno := 22;
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM session s
                   WHERE s.sid <> p_sid
                     AND (NOT _knows_leases(s.info ->> 'version')
                          OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = s.role
                                        AND NOT has_function_privilege(r.oid, 'jfs.want_lease(bigint)', 'EXECUTE'))))
    THEN
        errno := 95;
        RETURN;
    END IF;
    SELECT n.type INTO v_type FROM node n WHERE n.inode = p_dir FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2;
        RETURN;
    ELSIF v_type <> 2 THEN
        errno := 20;
        RETURN;
    END IF;
    SELECT d.sid INTO v_holder FROM dir_lease d WHERE d.dir = p_dir;
    IF FOUND AND v_holder <> p_sid AND NOT want_lease(p_dir) THEN
        errno := 11;
        RETURN;
    END IF;
    SELECT array_agg(x.name ORDER BY x.name), array_agg(x.inode ORDER BY x.name),
           array_agg(x.type ORDER BY x.name), array_agg(n.nlink ORDER BY x.name)
      INTO names, inodes, types, nlinks
      FROM (SELECT e.name, e.inode, e.type FROM edge e WHERE e.parent = p_dir
             ORDER BY e.parent, e.name LIMIT v_limit + 1) x
      JOIN node n ON n.inode = x.inode;
    IF cardinality(names) > v_limit THEN
        errno := 27;
        names := NULL; inodes := NULL; types := NULL; nlinks := NULL;
        RETURN;
    END IF;
    INSERT INTO dir_lease AS d (dir, sid) VALUES (p_dir, p_sid)
        ON CONFLICT (dir) DO UPDATE SET sid = p_sid, taken = now();
    errno := 0;
    names := coalesce(names, '{}');
    inodes := coalesce(inodes, '{}');
    types := coalesce(types, '{}');
    nlinks := coalesce(nlinks, '{}');
END
$$;

-- Commits the unlinks session p_sid answered itself in directory p_dir:
-- each of p_names is removed while it still names node p_inodes[i] (so a
-- lease lost meanwhile never removes what another session made), as
-- batch_unlink removes (p_open_inodes: the mount's open files, kept for it).
-- Then the lease is kept when p_keep and no other session asked for it;
-- else it ends. errnos: one per name, 0 (removed) or 2 (it named another
-- node, or none); kept: whether the session holds the lease now.
CREATE FUNCTION lease_unlink(p_sid bigint, p_dir bigint, p_names bytea[], p_inodes bigint[],
                             p_open_inodes bigint[], p_keep boolean,
                             OUT errnos integer[], OUT kept boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF cardinality(p_names) IS DISTINCT FROM cardinality(p_inodes) THEN
        RAISE EXCEPTION 'jfs.lease_unlink: % names and % inodes', cardinality(p_names), cardinality(p_inodes)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_names) > 0 THEN
        SELECT array_agg(CASE WHEN x.errno = 0 THEN 0 ELSE 2 END ORDER BY u.i) INTO errnos
          FROM unnest(p_names) WITH ORDINALITY u(n, i)
          JOIN _unlink_names(p_dir, p_names, p_inodes, p_sid, coalesce(p_open_inodes, '{}'))
               WITH ORDINALITY x(name, errno, inode, i) ON x.i = u.i;
    END IF;
    errnos := coalesce(errnos, '{}');
    IF p_keep THEN
        UPDATE dir_lease SET taken = now() WHERE dir = p_dir AND sid = p_sid AND wanted IS NULL;
        kept := FOUND;
    ELSE
        kept := false;
    END IF;
    IF NOT kept THEN
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
    END IF;
END
$$;

-- Nothing in schema jfs is usable by PUBLIC (sql/security.sql).
REVOKE ALL ON TABLE dir_lease FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _leased(bigint, bigint), _unleased(bigint[]), _edge_unleased(),
    _unlink_names(bigint, bytea[], bigint[], bigint, bigint[]), _knows_leases(text), want_lease(bigint),
    take_lease(bigint, bigint, integer), lease_unlink(bigint, bigint, bytea[], bigint[], bigint[], boolean)
    FROM PUBLIC;
