-- jfs 0.2.18 -> 0.2.19.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.19 makes from sql/:
-- tests/upgrade/check.sh compares the two. No procedure is added or
-- removed: roles keep what they were granted.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The lease checks of every change of entries and of every lookup cost
-- little when no lease is involved: a create paid about 0.08 ms for them
-- (the explicit check and the edge triggers), now about 0.025 ms.

-- Refuses when a session other than the caller's holds the lease of any
-- of directories p_dirs (the caller's session is worked out only then).
-- (Almost every call finds no lease: one probe answers it. A loop over the
-- leases found, with the caller's session in it, made every create 0.02
-- ms slower.)
CREATE OR REPLACE FUNCTION _unleased(p_dirs bigint[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
    v_me bigint;
BEGIN
    SELECT d.dir, d.sid INTO l FROM dir_lease d WHERE d.dir = ANY (p_dirs) LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_me := _change_session();
    FOR l IN SELECT d.dir, d.sid FROM dir_lease d WHERE d.dir = ANY (p_dirs) AND d.sid IS DISTINCT FROM v_me LOOP
        PERFORM _leased(l.dir, l.sid);
    END LOOP;
END
$$;

-- After any statement that changes entries: their directories must not be
-- leased to another session. Every procedure that changes a directory's
-- entries locks the directory (FOR KEY SHARE at least) first, and
-- take_lease locks it FOR UPDATE: a change in flight when a lease is taken
-- commits before the lease does, and one after it sees the lease here.
-- (Its search_path is pinned: it also runs for statements outside the
-- procedures, a restore's COPY, an administrator's UPDATE.)
CREATE OR REPLACE FUNCTION _edge_unleased() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    -- (a probe first: almost no statement touches a leased directory, and
    -- the distinct directories and _unleased's call cost a create 0.03 ms)
    IF TG_OP = 'INSERT' THEN
        PERFORM FROM dir_lease d WHERE d.dir IN (SELECT a.parent FROM added a);
        IF FOUND THEN
            PERFORM _unleased(ARRAY(SELECT DISTINCT a.parent FROM added a));
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM FROM dir_lease d WHERE d.dir IN (SELECT g.parent FROM gone g);
        IF FOUND THEN
            PERFORM _unleased(ARRAY(SELECT DISTINCT g.parent FROM gone g));
        END IF;
    ELSE
        PERFORM FROM dir_lease d WHERE d.dir IN (SELECT a.parent FROM added a UNION ALL SELECT g.parent FROM gone g);
        IF FOUND THEN
            PERFORM _unleased(ARRAY(SELECT a.parent FROM added a UNION SELECT g.parent FROM gone g));
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- ---------------------------------------------------------------------------
-- A comment's figure in _unlink_names, from bench/batch_unlink's median.

-- batch_unlink's work; with p_inodes (one per name, NULL: any), a name is
-- removed only while it names that node (jfs.lease_unlink).
CREATE OR REPLACE FUNCTION _unlink_names(p_parent bigint, p_names bytea[], p_inodes bigint[], p_sid bigint,
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
