-- Batch operations: many entries in one call and one transaction, set-based.

-- Drops one link of a node per element of p_inodes (the entries just
-- deleted; a node named twice loses two): nodes keeping other links get a
-- lower nlink; nodes left with none are freed, except those the session p_sid
-- has open (p_open_inodes), which stay with nlink 0 in sustained until
-- released, and regular files while other sessions are live, which stay in
-- unlinked (see _keep_open). Nodes about to be freed are not updated first
-- (for a big batch that halves the rows written).
CREATE FUNCTION _drop_links(p_inodes bigint[], p_now bigint, p_sid bigint, p_open_inodes bigint[]) RETURNS void
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

    -- (joins: looking each name up in the arrays, or asking whether a name
    -- not removed is there in a subquery, made a batch of 4,000 names take
    -- 567 ms, not 71: bench/batch_unlink)
    RETURN QUERY
        SELECT u.n,
               CASE WHEN d.nm IS NOT NULL THEN 0
                    WHEN _check_name(u.n) <> 0 THEN _check_name(u.n)
                    WHEN _is_dot(u.n) THEN 21
                    WHEN l.name IS NOT NULL THEN 21
                    ELSE 2 END,
               d.i
          FROM unnest(p_names) WITH ORDINALITY u(n, i)
          LEFT JOIN unnest(v_done_names, v_done_inodes) d(nm, i) ON d.nm = u.n
          LEFT JOIN edge l ON d.nm IS NULL AND l.parent = p_parent AND l.name = u.n
         ORDER BY u.i;
END
$$;

-- Removes the non-directory entries p_names of p_parent: entries deleted,
-- nlink decremented, nodes at zero links freed (or kept for session p_sid if
-- listed in p_open_inodes), their slices released and freed slices queued in
-- delslice, usage updated: a handful of set-based statements whatever the
-- number of names. One row per given name: errno 0 (removed, with the inode),
-- 2 ENOENT, 21 EISDIR (a directory, or . / ..), 22/36 for a bad name.
CREATE FUNCTION batch_unlink(p_parent bigint, p_names bytea[], p_sid bigint DEFAULT 0,
                             p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM _unlink_names(p_parent, p_names, NULL, p_sid, p_open_inodes);
END
$$;

-- The directories of the tree rooted at directory p_root, p_root first.
CREATE FUNCTION _tree_dirs(p_root bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        WITH RECURSIVE t(inode) AS (
            SELECT p_root
            UNION ALL
            SELECT e.inode FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
        )
        SELECT array_agg(t.inode) FROM t);
END
$$;

-- Whether directories p_dirs (a tree's) hold a shard root: a directory of
-- another shard (sql/shard.sql).
CREATE FUNCTION _holds_shard_roots(p_dirs bigint[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM unnest(p_dirs) d WHERE (d >> 48) NOT IN (32767, _this_shard()));
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
CREATE FUNCTION rmr(p_parent bigint, p_name bytea, p_limit integer DEFAULT 100000, p_sid bigint DEFAULT 0,
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
