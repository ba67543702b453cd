-- Batch operations: many entries in one call and one transaction, set-based.

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
DECLARE
    v_now bigint := _now();
    par record;
    v_targets bigint[];
    v_done_names bytea[];
    v_done_inodes bigint[];
    v_zero bigint[];
    v_keep bigint[] := '{}';
BEGIN
    SELECT d.type, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns INTO par
      FROM node d, setting s WHERE d.inode = p_parent;
    IF par.type IS DISTINCT FROM 2 THEN
        RETURN QUERY SELECT u.n, CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, NULL::bigint
                       FROM unnest(p_names) WITH ORDINALITY u(n, i) ORDER BY u.i;
        RETURN;
    END IF;
    PERFORM _durability(par.meta_durability);

    -- lock the nodes named and the parent in ascending inode order
    SELECT array_agg(DISTINCT e.inode) INTO v_targets
      FROM edge e WHERE e.parent = p_parent AND e.name = ANY (p_names) AND e.type <> 2;
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_targets) AND n.inode < p_parent ORDER BY n.inode FOR UPDATE;
    PERFORM 1 FROM node n WHERE n.inode = p_parent FOR KEY SHARE;
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_targets) AND n.inode > p_parent ORDER BY n.inode FOR UPDATE;

    -- under the locks: drop the entries and the links they held
    WITH gone AS (
        DELETE FROM edge e WHERE e.parent = p_parent AND e.name = ANY (p_names) AND e.type <> 2
        RETURNING e.name, e.inode
    ), per_node AS (
        SELECT g.inode, count(*)::integer AS n FROM gone g GROUP BY g.inode
    ), dropped AS (
        UPDATE node x SET nlink = x.nlink - p.n, ctime = v_now FROM per_node p
         WHERE x.inode = p.inode
        RETURNING x.inode, x.nlink
    )
    SELECT (SELECT array_agg(g.name) FROM gone g), (SELECT array_agg(g.inode) FROM gone g),
           (SELECT array_agg(d.inode) FROM dropped d WHERE d.nlink = 0)
      INTO v_done_names, v_done_inodes, v_zero;

    IF v_zero IS NOT NULL THEN
        -- nodes that had links have no sustained rows: only this session can keep them
        IF p_sid > 0 AND EXISTS (SELECT 1 FROM session WHERE sid = p_sid) THEN
            SELECT coalesce(array_agg(z), '{}') INTO v_keep FROM unnest(v_zero) z WHERE z = ANY (p_open_inodes);
            INSERT INTO sustained (sid, inode) SELECT p_sid, k FROM unnest(v_keep) k ON CONFLICT DO NOTHING;
        END IF;
        PERFORM _free_nodes(ARRAY(SELECT z FROM unnest(v_zero) z WHERE NOT z = ANY (v_keep)));
    END IF;
    IF v_done_names IS NOT NULL AND _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    END IF;

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
