-- The invariant checker: every row it returns is a broken invariant. The
-- test suites run it after every test; people can run it any time
-- (it reads the whole namespace, so it is slow on big volumes).

-- The nearest directory at or above p_dir with a quota (0: none), by walking up.
CREATE FUNCTION _nearest_quota_root(p_dir bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_cur bigint := p_dir;
BEGIN
    FOR i IN 1..100000 LOOP
        IF EXISTS (SELECT 1 FROM quota q WHERE q.kind = 'dir' AND q.key = v_cur) THEN
            RETURN v_cur;
        ELSIF v_cur = 1 THEN
            RETURN 0;
        END IF;
        SELECT n.parent INTO v_cur FROM node n WHERE n.inode = v_cur;
        IF v_cur IS NULL OR v_cur = 0 THEN
            RETURN 0;
        END IF;
    END LOOP;
    RETURN 0;
END
$$;

-- The chain of quota root p_root (itself, then the quota roots above it),
-- by walking up the namespace.
CREATE FUNCTION _walked_chain(p_root bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_chain bigint[] := '{}';
    v_cur bigint := p_root;
    v_parent bigint;
BEGIN
    WHILE v_cur > 0 AND cardinality(v_chain) < 10000 LOOP
        v_chain := v_chain || v_cur;
        SELECT n.parent INTO v_parent FROM node n WHERE n.inode = v_cur AND n.inode <> 1;
        v_cur := CASE WHEN v_parent > 0 THEN _nearest_quota_root(v_parent) ELSE 0 END;
    END LOOP;
    RETURN v_chain;
END
$$;

CREATE FUNCTION fsck() RETURNS TABLE (problem text, inode bigint, detail text)
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

-- Rebuilds what follows from the namespace and the slices wherever it
-- differs (what fsck reports as nlink, dir nlink, used, slice refs, delslice,
-- usage and dir_stats): link counts from the entries, each file's used bytes
-- from its slices, slice references from the slice rows (a slice no row
-- names any more is queued for deletion, one still named leaves the
-- queue), quota usage and dir_stats from a recount. What needs a person
-- (dangling entries, unreachable nodes) it leaves alone. Returns how many
-- rows of each kind it changed. Metadata changes wait while it runs.
CREATE FUNCTION fsck_repair() RETURNS TABLE (repaired text, changed bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    LOCK TABLE node, edge, slice, slice_ref, delslice IN EXCLUSIVE MODE;
    repaired := 'nlink';
    UPDATE node n SET nlink = c.k
      FROM (SELECT e.inode, count(*)::integer AS k FROM edge e WHERE e.type <> 2 GROUP BY e.inode) c
     WHERE n.inode = c.inode AND n.type <> 2 AND n.nlink <> c.k;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'dir nlink';
    UPDATE node n SET nlink = c.k
      FROM (SELECT d.inode, 2 + (SELECT count(*) FROM edge e WHERE e.parent = d.inode AND e.type = 2)::integer AS k
              FROM node d WHERE d.type = 2) c
     WHERE n.inode = c.inode AND n.nlink <> c.k;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'used';
    UPDATE node n SET used = d.size
      FROM (SELECT f.inode, _data_size(f.inode, 0, 144115188075855872) AS size FROM node f WHERE f.type = 1) d
     WHERE n.inode = d.inode AND n.used <> d.size;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'slice refs';
    WITH counted AS (
        SELECT s.slice_id, max(s.slice_size) AS size, count(*)::integer AS k FROM slice s
         WHERE s.slice_id <> 0 GROUP BY s.slice_id
    ), fixed AS (
        INSERT INTO slice_ref AS r (slice_id, size, refs) SELECT c.slice_id, c.size, c.k FROM counted c
            ON CONFLICT (slice_id) DO UPDATE SET refs = excluded.refs WHERE r.refs <> excluded.refs
        RETURNING 1
    )
    SELECT count(*) INTO changed FROM fixed;
    WITH gone AS (
        DELETE FROM slice_ref r WHERE NOT EXISTS (SELECT 1 FROM slice s WHERE s.slice_id = r.slice_id)
        RETURNING r.slice_id, r.size
    ), queued AS (
        INSERT INTO delslice (slice_id, size) SELECT g.slice_id, g.size FROM gone g ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT changed + count(*) INTO changed FROM queued;
    RETURN NEXT;
    repaired := 'delslice';
    DELETE FROM delslice d WHERE EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = d.slice_id);
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'delete usage';
    SELECT count(*) INTO changed
      FROM (SELECT count(*)::bigint AS slices, coalesce(sum(d.size), 0)::bigint AS bytes FROM delslice d) c,
           (SELECT coalesce(sum(x.slices), 0)::bigint AS slices, coalesce(sum(x.bytes), 0)::bigint AS bytes
              FROM delete_usage x) u
     WHERE c.slices <> u.slices OR c.bytes <> u.bytes;
    IF changed > 0 THEN
        DELETE FROM delete_usage;
        INSERT INTO delete_usage (stripe, slices, bytes) SELECT 0, count(*), coalesce(sum(d.size), 0) FROM delslice d;
    END IF;
    RETURN NEXT;
    repaired := 'usage and dir_stats';
    SELECT count(*) FILTER (WHERE c.repaired) INTO changed FROM check_quota(NULL, NULL, true) c;
    RETURN NEXT;
END
$$;

-- The slices some file uses (id and size), in id order after p_after, at
-- most p_limit: what `jfs fsck --check-objects` looks for in the object store
-- (a slice kept in the database, inline_data, has no object).
CREATE FUNCTION live_slices(p_after bigint, p_limit integer) RETURNS TABLE (slice_id bigint, size integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT r.slice_id, r.size FROM slice_ref r WHERE r.slice_id > p_after AND r.refs > 0
       AND NOT EXISTS (SELECT 1 FROM inline_data i WHERE i.slice_id = r.slice_id)
     ORDER BY r.slice_id LIMIT p_limit
$$;
