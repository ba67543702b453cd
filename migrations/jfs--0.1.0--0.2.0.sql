-- jfs 0.1.0 -> 0.2.0 (unreleased: this script grows with the changes of
-- sql/ until 0.2.0 is released, then it is frozen like every other here).
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.0 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Compaction (sql/compact.sql, sql/internal.sql): _drop_chunks drops a range
-- of chunks, _drop_slices is written with it.

-- Drops the slices of chunks p_from_chunk..p_to_chunk of files: slice rows
-- deleted, references released, slices whose last reference went away
-- queued in delslice for the mounts to delete their objects. Slice
-- references are locked in id order so concurrent drops of shared slices
-- cannot deadlock.
CREATE FUNCTION _drop_chunks(p_inodes bigint[], p_from_chunk integer, p_to_chunk integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_freed bigint[];
BEGIN
    PERFORM 1 FROM slice_ref
     WHERE slice_id IN (SELECT slice_id FROM slice
                         WHERE inode = ANY (p_inodes) AND chunk_index BETWEEN p_from_chunk AND p_to_chunk
                           AND slice_id <> 0)
     ORDER BY slice_id FOR UPDATE;
    WITH gone AS (
        DELETE FROM slice WHERE inode = ANY (p_inodes) AND chunk_index BETWEEN p_from_chunk AND p_to_chunk
        RETURNING slice_id
    ), counts AS (
        SELECT slice_id, count(*)::integer AS n FROM gone WHERE slice_id <> 0 GROUP BY slice_id
    ), released AS (
        UPDATE slice_ref r SET refs = r.refs - c.n FROM counts c
         WHERE r.slice_id = c.slice_id
        RETURNING r.slice_id, r.size, r.refs
    ), queued AS (
        INSERT INTO delslice (slice_id, size)
        SELECT slice_id, size FROM released WHERE refs = 0
        RETURNING slice_id
    )
    SELECT array_agg(slice_id) INTO v_freed FROM queued;
    IF v_freed IS NOT NULL THEN
        DELETE FROM slice_ref WHERE slice_id = ANY (v_freed);
    END IF;
END
$$;

-- Drops the slices of chunks >= p_from_chunk of files (see _drop_chunks).
CREATE OR REPLACE FUNCTION _drop_slices(p_inodes bigint[], p_from_chunk integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _drop_chunks(p_inodes, p_from_chunk, 2147483647);
END
$$;

-- Compaction. Every write commits a slice, and a chunk written in many
-- small pieces reads slowly: each read fetches and merges all of its slices.
-- A mount rewrites such a chunk as one slice (the bytes the chunk shows,
-- holes as zeros, up to the file's length) and swaps it in here, in one
-- transaction that first checks the chunk did not change meanwhile.

-- A chunk's slices as compaction reads them: in commit order, with their
-- seq (compact_chunk checks the last one) and the file's length.
CREATE FUNCTION compaction_slices(p_inode bigint, p_chunk_index integer)
RETURNS TABLE (seq bigint, pos integer, slice_id bigint, slice_size integer, slice_off integer,
               len integer, file_length bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.seq, s.pos, s.slice_id, s.slice_size, s.slice_off, s.len, n.length
      FROM slice s JOIN node n ON n.inode = s.inode
     WHERE s.inode = p_inode AND s.chunk_index = p_chunk_index
     ORDER BY s.seq
$$;

-- Replaces the slices of chunk p_chunk_index of file p_inode with the one
-- slice p_slice_id (p_slice_size bytes, in object storage already) placed at
-- p_pos, if the chunk still has p_rows slices, the last with seq p_last_seq
-- (so nothing was written, truncated or compacted since they were read).
-- The old slices' references are released; the freed ones are queued in
-- delslice. Length and times do not change. Returns 0; 11 (EAGAIN) when the
-- chunk changed, and the caller deletes the new slice's blocks; 2 when the
-- file is gone; 22 for bad arguments.
CREATE FUNCTION compact_chunk(
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
       OR p_pos::bigint + p_slice_size > _chunk_size() OR p_rows IS NULL THEN
        RETURN 22;
    END IF;
    PERFORM 1 FROM node WHERE inode = p_inode AND type = 1 FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    SELECT count(*), max(seq) INTO v_rows, v_last
      FROM slice WHERE inode = p_inode AND chunk_index = p_chunk_index;
    IF v_rows <> p_rows OR v_last IS DISTINCT FROM p_last_seq THEN
        RETURN 11;
    END IF;
    PERFORM _drop_chunks(ARRAY[p_inode], p_chunk_index, p_chunk_index);
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, 0, p_slice_size, p_pos);
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    RETURN 0;
END
$$;

-- The chunks of regular files at or below p_root (an inode) with at least
-- p_min_slices slices, for `jfs compact`.
CREATE FUNCTION fragmented_chunks(p_root bigint, p_min_slices integer DEFAULT 2)
RETURNS TABLE (inode bigint, chunk_index integer, slices bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH RECURSIVE tree (inode, type) AS (
        SELECT n.inode, n.type FROM node n WHERE n.inode = p_root
        UNION ALL
        SELECT e.inode, e.type FROM edge e JOIN tree t ON e.parent = t.inode WHERE t.type = 2
    )
    SELECT s.inode, s.chunk_index, count(*)
      FROM slice s
     WHERE s.inode IN (SELECT t.inode FROM tree t WHERE t.type = 1)
     GROUP BY s.inode, s.chunk_index
    HAVING count(*) >= greatest(p_min_slices, 1)
     ORDER BY s.inode, s.chunk_index
$$;

-- For people: chunks by number of slices, most fragmented first.
CREATE VIEW fragmentation AS
SELECT s.inode, path(s.inode) AS path, s.chunk_index, count(*) AS slices,
       sum(s.len) AS bytes_written
  FROM slice s
 GROUP BY s.inode, s.chunk_index
 ORDER BY count(*) DESC, s.inode, s.chunk_index;

-- ---------------------------------------------------------------------------
-- Privileges of what this version adds (sql/security.sql does the same at
-- install): nothing for PUBLIC. Roles granted before are not granted here:
-- privileges given inside an extension script count as the extension's own
-- (pg_init_privs) and pg_dump would leave them out. After the update a DBA
-- runs jfs.grant_client / jfs.grant_reader again for them (README,
-- "Upgrading"); a mount whose role misses a procedure says so.
REVOKE EXECUTE ON FUNCTION _drop_chunks(bigint[], integer, integer),
    compaction_slices(bigint, integer),
    compact_chunk(bigint, integer, integer, bigint, bigint, integer, integer),
    fragmented_chunks(bigint, integer) FROM PUBLIC;
REVOKE ALL ON fragmentation FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Input checks (sql/internal.sql, namespace.sql, setattr.sql, fsck.sql):
-- modes are permission bits (with the node type's S_IF* bits or none),
-- uids and gids 0 .. 2^32 - 2; fsck reports rows outside them.

-- Whether p_mode is permission bits (07777), alone or with the file-type
-- bits stat(2) gives node type p_type (S_IFREG for 1, S_IFDIR for 2, ...).
CREATE FUNCTION _mode_ok(p_mode integer, p_type integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_mode >= 0 AND (p_mode & ~4095) IN (0, CASE p_type WHEN 1 THEN 32768 WHEN 2 THEN 16384
        WHEN 3 THEN 40960 WHEN 4 THEN 4096 WHEN 5 THEN 24576 WHEN 6 THEN 8192 WHEN 7 THEN 49152 ELSE 0 END)
$$;

-- Whether p_id can be a uid or gid: 0 .. 2^32 - 2 (2^32 - 1 means "no
-- change" to chown(2)).
CREATE FUNCTION _id_ok(p_id bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT p_id BETWEEN 0 AND 4294967294 $$;

CREATE OR REPLACE FUNCTION mknod(
    p_parent bigint, p_name bytea, p_type integer, p_mode integer, p_uid bigint, p_gid bigint,
    p_rdev bigint DEFAULT 0, p_target bytea DEFAULT NULL, p_inode bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    par record;
    n node;
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
    END IF;

    -- the parent must stay a directory until we commit: FOR KEY SHARE keeps
    -- rmdir out but lets other creates in (mkdir changes its nlink: NO KEY UPDATE)
    -- (with the settings and the chain of quota roots the entry is charged to)
    IF p_type = 2 THEN
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR NO KEY UPDATE OF d;
    ELSE
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain
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

    n.inode := coalesce(p_inode, _next_ids('inode', 1));
    n.type := p_type::smallint;
    n.mode := p_mode & 4095;
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
    END IF;
    IF p_type = 2 THEN
        UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE inode = p_parent;
    ELSIF _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
    END IF;
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
        END IF;
    END IF;
    IF (v_set & 2 <> 0 AND p_uid <> n.uid) OR (v_set & 4 <> 0 AND p_gid <> n.gid) THEN
        -- a new owner: the node's usage moves to the new user/group quotas
        v_new_uid := CASE WHEN v_set & 2 <> 0 AND p_uid <> n.uid THEN p_uid END;
        v_new_gid := CASE WHEN v_set & 4 <> 0 AND p_gid <> n.gid THEN p_gid END;
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
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION fsck() RETURNS TABLE (problem text, inode bigint, detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    -- an entry must point at an existing node of the same type, in a directory
    SELECT 'dangling edge', e.inode, pg_catalog.format('entry %s in %s', _name_text(e.name), e.parent)
      FROM edge e WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = e.inode)
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
    UNION ALL
    -- every node is reachable from the root, unless unlinked and held open
    -- (an anti-join, not NOT IN: NOT IN over a big set is quadratic)
    SELECT 'unreachable', n.inode, pg_catalog.format('type %s, nlink %s', n.type, n.nlink)
      FROM node n
      LEFT JOIN (WITH RECURSIVE tree(inode) AS (
                     SELECT 1::bigint
                     UNION
                     SELECT e.inode FROM tree JOIN edge e ON e.parent = tree.inode
                 )
                 SELECT DISTINCT tree.inode FROM tree) r ON r.inode = n.inode
     WHERE n.inode <> 1 AND r.inode IS NULL
       AND NOT EXISTS (SELECT 1 FROM sustained s WHERE s.inode = n.inode AND n.nlink = 0)
    UNION ALL
    SELECT 'sustained', s.inode, pg_catalog.format('session %s: session or unlinked node missing', s.sid)
      FROM sustained s
     WHERE NOT EXISTS (SELECT 1 FROM session x WHERE x.sid = s.sid)
        OR NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = s.inode AND n.nlink = 0)
    UNION ALL
    SELECT 'symlink', n.inode, 'symlink without target, or target of a non-symlink'
      FROM node n FULL JOIN symlink l ON l.inode = n.inode
     WHERE (n.type = 3) IS DISTINCT FROM (l.inode IS NOT NULL)
    UNION ALL
    SELECT 'xattr', x.inode, 'xattr of a missing node'
      FROM xattr x WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = x.inode)
    UNION ALL
    -- slices belong to regular files; a file of length 0 has none
    SELECT 'slice owner', s.inode, pg_catalog.format('chunk %s seq %s', s.chunk_index, s.seq)
      FROM slice s LEFT JOIN node n ON n.inode = s.inode
     WHERE n.type IS DISTINCT FROM 1 OR n.length = 0
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
           pg_catalog.format('counted %s entries / %s bytes, recorded %s / %s',
                             coalesce(c.inodes, 0), coalesce(c.space, 0), coalesce(r.inodes, 0), coalesce(r.space, 0))
      FROM (SELECT e.parent, count(*) AS inodes, sum(_node_space(n.type, n.length)) AS space
              FROM edge e JOIN node n ON n.inode = e.inode GROUP BY e.parent) c
      FULL JOIN (SELECT d.inode, sum(d.inodes) AS inodes, sum(d.space) AS space FROM dir_stats d GROUP BY d.inode) r
        ON r.inode = c.parent
     WHERE coalesce(c.inodes, 0) <> coalesce(r.inodes, 0) OR coalesce(c.space, 0) <> coalesce(r.space, 0)
    UNION ALL
    -- a directory's qroot is the nearest quota root at or above it
    SELECT 'qroot', n.inode, pg_catalog.format('qroot %s, nearest quota root %s', n.qroot, _nearest_quota_root(n.inode))
      FROM node n WHERE n.type = 2 AND n.qroot <> _nearest_quota_root(n.inode)
    UNION ALL
    -- a directory quota's chain is it and the quota roots above it, nearest first
    SELECT 'quota_chain', q.key, pg_catalog.format('chain %s, walked %s', q.chain, _walked_chain(q.key))
      FROM quota q WHERE q.kind = 'dir' AND q.chain IS DISTINCT FROM _walked_chain(q.key)
$$;

REVOKE EXECUTE ON FUNCTION _mode_ok(integer, integer), _id_ok(bigint) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- A client role reads the tier classes through a procedure (sql/tier.sql).

-- The storage class of every tier id, for the mounts (a client role reads
-- no table).
CREATE FUNCTION tier_classes() RETURNS TABLE (id smallint, storage_class text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT t.id, t.storage_class FROM tier t ORDER BY t.id
$$;

REVOKE EXECUTE ON FUNCTION tier_classes() FROM PUBLIC;
