-- jfs 0.2.1 -> 0.2.2.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.2 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Guards (sql/internal.sql): names the volume keeps in its root, and ids a
-- client must have been handed out.


-- Whether (p_parent, p_name) is a name the volume keeps for itself: /.trash
-- (the trash) and /.jfs.control (each mount's control file). Nobody makes,
-- links or renames an entry to them in the root; elsewhere they are names.
CREATE FUNCTION _reserved_name(p_parent bigint, p_name bytea) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_parent = 1 AND p_name IN ('\x2e7472617368'::bytea, '\x2e6a66732e636f6e74726f6c'::bytea)
$$;

-- Whether p_id is an id of counter p_kind ('inode', 'slice') that was handed
-- out (by alloc_ids, or taken here): ids are never handed out twice.
CREATE FUNCTION _handed_out(p_kind text, p_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_id > 0 AND p_id < (SELECT c.next FROM counter c WHERE c.name = p_kind)
$$;

-- Whether a client's slice id p_id can name a new slice: handed out, and
-- neither referenced already nor queued for deletion (its objects would be
-- deleted under the new reference).
CREATE FUNCTION _fresh_slice_id(p_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT _handed_out('slice', p_id)
       AND NOT EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = p_id)
       AND NOT EXISTS (SELECT 1 FROM delslice d WHERE d.slice_id = p_id)
$$;

REVOKE EXECUTE ON FUNCTION _reserved_name(bigint, bytea), _handed_out(text, bigint), _fresh_slice_id(bigint)
    FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- /.trash and /.jfs.control reserved in the root; mknod takes only inode ids
-- that were handed out; rename over an empty directory drops its ACL rows
-- (sql/namespace.sql, rename.sql, clone.sql).


-- Creates a node of any type in p_parent: 1 file, 2 directory, 3 symlink
-- (p_target), 4 fifo, 5 block and 6 char device (p_rdev), 7 socket.
-- p_inode is an id from a range the client reserved with alloc_ids (another
-- is EINVAL); NULL allocates one here. /.trash and /.jfs.control are EEXIST
-- (the trash's own inode makes /.trash, owned by root, 0700: EPERM else). A directory with the set-group-id bit passes its group
-- (and, to subdirectories, the bit) on.
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
BEGIN
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    ELSIF p_type IS NULL OR p_type NOT BETWEEN 1 AND 7 OR p_mode IS NULL OR p_uid IS NULL OR p_gid IS NULL
          OR NOT _mode_ok(p_mode, p_type) OR NOT _id_ok(p_uid) OR NOT _id_ok(p_gid) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND (p_target IS NULL OR length(p_target) = 0) THEN
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
    v_errno := _charge(false, NULL, NULL, _quota_roots(v_pqroot), p_parent, 1, _node_space(n.type, n.length), v_limits);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, n.type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, v_pqroot, 1, _node_space(n.type, n.length));
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
    IF _is_dot(p_name) THEN
        RETURN _err(21);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days INTO v
          FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
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
            PERFORM _uncharge_entry(p_parent, par.qroot, 1, _node_space(c.type, c.length));
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
    v_moves_dir boolean;
    v_locked_tree boolean := false;
    v_now_src bigint; v_now_dst bigint;
    v_nlink integer;
    v_src_node node;
    v_dst_node node;
    v_gone node;
BEGIN
    replaced := 0;
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
        SELECT se.inode, se.type, de.inode, de.type, st.meta_durability, st.skip_dir_mtime_ns
          INTO v_src, v_src_type, v_dst, v_dst_type, v_mode, v_skip
          FROM setting st
          LEFT JOIN edge se ON se.parent = p_parent AND se.name = p_name
          LEFT JOIN edge de ON de.parent = p_new_parent AND de.name = p_new_name;
        IF v_src IS NULL THEN
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
                                        1, _node_space(v_gone.type, v_gone.length));
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

-- Copies the node p_src (a file, or a directory with everything below it) to
-- the new entry p_dst_name of directory p_dst_parent. New nodes take ids from
-- one reserved range; entries, slices, symlink targets and xattrs are copied;
-- each shared slice gains one reference per new slice row, so the clone is
-- copy-on-write (a later write to either side makes new slices). Hard links
-- inside the tree stay hard links in the clone (nlink counts the entries in
-- the clone); a link from outside the tree is not followed. Modes and times
-- are kept, ctime is now; p_uid/p_gid, when given, own the new nodes.
--
-- Snapshot: the whole source is read and copied by ONE SQL statement, so it
-- is read under one MVCC snapshot: a write, rename or create committed while
-- the clone runs is in it entirely or not at all, for every file together.
-- The source is not locked; the only shared rows written are slice_ref
-- counters. If a slice of the snapshot lost its last reference meanwhile (the
-- source was truncated or removed after the snapshot), the clone fails with
-- serialization_failure (40001) and the caller retries.
--
-- Cost: the transaction inserts one row per node, entry, slice, xattr of the
-- tree (a 100,000-file tree is ~200,000 rows, about a second); there is no
-- batched mode, so a clone is all or nothing.
--
-- Usage: the clone's entries count under the destination's directory quotas,
-- its nodes for the volume and their owners; a clone that would pass a limit
-- is not made (28 ENOSPC, 122 EDQUOT).
--
-- Returns errno 0 with the new root's inode, the nodes created and the space
-- charged; else errno: 2 no source / no destination directory, 20 the
-- destination parent is not a directory, 17 the name exists, 22/36 bad name,
-- 28/122 over a limit.
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
BEGIN
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
        SELECT m.new, n.type, n.mode, coalesce(p_uid, n.uid), coalesce(p_gid, n.gid), n.atime, n.mtime, v_now,
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

-- ---------------------------------------------------------------------------
-- rmr reads the tree again under its locks (sql/batch.sql): a rename that
-- committed while it waited moved a subdirectory out of the tree, or the
-- tree itself, and rmr still removed what it had read before.


-- The directories of the tree rooted at directory p_root, p_root first.
CREATE FUNCTION _tree_dirs(p_root bigint) RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE t(inode) AS (
        SELECT p_root
        UNION ALL
        SELECT e.inode FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
    )
    SELECT array_agg(t.inode) FROM t
$$;

REVOKE EXECUTE ON FUNCTION _tree_dirs(bigint) FROM PUBLIC;

-- Removes the tree p_name of p_parent (a directory and everything below it;
-- a non-directory is simply unlinked), at most p_limit entries per call so
-- that no transaction grows without bound: files first, then directories
-- that became empty, deepest first, the tree's root last. Call again until
-- done; a step that stops halfway leaves a smaller, consistent tree. The
-- directories of the tree are locked for the step, so a concurrent create
-- inside either lands before (and a later step removes it) or finds its
-- directory gone (ENOENT); what a rename moved out of the tree (or the tree
-- itself, renamed) while rmr waited for those locks stays. Hard links from
-- outside the tree survive; files the session p_sid has open stay until
-- released. The trash itself is not removed (EPERM).
CREATE OR REPLACE FUNCTION rmr(p_parent bigint, p_name bytea, p_limit integer DEFAULT 100000, p_sid bigint DEFAULT 0,
                    p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (errno integer, removed bigint, done boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_root bigint;
    v_root_type smallint;
    v_mode text;
    v_dirs bigint[];
    v_depths integer[];
    v_files record;
    v_gone bigint[];
    v_parents bigint[];
    v_spaces bigint[];
    v_pqroot bigint;
    v_locked bigint[] := '{}';
    v_removed bigint := 0;
    v_count bigint;
    v_limit integer := greatest(coalesce(p_limit, 100000), 1);
BEGIN
    SELECT e.inode, e.type, s.meta_durability INTO v_root, v_root_type, v_mode
      FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
    IF v_root IS NULL THEN
        RETURN QUERY SELECT CASE WHEN _is_dot(p_name) THEN 22 ELSE _missing(p_parent, p_name) END, 0::bigint, true;
        RETURN;
    ELSIF v_root = _trash_inode() THEN
        RETURN QUERY SELECT 1, 0::bigint, true;
        RETURN;
    END IF;
    IF v_root_type <> 2 THEN
        RETURN QUERY SELECT b.errno, (b.errno = 0)::integer::bigint, true
                       FROM batch_unlink(p_parent, ARRAY[p_name], p_sid, p_open_inodes) b;
        RETURN;
    END IF;
    -- with a trash, the whole tree moves there in one step
    IF EXISTS (SELECT 1 FROM setting WHERE trash_days > 0) AND NOT _in_trash(p_parent) THEN
        v_count := (_subtree_usage(v_root)).inodes + 1;
        IF _to_trash(p_parent, p_name) = 0 THEN
            RETURN QUERY SELECT 0, v_count, true;
            RETURN;
        END IF;
    END IF;
    PERFORM _durability(v_mode);

    -- The tree's directories (with their depth below the root) and up to
    -- p_limit non-directories in them, locked together in inode order. A
    -- rename may have changed the tree while we waited for those locks, so
    -- it is read again under them until every directory it has is locked
    -- (what moved out stays locked, harmlessly, to the end of the step).
    LOOP
        v_dirs := _tree_dirs(v_root);
        SELECT array_agg(f.inode) INTO v_gone
          FROM (SELECT e.inode FROM edge e WHERE e.parent = ANY (v_dirs) AND e.type <> 2 LIMIT v_limit) f;
        PERFORM 1 FROM node n
         WHERE n.inode = ANY (v_dirs || coalesce(v_gone, '{}')) AND NOT n.inode = ANY (v_locked)
         ORDER BY n.inode FOR UPDATE;
        v_locked := v_locked || v_dirs || coalesce(v_gone, '{}');
        IF NOT EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = v_root) THEN
            -- the tree was renamed or removed meanwhile: what the name is now
            RETURN QUERY SELECT * FROM rmr(p_parent, p_name, p_limit, p_sid, p_open_inodes);
            RETURN;
        END IF;
        EXIT WHEN _tree_dirs(v_root) <@ v_locked;
    END LOOP;
    -- one row per step: the tree below the entry loses entries
    INSERT INTO change (op, inode, parent, name) VALUES ('rmr', v_root, p_parent, p_name);
    WITH RECURSIVE t(inode, depth) AS (
        SELECT v_root, 0
        UNION ALL
        SELECT e.inode, t.depth + 1 FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
    )
    SELECT array_agg(t.inode ORDER BY t.depth), array_agg(t.depth ORDER BY t.depth) INTO v_dirs, v_depths FROM t;
    SELECT array_agg(f.parent) AS parents, array_agg(f.name) AS names, array_agg(f.inode) AS inodes INTO v_files
      FROM (SELECT e.parent, e.name, e.inode FROM edge e
             WHERE e.parent = ANY (v_dirs) AND e.type <> 2 LIMIT v_limit) f;
    -- (files that came into the locked directories while we waited)
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_files.inodes) AND NOT n.inode = ANY (v_locked)
     ORDER BY n.inode FOR UPDATE;

    IF v_files.inodes IS NOT NULL THEN
        WITH gone AS (
            DELETE FROM edge e
             USING unnest(v_files.parents, v_files.names, v_files.inodes) AS f(parent, name, inode)
             WHERE e.parent = f.parent AND e.name = f.name AND e.inode = f.inode
            RETURNING e.parent, e.inode
        )
        SELECT count(*), array_agg(g.inode), array_agg(g.parent), array_agg(_node_space(n.type, n.length))
          INTO v_count, v_gone, v_parents, v_spaces
          FROM gone g JOIN node n ON n.inode = g.inode;
        v_removed := v_removed + v_count;
        PERFORM _uncharge_entries(v_parents, v_spaces);
        PERFORM _drop_links(v_gone, v_now, p_sid, p_open_inodes);
        IF v_count >= v_limit THEN
            RETURN QUERY SELECT 0, v_removed, false;
            RETURN;
        END IF;
    END IF;

    -- directories that are empty now, deepest first
    FOR d IN REVERSE coalesce(v_depths[cardinality(v_depths)], 0)..1 LOOP
        WITH gone AS (
            DELETE FROM edge e
             WHERE e.inode IN (SELECT u.i FROM unnest(v_dirs, v_depths) u(i, dep) WHERE u.dep = d)
               AND e.type = 2
               AND NOT EXISTS (SELECT 1 FROM edge c WHERE c.parent = e.inode)
            RETURNING e.parent, e.inode
        ), per_parent AS (
            SELECT g.parent, count(*)::integer AS n FROM gone g GROUP BY g.parent
        ), relinked AS (
            UPDATE node x SET nlink = x.nlink - p.n, mtime = v_now, ctime = v_now FROM per_parent p
             WHERE x.inode = p.parent
            RETURNING x.inode
        )
        SELECT array_agg(g.inode), array_agg(g.parent) INTO v_gone, v_parents FROM gone g;
        IF v_gone IS NOT NULL THEN
            PERFORM _uncharge_entries(v_parents, array_fill(4096::bigint, ARRAY[cardinality(v_gone)]));
            PERFORM _free_nodes(v_gone);
            v_removed := v_removed + cardinality(v_gone);
        END IF;
    END LOOP;

    -- the root itself, once empty
    IF NOT _dir_is_empty(v_root) THEN
        RETURN QUERY SELECT 0, v_removed, false;
        RETURN;
    END IF;
    PERFORM 1 FROM node n WHERE n.inode = p_parent FOR NO KEY UPDATE;
    DELETE FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = v_root;
    UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent
    RETURNING qroot INTO v_pqroot;
    PERFORM _uncharge_entry(p_parent, v_pqroot, 1, 4096);
    PERFORM _free_nodes(ARRAY[v_root]);
    RETURN QUERY SELECT 0, v_removed + 1, true;
END
$$;

-- ---------------------------------------------------------------------------
-- A slice id is committed once, and never while queued for deletion
-- (sql/data.sql, compact.sql).


-- Appends a slice to chunk p_chunk_index of file p_inode: bytes
-- [p_slice_off, p_slice_off + p_len) of stored slice p_slice_id (of size
-- p_slice_size) now appear at [p_pos, p_pos + p_len) of the chunk, over
-- whatever was there. Called after the slice's blocks are in object storage.
-- Extends the length, sets mtime (p_mtime, default now) and ctime. The
-- slice id must be one alloc_ids handed out, committed nowhere yet and not
-- queued for deletion (EINVAL): each write's slice is committed once.
CREATE OR REPLACE FUNCTION write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    v_had bigint;
    n node;
BEGIN
    IF p_chunk_index IS NULL OR p_chunk_index < 0 OR p_pos IS NULL OR p_pos < 0 OR p_len IS NULL OR p_len <= 0
       OR p_pos::bigint + p_len > _chunk_size() OR p_slice_id IS NULL OR p_slice_id <= 0
       OR p_slice_off IS NULL OR p_slice_off < 0 OR p_slice_size IS NULL
       OR p_slice_off::bigint + p_len > p_slice_size THEN
        RETURN _err(22);
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(21);
    ELSIF n.type <> 1 THEN
        RETURN _err(22);
    END IF;
    IF NOT _fresh_slice_id(p_slice_id) THEN
        RETURN _err(22);
    END IF;
    v_end := greatest(n.length, p_chunk_index::bigint * _chunk_size() + p_pos + p_len);
    -- a longer file must fit the quotas: refused before anything changes
    v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    -- (a concurrent commit of the same id makes this fail: the id is used once)
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    -- the bytes that showed data under the new slice (none for an append)
    v_had := _range_size(_chunk_data(p_inode, p_chunk_index, p_pos, p_pos + p_len));
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, p_slice_off, p_len, p_pos);
    n.length := v_end; n.mtime := coalesce(p_mtime, v_now); n.ctime := v_now;
    n.used := n.used + p_len - v_had;
    UPDATE node SET length = v_end, mtime = n.mtime, ctime = v_now, used = n.used
     WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

-- Replaces the slices of chunk p_chunk_index of file p_inode with the one
-- slice p_slice_id (p_slice_size bytes, in object storage already) placed at
-- p_pos, if the chunk still has p_rows slices, the last with seq p_last_seq
-- (so nothing was written, truncated or compacted since they were read).
-- The old slices' references are released; the freed ones are queued in
-- delslice. Length and times do not change. Returns 0; 11 (EAGAIN) when the
-- chunk changed, and the caller deletes the new slice's blocks; 2 when the
-- file is gone; 22 for bad arguments (a slice id not fresh: see write_slice).
CREATE OR REPLACE FUNCTION compact_chunk(
    p_inode bigint, p_chunk_index integer, p_rows integer, p_last_seq bigint,
    p_slice_id bigint, p_slice_size integer, p_pos integer)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_rows integer;
    v_last bigint;
BEGIN
    IF p_chunk_index IS NULL OR p_chunk_index < 0 OR p_slice_id IS NULL OR p_slice_id <= 0
       OR p_slice_size IS NULL OR p_slice_size <= 0 OR p_pos IS NULL OR p_pos < 0
       OR p_pos::bigint + p_slice_size > _chunk_size() OR p_rows IS NULL OR p_rows < 1 THEN
        RETURN 22;
    END IF;
    PERFORM 1 FROM node WHERE inode = p_inode AND type = 1 FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    ELSIF NOT _fresh_slice_id(p_slice_id) THEN
        RETURN 22;
    END IF;
    SELECT count(*), max(seq) INTO v_rows, v_last
      FROM slice WHERE inode = p_inode AND chunk_index = p_chunk_index;
    IF v_rows <> p_rows OR v_last IS DISTINCT FROM p_last_seq THEN
        RETURN 11;
    END IF;
    -- the new slice shows data all along (holes stored as zeros)
    UPDATE node SET used = used + p_slice_size - _range_size(_chunk_data(p_inode, p_chunk_index))
     WHERE inode = p_inode;
    PERFORM _drop_chunks(ARRAY[p_inode], p_chunk_index, p_chunk_index);
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, 0, p_slice_size, p_pos);
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    PERFORM _log_node_change('compact', p_inode);
    RETURN 0;
END
$$;

-- ---------------------------------------------------------------------------
-- The trash (sql/schema.sql, trash.sql): hours are UTC whatever the
-- session's time zone; a name cut to fit the trash keeps its whole self.


-- The whole name of a trash entry whose name there (PARENT-INODE-NAME, in
-- hour directory `hour`) was cut to 255 bytes: what jfs.restore puts back.
CREATE TABLE trash_name (
    hour     bigint NOT NULL,
    name     bytea  NOT NULL,
    original bytea  NOT NULL CHECK (length(original) BETWEEN 1 AND 255),
    PRIMARY KEY (hour, name)
);

SELECT pg_catalog.pg_extension_config_dump('trash_name', '');
REVOKE ALL ON trash_name FROM PUBLIC;

-- The trash's hour directory for now, made (with /.trash) when missing.
CREATE OR REPLACE FUNCTION _trash_hour() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_name bytea := convert_to(to_char(pg_catalog.now() AT TIME ZONE 'UTC', 'YYYY-MM-DD-HH24'), 'UTF8');
    v_hour bigint;
    r attr;
BEGIN
    SELECT e.inode INTO v_hour FROM edge e WHERE e.parent = _trash_inode() AND e.name = v_name;
    IF FOUND THEN
        RETURN v_hour;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM node WHERE inode = _trash_inode()) THEN
        r := mknod(1, '\x2e7472617368'::bytea, 2, 448, 0, 0, 0, NULL, _trash_inode());  -- '.trash', 0700
        IF r.errno = 17 AND NOT EXISTS (SELECT 1 FROM node WHERE inode = _trash_inode()) THEN
            RAISE EXCEPTION 'jfs: cannot make /.trash: the root has an entry .trash that is not the trash'
                USING HINT = 'Rename it (a volume made before jfs 0.2.2 let anyone make one), then remove again.';
        ELSIF r.errno NOT IN (0, 17) THEN
            RAISE EXCEPTION 'jfs: cannot make /.trash (errno %)', r.errno;
        END IF;
    END IF;
    r := mknod(_trash_inode(), v_name, 2, 448, 0, 0);
    IF r.errno = 17 THEN
        SELECT e.inode INTO v_hour FROM edge e WHERE e.parent = _trash_inode() AND e.name = v_name;
        RETURN v_hour;
    ELSIF r.errno <> 0 THEN
        RAISE EXCEPTION 'jfs: cannot make the trash hour % (errno %)', convert_from(v_name, 'UTF8'), r.errno;
    END IF;
    RETURN r.inode;
END
$$;

-- When trash hour p_hour (its name, 'YYYY-MM-DD-HH', in UTC) began, as a
-- UTC time whatever the session's time zone; NULL for another name.
CREATE FUNCTION _trash_hour_start(p_name bytea) RETURNS timestamp
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_text text := convert_from(p_name, 'SQL_ASCII');
BEGIN
    IF v_text !~ '^\d{4}-\d\d-\d\d-\d\d$' THEN
        RETURN NULL;
    END IF;
    RETURN (left(v_text, 10) || ' ' || right(v_text, 2) || ':00')::timestamp;
EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
    RETURN NULL;
END
$$;

-- The name entry p_name of trash hour p_hour had where it came from: the
-- whole name kept in trash_name when its trash name was cut, else parsed.
CREATE FUNCTION _trash_original(p_hour bigint, p_name bytea) RETURNS bytea
LANGUAGE sql STABLE SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT coalesce((SELECT t.original FROM trash_name t WHERE t.hour = p_hour AND t.name = p_name),
                    (_trash_parse(p_name)).name)
$$;

REVOKE EXECUTE ON FUNCTION _trash_hour_start(bytea), _trash_original(bigint, bytea) FROM PUBLIC;

-- Moves entry p_name of p_parent into the trash if the volume has one and
-- p_parent is not in it; returns errno (0 moved), or NULL when the caller
-- should delete as usual.
CREATE OR REPLACE FUNCTION _to_trash(p_parent bigint, p_name bytea) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_inode bigint;
    v_hour bigint;
    v_trash_name bytea;
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM setting WHERE trash_days > 0) OR _in_trash(p_parent) THEN
        RETURN NULL;
    END IF;
    SELECT e.inode INTO v_inode FROM edge e WHERE e.parent = p_parent AND e.name = p_name;
    IF v_inode IS NULL THEN
        RETURN NULL;
    END IF;
    v_hour := _trash_hour();
    v_trash_name := _trash_name(p_parent, v_inode, p_name);
    SELECT * INTO r FROM rename(p_parent, p_name, v_hour, v_trash_name, 1);
    IF r.errno = 0 AND (_trash_parse(v_trash_name)).name IS DISTINCT FROM p_name THEN
        INSERT INTO trash_name (hour, name, original) VALUES (v_hour, v_trash_name, p_name)
            ON CONFLICT (hour, name) DO UPDATE SET original = EXCLUDED.original;
    ELSIF r.errno = 0 THEN
        DELETE FROM trash_name t WHERE t.hour = v_hour AND t.name = v_trash_name;  -- left by an entry removed
    END IF;
    RETURN r.errno;
END
$$;

-- Purges trash hours older than trash_days, at most p_limit entries per call
-- (each hour removed like jfs.rmr, children first); returns the entries removed.
CREATE OR REPLACE FUNCTION trash_purge(p_limit integer DEFAULT 100000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_days integer;
    v_removed bigint := 0;
    h record;
    r record;
BEGIN
    SELECT trash_days INTO v_days FROM setting;
    IF v_days IS NULL THEN
        RETURN 0;
    END IF;
    FOR h IN
        SELECT e.name, e.inode FROM edge e
         WHERE e.parent = _trash_inode()
           AND _trash_hour_start(e.name)
               < (pg_catalog.now() AT TIME ZONE 'UTC') - make_interval(days => v_days) - interval '1 hour'
         ORDER BY e.name
    LOOP
        EXIT WHEN v_removed >= p_limit;
        SELECT * INTO r FROM rmr(_trash_inode(), h.name, (p_limit - v_removed)::integer);
        v_removed := v_removed + r.removed;
        IF r.done THEN
            DELETE FROM trash_name t WHERE t.hour = h.inode;
        END IF;
    END LOOP;
    RETURN v_removed;
END
$$;

-- What is in the trash: the hour it was removed in, where from, what.
CREATE OR REPLACE VIEW trash AS
SELECT convert_from(h.name, 'UTF8') AS hour, t.parent, jfs.path(t.parent) AS parent_path,
       _name_text(_trash_original(h.inode, e.name)) AS name,
       e.inode, _type_name(n.type) AS type, n.length AS size, to_timestamp(n.ctime / 1e9) AS removed_at
  FROM edge h
  JOIN edge e ON e.parent = h.inode
  JOIN node n ON n.inode = e.inode
  CROSS JOIN LATERAL _trash_parse(e.name) t
 WHERE h.parent = _trash_inode();

-- Puts trash entries back where they were (all, or those of hour p_hour,
-- 'YYYY-MM-DD-HH'), by rename: an entry whose directory is gone or whose
-- name is taken again stays in the trash. One row per entry: errno 0
-- restored, else why not.
CREATE OR REPLACE FUNCTION restore(p_hour text DEFAULT NULL)
RETURNS TABLE (hour text, path text, errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    t record;
    r record;
BEGIN
    FOR t IN
        SELECT convert_from(h.name, 'UTF8') AS hour, p.parent, _trash_original(h.inode, e.name) AS name,
               h.inode AS hour_dir, e.name AS trash_name
          FROM edge h
          JOIN edge e ON e.parent = h.inode
          CROSS JOIN LATERAL _trash_parse(e.name) p
         WHERE h.parent = _trash_inode() AND p.parent IS NOT NULL
           AND (p_hour IS NULL OR convert_from(h.name, 'UTF8') = p_hour)
         ORDER BY 1, 2, 3
    LOOP
        hour := t.hour;
        path := coalesce(jfs.path(t.parent), '(gone)') || CASE WHEN t.parent = 1 THEN '' ELSE '/' END
                || _name_text(t.name);
        IF NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = t.parent AND n.type = 2) THEN
            errno := 2;
        ELSE
            SELECT * INTO r FROM rename(t.hour_dir, t.trash_name, t.parent, t.name, 1);
            errno := r.errno;
            IF errno = 0 THEN
                DELETE FROM trash_name n WHERE n.hour = t.hour_dir AND n.name = t.trash_name;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- The mounts' change-log horizon is a snapshot (sql/changelog.sql): a long
-- transaction elsewhere no longer makes every poll re-read the log since it.


-- For mounts, which keep the kernel's caches in step with the others: the
-- changes of the transactions that the snapshot p_horizon (an earlier
-- call's; NULL: none, just the horizon) did not see, that the session p_sid
-- did not make or made where its kernel cannot know (trees removed or cloned
-- server-side, tiers, moves into the trash, /.trash made), and the new horizon: this call's snapshot. Each change comes exactly
-- once. Only the transactions running at p_horizon and those begun after
-- it are read, so a long transaction that writes nothing to the volume
-- (another application's, or one in another database) costs nothing; a
-- horizon of transaction ids (changes_for_mount) re-read everything since
-- such a transaction at every poll. The first row carries only the horizon.
CREATE FUNCTION mount_changes(p_sid bigint, p_horizon pg_snapshot)
RETURNS TABLE (horizon pg_snapshot, id bigint, op text, inode bigint, parent bigint, name bytea,
               parent2 bigint, name2 bytea, inode2 bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH h AS (SELECT pg_current_snapshot() AS now)
    SELECT h.now, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::bytea, NULL::bigint,
           NULL::bytea, NULL::bigint
      FROM h
    UNION ALL
    SELECT h.now, c.id, c.op, c.inode, c.parent, c.name, c.parent2, c.name2, c.inode2
      FROM h, change c
     WHERE p_horizon IS NOT NULL
       AND (c.xid >= pg_snapshot_xmax(p_horizon)
            OR c.xid = ANY (ARRAY(SELECT pg_snapshot_xip(p_horizon))))
       AND (c.session IS DISTINCT FROM p_sid OR c.op IN ('rmr', 'clone', 'tier', 'tier_tree')
            OR _in_trash(coalesce(c.parent2, c.parent)) OR c.inode = _trash_inode())
$$;

REVOKE EXECUTE ON FUNCTION mount_changes(bigint, pg_snapshot) FROM PUBLIC;
