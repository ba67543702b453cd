-- jfs 0.2.25 -> 0.2.26.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.26 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- Shards (sql/shard.sql): setting.shard (0 for every volume so far: the
-- root), the root's shard map, and the procedures that make a database a
-- shard, add it to the map and make shard roots (administration: granted
-- by jfs.grant_admin when it runs again; shard_number and shards by
-- jfs.grant_client). The procedures that read or change entries learn
-- that an entry's node may be on another shard: lookup and readdirplus
-- answer it with errno 18 (EXDEV), rename, rmdir, rmr and link refuse to
-- cross a shard, take_lease lists it, fsck checks each shard by itself;
-- alloc_ids keeps to its shard's ids, and format keeps no trash on a
-- shard. They keep their signatures (CREATE OR REPLACE), and so their
-- grants. _lock_nodes locks both nodes even when the first is missing.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

ALTER TABLE setting ADD COLUMN shard integer NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 32767);

-- The volume's other shards, kept in its root database (sql/shard.sql):
-- where each is (a connection URL without credentials: every mount adds
-- its own) and when it was added.
CREATE TABLE shard_map (
    number   integer     PRIMARY KEY CHECK (number BETWEEN 1 AND 32767),
    url      text        NOT NULL CHECK (url <> ''),
    added_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('shard_map', '');
REVOKE ALL ON TABLE shard_map FROM PUBLIC;

-- The shard of its volume this database is (sql/shard.sql; 0: the root).
CREATE FUNCTION _this_shard() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT s.shard FROM setting s), 0)
$$;

-- Whether inode p_inode is of another shard of the volume than this
-- database (sql/shard.sql): its shard number (bits 48 to 62) is not this
-- one's. The trash's inode is every shard's.
CREATE FUNCTION _remote(p_inode bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT (p_inode >> 48) <> 32767 AND (p_inode >> 48) <> _this_shard()
$$;

-- Whether directories p_dirs (a tree's) hold a shard root: a directory of
-- another shard (sql/shard.sql).
CREATE FUNCTION _holds_shard_roots(p_dirs bigint[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(p_dirs) d WHERE (d >> 48) NOT IN (32767, _this_shard()))
$$;

-- The node a name refers to in a directory. A shard root (a directory of
-- another shard, sql/shard.sql) is answered with errno 18 (EXDEV), its
-- inode and its type: its attributes are its shard's to give.
CREATE OR REPLACE FUNCTION lookup(p_parent bigint, p_name bytea) RETURNS attr
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

-- A page of a directory as readdirplus gives it, and whether each node has
-- extended attributes (any name getxattr could find; POSIX ACLs are kept
-- apart, sql/acl.sql): a mount answers getxattr of the others without
-- asking. `ls -l` asks each file for security.selinux, and backup tools
-- ask for more. A shard root's row (a directory of another shard,
-- sql/shard.sql) has errno 18 (EXDEV), its cookie, name, inode and type,
-- and no attributes: they are its shard's to give.
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
        SELECT CASE WHEN n.inode IS NULL THEN 18 ELSE 0 END, e.cookie, e.name, e.inode, e.type, n.mode, n.uid,
               n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev, n.parent, n.tier, n.used,
               EXISTS (SELECT 1 FROM xattr x WHERE x.inode = n.inode)
          FROM edge e LEFT JOIN node n ON n.inode = e.inode
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
        ELSIF (v_child >> 48) NOT IN (32767, s.shard) THEN
            -- a shard root: its node and entries are its shard's
            RETURN _err(18);
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
    v_shard integer;
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
        SELECT se.inode, se.type, de.inode, de.type, st.meta_durability, st.skip_dir_mtime_ns, st.destroying,
               st.shard
          INTO v_src, v_src_type, v_dst, v_dst_type, v_mode, v_skip, v_destroying, v_shard
          FROM setting st
          LEFT JOIN edge se ON se.parent = p_parent AND se.name = p_name
          LEFT JOIN edge de ON de.parent = p_new_parent AND de.name = p_new_name;
        IF v_destroying IS NOT NULL THEN
            PERFORM _destroyed();
        ELSIF v_src IS NULL THEN
            errno := _missing(p_parent, p_name); RETURN;
        ELSIF v_src = _trash_inode() THEN
            errno := 1; RETURN;
        ELSIF (v_src >> 48) NOT IN (32767, v_shard) OR (v_dst >> 48) NOT IN (32767, v_shard) THEN
            -- a shard root moves or is replaced only where its node is
            errno := 18; RETURN;
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
            PERFORM 1 FROM tree_lock FOR UPDATE;  -- (a row lock: no role takes it outside a procedure)
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
    v_destroying timestamptz;
    v_dirs bigint[];
    v_depths integer[];
    v_files record;
    v_gone bigint[];
    v_parents bigint[];
    v_spaces bigint[];
    v_lengths bigint[];
    v_pqroot bigint;
    v_locked bigint[] := '{}';
    v_removed bigint := 0;
    v_count bigint;
    v_limit integer := greatest(coalesce(p_limit, 100000), 1);
BEGIN
    SELECT e.inode, e.type, s.meta_durability, s.destroying INTO v_root, v_root_type, v_mode, v_destroying
      FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
    IF v_destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
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
    -- a tree with a shard root in it (a directory of another shard, whose
    -- entries are there) is removed a shard at a time, from the leaves up
    v_dirs := _tree_dirs(v_root);
    IF _holds_shard_roots(v_dirs) THEN
        RETURN QUERY SELECT 18, 0::bigint, true;
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
        IF _holds_shard_roots(v_dirs) THEN
            -- (one moved in meanwhile)
            RETURN QUERY SELECT 18, 0::bigint, true;
            RETURN;
        END IF;
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
        v_dirs := _tree_dirs(v_root);
        EXIT WHEN v_dirs <@ v_locked;
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
        SELECT count(*), array_agg(g.inode), array_agg(g.parent), array_agg(_node_space(n.type, n.length)),
               array_agg(n.length)
          INTO v_count, v_gone, v_parents, v_spaces, v_lengths
          FROM gone g JOIN node n ON n.inode = g.inode;
        v_removed := v_removed + v_count;
        PERFORM _uncharge_entries(v_parents, v_spaces, v_lengths);
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

-- Locks nodes in ascending inode order (the global lock order), each in its
-- mode; a node listed twice is locked once in the strongest of its modes.
-- Returns false if any of them does not exist.
CREATE OR REPLACE FUNCTION _lock_nodes(p_inodes bigint[], p_modes text[]) RETURNS boolean
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

-- Session p_sid takes directory p_dir's lease. Changes in flight in the
-- directory are waited for (their lock of it), then its entries are
-- returned: errno 0 and their names, inodes, types and link counts, in
-- name order. A lease the session holds already is taken again, while
-- _lease_renewable says so (asked for less than a second ago, taken first
-- less than a minute ago); else it ends here, with errno 11. Else no
-- lease, and errno 11 (EAGAIN) when another live session holds it (asked
-- for, as by want_lease), 27 (EFBIG) when the directory has more than
-- p_limit entries, 2 or 20 when it is missing or not a directory, 22 for a
-- session that is not registered. (Until 0.2.23, 95 while a session that
-- claimed an older client's version was registered: what one session
-- says of itself no longer changes what others get; a client before
-- 0.2.17 meets a leased directory as an error.) Taken again, a lease
-- stays asked for if it was. creates (with
-- errno 0): whether the session may answer creates in p_dir itself, as
-- lease_commit says it (no quota limit, squash of the caller or default
-- ACL applies there). A lease taken commits durably in either durability
-- mode (0.2.22).
CREATE OR REPLACE FUNCTION take_lease(p_sid bigint, p_dir bigint, p_limit integer DEFAULT 10000,
                           OUT errno integer, OUT names bytea[], OUT inodes bigint[], OUT types smallint[],
                           OUT nlinks integer[], OUT creates boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_type smallint;
    v_holder bigint;
    v_renewable boolean;
    v_limit integer := least(greatest(coalesce(p_limit, 10000), 1), 100000);
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF NOT EXISTS (SELECT 1 FROM session s WHERE s.sid = p_sid) THEN
        errno := 22;
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
    SELECT d.sid, _lease_renewable(d.granted, d.wanted, true) INTO v_holder, v_renewable
      FROM dir_lease d WHERE d.dir = p_dir;
    IF FOUND AND v_holder <> p_sid AND NOT want_lease(p_dir) THEN
        errno := 11;
        RETURN;
    ELSIF v_holder = p_sid AND NOT v_renewable THEN
        -- (its holder cannot keep a lease asked for by taking it again)
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
        errno := 11;
        RETURN;
    END IF;
    SELECT array_agg(x.name ORDER BY x.name), array_agg(x.inode ORDER BY x.name),
           array_agg(x.type ORDER BY x.name), array_agg(coalesce(n.nlink, 2) ORDER BY x.name)
      INTO names, inodes, types, nlinks
      FROM (SELECT e.name, e.inode, e.type FROM edge e WHERE e.parent = p_dir
             ORDER BY e.parent, e.name LIMIT v_limit + 1) x
      LEFT JOIN node n ON n.inode = x.inode;  -- (a shard root's node is its shard's)
    IF cardinality(names) > v_limit THEN
        errno := 27;
        names := NULL; inodes := NULL; types := NULL; nlinks := NULL;
        RETURN;
    END IF;
    INSERT INTO dir_lease AS d (dir, sid) VALUES (p_dir, p_sid)
        ON CONFLICT (dir) DO UPDATE
       SET sid = p_sid, taken = now(), granted = CASE WHEN d.sid = p_sid THEN d.granted ELSE now() END;
    -- durable at once, whatever the volume's durability mode: a crash that
    -- took the lease back would leave this session answering for a
    -- directory other sessions then change (the flush also covers the
    -- changes of the directory before it, and a former holder's release)
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    SELECT NOT s.quota_limits
           AND CASE WHEN s.squash_roles THEN (_caller_squash()).kind = 'none' ELSE true END
           AND NOT (s.enable_acl AND EXISTS (SELECT 1 FROM acl a WHERE a.inode = p_dir AND a.kind = 'd'))
      INTO creates FROM setting s;
    errno := 0;
    names := coalesce(names, '{}');
    inodes := coalesce(inodes, '{}');
    types := coalesce(types, '{}');
    nlinks := coalesce(nlinks, '{}');
END
$$;

CREATE OR REPLACE FUNCTION fsck() RETURNS TABLE (problem text, inode bigint, detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    -- an entry must point at an existing node of the same type, in a directory
    SELECT 'dangling edge', e.inode, pg_catalog.format('entry %s in %s', _name_text(e.name), e.parent)
      FROM edge e WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = e.inode)
       AND NOT _remote(e.inode)  -- (a shard root's node is its shard's)
    UNION ALL
    SELECT 'edge type', e.inode, pg_catalog.format('entry says %s, node says %s', e.type, n.type)
      FROM edge e JOIN node n ON n.inode = e.inode WHERE e.type <> n.type
    UNION ALL
    SELECT 'edge parent', e.parent, pg_catalog.format('entry %s is in a non-directory', _name_text(e.name))
      FROM edge e LEFT JOIN node p ON p.inode = e.parent WHERE p.type IS DISTINCT FROM 2
    UNION ALL
    -- modes are permission bits, owners valid ids
    SELECT 'node attrs', n.inode, pg_catalog.format('mode %s, uid %s, gid %s', n.mode, n.uid, n.gid)
      FROM node n WHERE n.mode NOT BETWEEN 0 AND 4095 OR NOT _id_ok(n.uid) OR NOT _id_ok(n.gid)
    UNION ALL
    -- nlink of a non-directory = the entries naming it
    SELECT 'nlink', n.inode, pg_catalog.format('nlink %s, entries %s', n.nlink, c.k)
      FROM node n
      CROSS JOIN LATERAL (SELECT count(*) AS k FROM edge e WHERE e.inode = n.inode) c
     WHERE n.type <> 2 AND n.nlink <> c.k
    UNION ALL
    -- nlink of a directory = 2 + its subdirectories; one entry names it (the root none)
    SELECT 'dir nlink', n.inode, pg_catalog.format('nlink %s, subdirectories %s', n.nlink, c.k)
      FROM node n
      CROSS JOIN LATERAL (SELECT count(*) AS k FROM edge e WHERE e.parent = n.inode AND e.type = 2) c
     WHERE n.type = 2 AND n.nlink <> 2 + c.k
    UNION ALL
    SELECT 'dir entries', n.inode, pg_catalog.format('%s entries name it, parent column %s', c.k, n.parent)
      FROM node n
      CROSS JOIN LATERAL (SELECT count(*) AS k, min(e.parent) AS p FROM edge e WHERE e.inode = n.inode) c
     WHERE n.type = 2 AND n.inode <> 1 AND (c.k <> 1 OR c.p <> n.parent)
       AND NOT _remote(n.parent)  -- (a shard root's entry is in its parent's shard)
    UNION ALL
    -- every node is reachable from the root or a shard root of this shard,
    -- unless unlinked and held open (an anti-join, not NOT IN: NOT IN over
    -- a big set is quadratic)
    SELECT 'unreachable', n.inode, pg_catalog.format('type %s, nlink %s', n.type, n.nlink)
      FROM node n
      LEFT JOIN (WITH RECURSIVE tree(inode) AS (
                     SELECT 1::bigint
                     UNION
                     SELECT d.inode FROM node d WHERE d.type = 2 AND _remote(d.parent)
                     UNION
                     SELECT e.inode FROM tree JOIN edge e ON e.parent = tree.inode
                 )
                 SELECT DISTINCT tree.inode FROM tree) r ON r.inode = n.inode
     WHERE n.inode <> 1 AND r.inode IS NULL
       AND NOT EXISTS (SELECT 1 FROM sustained s WHERE s.inode = n.inode AND n.nlink = 0)
       AND NOT EXISTS (SELECT 1 FROM unlinked u WHERE u.inode = n.inode AND n.nlink = 0)
    UNION ALL
    SELECT 'sustained', s.inode, pg_catalog.format('session %s: session or unlinked node missing', s.sid)
      FROM sustained s
     WHERE NOT EXISTS (SELECT 1 FROM session x WHERE x.sid = s.sid)
        OR NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = s.inode AND n.nlink = 0)
    UNION ALL
    SELECT 'unlinked', u.inode, 'kept for other mounts, but the file is missing or has names'
      FROM unlinked u
     WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = u.inode AND n.nlink = 0 AND n.type = 1)
    UNION ALL
    SELECT 'symlink', n.inode, 'symlink without target, or target of a non-symlink'
      FROM node n FULL JOIN symlink l ON l.inode = n.inode
     WHERE (n.type = 3) IS DISTINCT FROM (l.inode IS NOT NULL)
    UNION ALL
    SELECT 'xattr', x.inode, 'xattr of a missing node'
      FROM xattr x WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = x.inode)
    UNION ALL
    SELECT 'acl', a.inode, 'ACL entry of a missing node'
      FROM acl a WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = a.inode)
    UNION ALL
    -- slices belong to regular files; a file of length 0 has none
    SELECT 'slice owner', s.inode, pg_catalog.format('chunk %s seq %s', s.chunk_index, s.seq)
      FROM slice s LEFT JOIN node n ON n.inode = s.inode
     WHERE n.type IS DISTINCT FROM 1 OR n.length = 0
    UNION ALL
    -- a file's "used" (st_blocks) = the bytes its slices show, all within
    -- its length (counted up to the largest file, so data past the end
    -- shows as a difference too)
    SELECT 'used', n.inode, pg_catalog.format('used %s, slices show %s (length %s)', n.used, d.size, n.length)
      FROM node n CROSS JOIN LATERAL (SELECT _data_size(n.inode, 0, 144115188075855872) AS size) d
     WHERE n.type = 1 AND n.used <> d.size
    UNION ALL
    SELECT 'used', n.inode, pg_catalog.format('node of type %s with used %s', n.type, n.used)
      FROM node n WHERE n.type <> 1 AND n.used <> 0
    UNION ALL
    -- refs = the slice rows using the slice; no queued deletion still referenced
    SELECT 'slice refs', coalesce(r.slice_id, c.slice_id),
           pg_catalog.format('refs %s, slice rows %s', r.refs, coalesce(c.k, 0))
      FROM slice_ref r
      FULL JOIN (SELECT slice_id, count(*) AS k FROM slice WHERE slice_id <> 0 GROUP BY slice_id) c
        ON c.slice_id = r.slice_id
     WHERE r.refs IS DISTINCT FROM c.k
    UNION ALL
    SELECT 'delslice', d.slice_id, 'queued for deletion but still referenced'
      FROM delslice d WHERE EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = d.slice_id)
    UNION ALL
    -- the queue as counted (delete_usage) = the queue
    SELECT 'delete usage', NULL::bigint,
           pg_catalog.format('counted %s slices / %s bytes, recorded %s / %s', c.slices, c.bytes, u.slices, u.bytes)
      FROM (SELECT count(*)::bigint AS slices, coalesce(sum(d.size), 0)::bigint AS bytes FROM delslice d) c,
           (SELECT coalesce(sum(x.slices), 0)::bigint AS slices, coalesce(sum(x.bytes), 0)::bigint AS bytes
              FROM delete_usage x) u
     WHERE c.slices <> u.slices OR c.bytes <> u.bytes
    UNION ALL
    -- every quota's counters = a recount of the namespace
    SELECT 'usage', q.key, pg_catalog.format('%s quota %s: counted %s inodes / %s bytes, recorded %s / %s',
                                             q.kind, q.key, c.inodes, c.space, u.inodes, u.space)
      FROM quota q
      CROSS JOIN LATERAL _quota_count(q.kind, q.key) c
      CROSS JOIN LATERAL (SELECT coalesce(sum(x.inodes), 0) AS inodes, coalesce(sum(x.space), 0) AS space
                            FROM quota_usage x WHERE x.kind = q.kind AND x.key = q.key) u
     WHERE c.inodes <> u.inodes OR c.space <> u.space
    UNION ALL
    -- dir_stats = a recount of each directory's entries
    SELECT 'dir_stats', coalesce(c.parent, r.inode),
           pg_catalog.format('counted %s entries / %s bytes / length %s, recorded %s / %s / %s',
                             coalesce(c.inodes, 0), coalesce(c.space, 0), coalesce(c.length, 0),
                             coalesce(r.inodes, 0), coalesce(r.space, 0), coalesce(r.length, 0))
      FROM (SELECT e.parent, count(*) AS inodes, sum(_node_space(n.type, n.length)) AS space, sum(n.length) AS length
              FROM edge e JOIN node n ON n.inode = e.inode GROUP BY e.parent) c
      FULL JOIN (SELECT d.inode, sum(d.inodes) AS inodes, sum(d.space) AS space, sum(d.length) AS length
                   FROM dir_stats d GROUP BY d.inode) r
        ON r.inode = c.parent
     WHERE coalesce(c.inodes, 0) <> coalesce(r.inodes, 0) OR coalesce(c.space, 0) <> coalesce(r.space, 0)
        OR coalesce(c.length, 0) <> coalesce(r.length, 0)
    UNION ALL
    -- a directory's qroot is the nearest quota root at or above it
    SELECT 'qroot', n.inode, pg_catalog.format('qroot %s, nearest quota root %s', n.qroot, _nearest_quota_root(n.inode))
      FROM node n WHERE n.type = 2 AND n.qroot <> _nearest_quota_root(n.inode)
    UNION ALL
    -- a directory quota's chain is it and the quota roots above it, nearest first
    SELECT 'quota_chain', q.key, pg_catalog.format('chain %s, walked %s', q.chain, _walked_chain(q.key))
      FROM quota q WHERE q.kind = 'dir' AND q.chain IS DISTINCT FROM _walked_chain(q.key)
$$;

-- Initialises the volume: settings, counters, the root directory (inode 1),
-- the volume quota and the tier table. Formatting again needs p_force, which
-- updates the settings and keeps the namespace and the uuid (as
-- `juicefs format --force` does); the block size cannot change once data exists.
-- p_compression (none, lz4, zstd) and an RSA private key p_encrypt_key (PEM)
-- with p_encrypt_algo (aes256gcm-rsa, the default, or chacha20-rsa) say how
-- blocks are stored; neither can change once data exists (NULL keeps the
-- volume's compression, 'none' on a new one; a NULL key keeps its
-- encryption, '' ends it).
-- Returns errno (0, 17 EEXIST when formatted and not forced, 22 EINVAL for a
-- refused change), the volume's uuid and a message for people.
CREATE OR REPLACE FUNCTION format(
    p_name            text,
    p_storage         text    DEFAULT 'file',
    p_bucket          text    DEFAULT '',
    p_block_size      integer DEFAULT 4194304,
    p_trash_days      integer DEFAULT 0,
    p_capacity        bigint  DEFAULT 0,
    p_inodes          bigint  DEFAULT 0,
    p_meta_durability text    DEFAULT 'fsync',
    p_uuid            uuid    DEFAULT NULL,
    p_force           boolean DEFAULT false,
    p_access_key      text    DEFAULT NULL,
    p_secret_key      text    DEFAULT NULL,
    p_compression     text    DEFAULT NULL,
    p_encrypt_algo    text    DEFAULT NULL,
    p_encrypt_key     text    DEFAULT NULL,
    OUT errno integer, OUT uuid uuid, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    old setting;
    v_now bigint := _now();
    v_old_key text;
    v_algo text;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$' THEN
        errno := 22;
        message := pg_catalog.format('invalid volume name %L: use 3 to 63 lower-case letters, digits and "-", '
                          'starting and ending with a letter or digit', p_name);
        RETURN;
    END IF;
    IF p_storage IS NULL OR p_storage NOT IN ('file', 's3') THEN
        errno := 22; message := pg_catalog.format('invalid storage %L: use file or s3', p_storage); RETURN;
    END IF;
    IF p_block_size IS NULL OR p_block_size NOT BETWEEN 65536 AND 67108864 OR p_block_size % 65536 <> 0 THEN
        errno := 22;
        message := pg_catalog.format('invalid block size %s: use a multiple of 64 KiB between 64 KiB and 64 MiB', p_block_size);
        RETURN;
    END IF;
    IF p_meta_durability IS NULL OR p_meta_durability NOT IN ('fsync', 'always') THEN
        errno := 22; message := pg_catalog.format('invalid meta durability %L: use fsync or always', p_meta_durability);
        RETURN;
    END IF;
    IF coalesce(p_trash_days, -1) < 0 OR coalesce(p_capacity, -1) < 0 OR coalesce(p_inodes, -1) < 0 THEN
        errno := 22; message := 'trash days, capacity and inodes must be >= 0 (0 = none/unlimited)'; RETURN;
    END IF;
    IF lower(p_compression) NOT IN ('none', 'lz4', 'zstd') THEN
        errno := 22; message := pg_catalog.format('invalid compression %L: use none, lz4 or zstd', p_compression);
        RETURN;
    END IF;
    IF coalesce(p_encrypt_key, '') = '' AND coalesce(p_encrypt_algo, '') <> '' THEN
        errno := 22; message := 'an encryption algorithm needs an RSA key to wrap the objects'' keys'; RETURN;
    END IF;
    v_algo := CASE WHEN coalesce(p_encrypt_key, '') = '' THEN '' ELSE coalesce(nullif(p_encrypt_algo, ''), 'aes256gcm-rsa') END;
    IF v_algo NOT IN ('', 'aes256gcm-rsa', 'chacha20-rsa') THEN
        errno := 22; message := pg_catalog.format('invalid encryption algorithm %L: use aes256gcm-rsa or chacha20-rsa',
                                                  p_encrypt_algo);
        RETURN;
    END IF;

    LOCK TABLE setting IN EXCLUSIVE MODE;
    SELECT * INTO old FROM setting;
    IF FOUND THEN
        IF NOT p_force THEN
            errno := 17; uuid := old.uuid;
            message := pg_catalog.format('already formatted as volume %L (uuid %s); pass force => true to change its settings',
                              old.name, old.uuid);
            RETURN;
        END IF;
        IF p_block_size <> old.block_size AND EXISTS (SELECT 1 FROM slice) THEN
            errno := 22; uuid := old.uuid;
            message := pg_catalog.format('cannot change the block size from %s to %s: the volume holds data',
                              old.block_size, p_block_size);
            RETURN;
        END IF;
        IF old.shard <> 0 AND p_trash_days > 0 THEN
            errno := 22; uuid := old.uuid;
            message := pg_catalog.format('this database is shard %s of its volume, which keeps no trash '
                                         '(the trash is the root database''s): format it with trash days 0',
                                         old.shard);
            RETURN;
        END IF;
        v_old_key := coalesce((SELECT s.encrypt_key FROM secret s), '');
        p_compression := coalesce(p_compression, old.compression);
        IF p_encrypt_key IS NULL THEN
            v_algo := old.encrypt_algo;
            p_encrypt_key := v_old_key;
        END IF;
        IF (lower(p_compression) <> lower(old.compression) OR v_algo <> old.encrypt_algo
            OR p_encrypt_key <> v_old_key) AND EXISTS (SELECT 1 FROM slice) THEN
            errno := 22; uuid := old.uuid;
            message := pg_catalog.format('cannot change how blocks are stored (compression %s, encryption %s) to '
                                         '(compression %s, encryption %s): the volume holds data written so',
                                         old.compression, coalesce(nullif(old.encrypt_algo, ''), 'none'),
                                         p_compression, coalesce(nullif(v_algo, ''), 'none'));
            RETURN;
        END IF;
        UPDATE setting SET name = p_name, storage = p_storage, bucket = p_bucket,
               block_size = p_block_size, trash_days = p_trash_days, meta_durability = p_meta_durability,
               compression = p_compression, encrypt_algo = v_algo;
        UPDATE quota SET max_space = p_capacity, max_inodes = p_inodes WHERE kind = 'fs' AND key = 0;
        PERFORM _quota_reshare('fs', 0, 0, 0);
        PERFORM _quota_flags();
        IF p_access_key IS NOT NULL OR p_secret_key IS NOT NULL OR p_encrypt_key <> v_old_key THEN
            INSERT INTO secret (access_key, secret_key, encrypt_key)
            VALUES (coalesce(p_access_key, ''), coalesce(p_secret_key, ''), p_encrypt_key)
                ON CONFLICT (id) DO UPDATE SET access_key = coalesce(p_access_key, secret.access_key),
                                               secret_key = coalesce(p_secret_key, secret.secret_key),
                                               encrypt_key = p_encrypt_key;
        END IF;
        errno := 0; uuid := old.uuid;
        message := pg_catalog.format('volume %L settings updated', p_name);
        RETURN;
    END IF;

    uuid := coalesce(p_uuid, gen_random_uuid());
    INSERT INTO setting (name, uuid, storage, bucket, block_size, trash_days, meta_durability, squash_roles,
                         compression, encrypt_algo)
    VALUES (p_name, uuid, p_storage, coalesce(p_bucket, ''), p_block_size, p_trash_days, p_meta_durability,
            _some_role_squashed(), coalesce(p_compression, 'none'), v_algo);
    IF p_access_key IS NOT NULL OR p_secret_key IS NOT NULL OR coalesce(p_encrypt_key, '') <> '' THEN
        INSERT INTO secret (access_key, secret_key, encrypt_key)
        VALUES (coalesce(p_access_key, ''), coalesce(p_secret_key, ''), coalesce(p_encrypt_key, ''));
    END IF;
    INSERT INTO counter (name, next) VALUES ('inode', 2), ('slice', 1)
        ON CONFLICT (name) DO NOTHING;
    INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, parent)
    VALUES (1, 2, 511, 0, 0, v_now, v_now, v_now, 2, 0, 1)
        ON CONFLICT (inode) DO NOTHING;
    -- the volume's quota (its capacity and inodes) counts the root already
    INSERT INTO quota (kind, key, max_space, max_inodes) VALUES ('fs', 0, p_capacity, p_inodes)
        ON CONFLICT (kind, key) DO NOTHING;
    INSERT INTO quota_usage (kind, key, stripe, space, inodes)
    SELECT 'fs', 0, s, CASE WHEN s = 0 THEN 4096 ELSE 0 END, CASE WHEN s = 0 THEN 1 ELSE 0 END
      FROM generate_series(0, 15) s
        ON CONFLICT DO NOTHING;
    INSERT INTO tier (id, storage_class) SELECT t, '' FROM generate_series(0, 3) t
        ON CONFLICT DO NOTHING;
    PERFORM _quota_reshare('fs', 0, 0, 0);
    PERFORM _quota_flags();
    errno := 0;
    message := pg_catalog.format('volume %L formatted (uuid %s)', p_name, uuid);
END
$$;

-- Reserves p_count consecutive ids of kind 'inode' or 'slice' for the
-- caller; returns the first. A client reserves a range and uses it without
-- touching the counter again.
CREATE OR REPLACE FUNCTION alloc_ids(p_kind text, p_count integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_first bigint;
BEGIN
    IF p_kind NOT IN ('inode', 'slice') OR p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'alloc_ids: kind must be inode or slice and count between 1 and 1000000 (got %, %)',
            p_kind, p_count USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM _begin();
    v_first := _next_ids(p_kind, p_count);
    IF v_first IS NULL THEN
        RAISE EXCEPTION 'alloc_ids: the volume is not formatted' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF (v_first + p_count - 1) >> 48 <> _this_shard() THEN
        RAISE EXCEPTION 'alloc_ids: the % ids of shard % are used up', p_kind, _this_shard()
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    PERFORM _grant_ids(p_kind, v_first, p_count);
    RETURN v_first;
END
$$;

-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, check and repair the volume (fsck, check_quota: full scans
-- no client need run), keep read-only roles' store keys, cap the bytes
-- waiting for deletion, make a database a shard and add it to the map, make
-- shard roots.
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap',
             'shard_init', 'shard_add', 'shard_root_make', 'shard_root_link']::name[];

-- The shard this database is of its volume (0: the root).
CREATE FUNCTION shard_number() RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT _this_shard()
$$;

-- The volume's other shards (in its root database): number, URL (without
-- credentials: a mount adds its own) and when each was added.
CREATE FUNCTION shards(OUT number integer, OUT url text, OUT added_at timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT m.number, m.url, m.added_at FROM shard_map m ORDER BY m.number
$$;

-- Makes this database, formatted as volume p_uuid (jfs.format with p_uuid)
-- and used by nobody yet, shard p_number of that volume (administration):
-- its ids from then on carry p_number, and it has no root directory of
-- its own (the root database's is the volume's). Returns errno (0; 22
-- EINVAL with the reason in message when this database is not a fresh
-- format of that volume or is the root of other shards) and a message.
-- Run again with the same arguments, it changes nothing and answers 0.
CREATE FUNCTION shard_init(p_uuid uuid, p_number integer, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting;
BEGIN
    errno := 22;
    IF p_number IS NULL OR p_number NOT BETWEEN 1 AND 32766 THEN
        message := pg_catalog.format('invalid shard number %s: use 1 to 32766', p_number);
        RETURN;
    END IF;
    LOCK TABLE setting IN EXCLUSIVE MODE;
    SELECT * INTO s FROM setting;
    IF NOT FOUND OR s.uuid IS DISTINCT FROM p_uuid THEN
        message := pg_catalog.format('this database is not formatted as volume %s: format it with that uuid first',
                                     p_uuid);
        RETURN;
    ELSIF s.shard = p_number THEN
        errno := 0;
        message := pg_catalog.format('already shard %s of volume %L', p_number, s.name);
        RETURN;
    ELSIF s.shard <> 0 THEN
        message := pg_catalog.format('this database is shard %s of volume %L already', s.shard, s.name);
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM shard_map) THEN
        message := 'this database is the root of shards of its own';
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM edge) OR EXISTS (SELECT 1 FROM node WHERE inode <> 1) OR EXISTS (SELECT 1 FROM session)
          OR (SELECT c.next FROM counter c WHERE c.name = 'inode') <> 2
          OR (SELECT c.next FROM counter c WHERE c.name = 'slice') <> 1 THEN
        message := 'this database holds files or was used by a mount: a shard starts from a fresh format';
        RETURN;
    END IF;
    -- the trash is the root database's (/.trash): removals on a shard are
    -- final, as with --trash-days 0
    UPDATE setting SET shard = p_number, trash_days = 0;
    UPDATE counter SET next = (p_number::bigint << 48) + 1;
    -- the volume's root is the root database's: no root here, and so
    -- nothing charged to this database's share of the volume's usage
    DELETE FROM node WHERE inode = 1;
    DELETE FROM dir_stats WHERE inode = 1;
    UPDATE quota_usage SET space = 0, inodes = 0 WHERE kind = 'fs' AND key = 0;
    errno := 0;
    message := pg_catalog.format('this database is shard %s of volume %L', p_number, s.name);
END
$$;

-- Notes shard p_number at p_url (a connection URL without a password) in
-- the volume's shard map, in its root database (administration). The
-- shard must be made first (jfs.shard_init in its own database; `jfs
-- shard add` does both and checks the shard). Returns errno (0, 17 EEXIST
-- when the number is taken, 22 EINVAL) and a message.
CREATE FUNCTION shard_add(p_number integer, p_url text, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    errno := 22;
    IF p_number IS NULL OR p_number NOT BETWEEN 1 AND 32766 THEN
        message := pg_catalog.format('invalid shard number %s: use 1 to 32766', p_number);
    ELSIF NOT EXISTS (SELECT 1 FROM setting) THEN
        message := 'this database holds no volume';
    ELSIF shard_number() <> 0 THEN
        message := pg_catalog.format('this database is shard %s: shards are added in the root database',
                                     shard_number());
    ELSIF p_url IS NULL OR p_url !~ '^postgres(ql)?://' THEN
        message := 'a shard''s URL is a postgres:// URL';
    ELSIF p_url ~ '^postgres(ql)?://[^/@]*:[^/@]*@' OR p_url ~* '[?&]password=' THEN
        message := 'a shard''s URL is kept where every mount reads it: give it without a password '
                   '(mounts use their own credentials)';
    ELSE
        INSERT INTO shard_map (number, url) VALUES (p_number, p_url) ON CONFLICT (number) DO NOTHING;
        IF FOUND THEN
            errno := 0;
            message := pg_catalog.format('shard %s added', p_number);
        ELSE
            errno := 17;
            message := pg_catalog.format('shard %s is in the map already', p_number);
        END IF;
    END IF;
END
$$;

-- Step 1 of a shard root (administration), in the target shard's
-- database: a directory of mode p_mode owned by p_uid:p_gid whose parent
-- p_parent is a directory of another shard. Charged to this shard's part
-- of the volume's usage and its owner's quotas. Returns errno (0; 22
-- EINVAL when p_parent is of this shard or an argument is invalid; 28 or
-- 122 past a limit) and the new directory's inode.
CREATE FUNCTION shard_root_make(p_parent bigint, p_mode integer, p_uid bigint, p_gid bigint,
                                OUT errno integer, OUT inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting;
    v_now bigint := _now();
BEGIN
    SELECT * INTO s FROM setting;
    IF NOT FOUND OR s.shard = 0 OR p_parent IS NULL OR p_parent <= 0 OR NOT _remote(p_parent)
       OR p_mode IS NULL OR NOT _mode_ok(p_mode, 2) OR NOT _id_ok(p_uid) OR NOT _id_ok(p_gid) THEN
        errno := 22;
        RETURN;
    END IF;
    errno := _charge(true, _owner_key(s.owner_quotas, s.quota_uids, p_uid),
                     _owner_key(s.owner_quotas, s.quota_gids, p_gid), NULL, NULL, 1, 4096, s.quota_limits);
    IF errno <> 0 THEN
        RETURN;
    END IF;
    inode := _next_ids('inode', 1);
    INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, parent)
    VALUES (inode, 2, p_mode & 4095, p_uid, p_gid, v_now, v_now, v_now, 2, 0, p_parent);
    INSERT INTO change (op, inode, parent, name, uid, gid) VALUES ('mkdir', inode, p_parent, NULL, p_uid, p_gid);
END
$$;

-- Step 2 of a shard root (administration), in the parent's database: entry
-- p_name in directory p_parent for directory p_inode of another shard
-- (made by jfs.shard_root_make). Returns errno (0; 2 ENOENT, 20 ENOTDIR
-- for p_parent; 17 EEXIST; 22 EINVAL when p_inode is of this shard).
CREATE FUNCTION shard_root_link(p_parent bigint, p_name bytea, p_inode bigint, OUT errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_type smallint;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    errno := _check_name(p_name);
    IF errno <> 0 THEN
        RETURN;
    ELSIF p_inode IS NULL OR p_inode <= 0 OR NOT _remote(p_inode) THEN
        errno := 22;
        RETURN;
    ELSIF _is_dot(p_name) OR _reserved_name(p_parent, p_name) THEN
        errno := 17;
        RETURN;
    END IF;
    SELECT d.type INTO v_type FROM node d WHERE d.inode = p_parent FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        errno := 2;
        RETURN;
    ELSIF v_type <> 2 THEN
        errno := 20;
        RETURN;
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, 2)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        errno := 17;
        RETURN;
    END IF;
    UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    INSERT INTO change (op, inode, parent, name) VALUES ('mkdir', p_inode, p_parent, p_name);
    errno := 0;
END
$$;


-- (new functions: nobody's until granted, as a fresh install leaves them)
REVOKE EXECUTE ON FUNCTION _this_shard(), _remote(bigint), _holds_shard_roots(bigint[]), shard_number(), shards(),
    shard_init(uuid, integer), shard_add(integer, text), shard_root_make(bigint, integer, bigint, bigint),
    shard_root_link(bigint, bytea, bigint) FROM PUBLIC;
