-- jfs 0.2.29 -> 0.2.30.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.30 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- A clone of a tree holding a shard root (a directory whose node is on
-- another shard) answers errno 18, as a clone across shards does, so that
-- `jfs clone` copies it through the mount; it answered 2 (as if the source
-- had gone). _errno_text names errno 18.
--
-- load_staged loads into a shard (`jfs load --shard`): no root node of
-- its own, and its shard roots' entries (their parents in other
-- databases) give the nodes their parents without being kept.
--
-- Quotas on a shard's directories: set_dir_quota and delete_dir_quota
-- (administration) by inode, place (where a node is from this database's
-- entries) and dir_quotas (this database's directory quotas with their
-- places), which `jfs quota` uses across shards.

-- Copies the node p_src (a file, or a directory with everything below it) to
-- the new entry p_dst_name of directory p_dst_parent. New nodes take ids from
-- one reserved range; entries, slices, symlink targets and xattrs are copied;
-- each shared slice gains one reference per new slice row, so the clone is
-- copy-on-write (a later write to either side makes new slices). Hard links
-- inside the tree stay hard links in the clone (nlink counts the entries in
-- the clone); a link from outside the tree is not followed. Modes and times
-- are kept, ctime is now; p_uid/p_gid, when given, own the new nodes (a
-- squashed role's owner ids are squashed, those the clone keeps too).
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
-- destination parent is not a directory, 17 the name exists, 22/36 bad name
-- or owner id, 18 a shard root below the source (`jfs clone` then copies),
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
        SELECT ne.parent, count(*) AS inodes, sum(_node_space(nn.type, nn.length)) AS space,
               sum(nn.length) AS length
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
           (SELECT array_agg(u.length::bigint) FROM entry_usage u) AS dir_lengths,
           (SELECT count(*) FROM shared) AS shared,
           (SELECT count(*) FROM referenced) AS referenced,
           (SELECT count(*) FROM new_slices)
             + (SELECT count(*) FROM new_targets) + (SELECT count(*) FROM new_xattrs)
             + (SELECT count(*) FROM new_acls) AS rows
      INTO v_res;

    IF v_res.nodes <> v_res.mapped THEN
        -- a shard root below the source (sql/shard.sql): its node is its
        -- shard's, not this database's, so the tree can only be copied
        -- (errno 18, as across shards: the caller copies)
        IF EXISTS (WITH RECURSIVE dirs(inode) AS (
                       SELECT p_src WHERE v_src_type = 2
                       UNION ALL
                       SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2)
                   SELECT 1 FROM dirs d WHERE _remote(d.inode)) THEN
            RAISE EXCEPTION 'a shard root below the source' USING ERRCODE = 'JX018';
        END IF;
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
    INSERT INTO dir_stats AS d (inode, stripe, space, inodes, length)
    SELECT u.dir, _stripe(), u.space, u.inodes, u.length
      FROM unnest(v_res.dirs, v_res.dir_spaces, v_res.dir_inodes, v_res.dir_lengths) u(dir, space, inodes, length)
        ON CONFLICT ON CONSTRAINT dir_stats_pkey
        DO UPDATE SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes,
                      length = d.length + excluded.length;
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
    WHEN SQLSTATE 'JX018' THEN
        RETURN QUERY SELECT 18, NULL::bigint, 0::bigint, 0::bigint;
END
$$;

-- The message of an errno returned by the procedures.
CREATE OR REPLACE FUNCTION _errno_text(p_errno integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_errno
        WHEN 2 THEN 'No such file or directory' WHEN 17 THEN 'File exists'
        WHEN 20 THEN 'Not a directory' WHEN 21 THEN 'Is a directory'
        WHEN 22 THEN 'Invalid argument' WHEN 28 THEN 'No space left on device'
        WHEN 36 THEN 'File name too long' WHEN 39 THEN 'Directory not empty'
        WHEN 122 THEN 'Disk quota exceeded'
        WHEN 18 THEN 'Invalid cross-device link (across shards of the volume)'
        ELSE 'errno ' || p_errno END
$$;


-- Moves what load_begin's tables hold into the volume, in the caller's
-- transaction: formats the database first when it is not (with the dump's
-- name, uuid, storage, bucket, block size, trash days, capacity, inode
-- limit, compression and encryption with its RSA key; the object store's
-- keys are not in dumps), then inserts the nodes,
-- entries, slices, symlinks, xattrs and ACLs, and rebuilds what follows from
-- them: directory parents, slice references, each file's used bytes, the
-- counters and sequences, dir_stats and every quota's usage. Refuses
-- (errno 17) a volume that holds more than its root unless p_force, which
-- first empties it (errno 16 while it is mounted; its slices are queued
-- for deletion like any freed data, but for those the dump names again);
-- errno 22 for a dump whose volume name, block size, compression or
-- encryption (its algorithm or RSA key) differs from the formatted
-- volume's (its blocks would not be found or read), or whose entries name
-- missing nodes. Into a shard (`jfs load --shard`: jfs.shard_init first),
-- it loads the shard's nodes only, no root, and takes the entries of its
-- shard roots in their parents' databases as their parents, not as
-- entries of its own.
CREATE OR REPLACE FUNCTION load_staged(p_force boolean, p_name text, p_uuid uuid, p_storage text, p_bucket text,
                            p_block_size integer, p_trash_days integer, p_capacity bigint, p_inodes bigint,
                            p_next_inode bigint, p_next_slice bigint, p_enable_acl boolean,
                            p_compression text DEFAULT 'none', p_encrypt_algo text DEFAULT NULL,
                            p_encrypt_key text DEFAULT NULL,
                            OUT errno integer, OUT message text, OUT nodes bigint, OUT entries bigint,
                            OUT slices bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp SET work_mem = '64MB' AS $$
DECLARE
    v_setting setting;
    -- how the dump's objects are sealed ('' not at all), as format names it
    v_algo text := CASE WHEN coalesce(p_encrypt_key, '') = '' THEN ''
                        ELSE coalesce(nullif(p_encrypt_algo, ''), 'aes256gcm-rsa') END;
    v_format record;
    q record;
BEGIN
    -- the staging tables must be load_begin's: tables of this definer in
    -- this session's temporary schema (not, say, a caller's view)
    IF (SELECT count(*) FROM pg_class c
         WHERE c.relnamespace = pg_my_temp_schema() AND c.relkind = 'r'
           AND c.relowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user)
           AND c.relname IN ('load_node', 'load_edge', 'load_slice', 'load_symlink', 'load_xattr', 'load_acl',
                             'load_quota')) <> 7 THEN
        RAISE EXCEPTION 'jfs.load_staged: no staging tables of jfs.load_begin() in this transaction'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    LOCK TABLE setting, node, edge IN EXCLUSIVE MODE;
    -- autovacuum never sees temporary tables: without statistics the
    -- planner would join the staged rows by nested loops
    ANALYZE pg_temp.load_node, pg_temp.load_edge, pg_temp.load_slice;
    IF NOT _volume_empty() THEN
        IF NOT p_force THEN
            errno := 17;
            message := 'the volume is not empty: load into an empty database, or pass --force to replace what it holds';
            RETURN;
        END IF;
        IF EXISTS (SELECT 1 FROM session s WHERE s.heartbeat > now() - interval '5 minutes') THEN
            errno := 16;
            message := 'the volume is mounted (sessions with a heartbeat in the last 5 minutes, see jfs status): '
                       'unmount it everywhere before replacing it';
            RETURN;
        END IF;
        -- DELETE, not TRUNCATE: a dump running now keeps its snapshot. The
        -- old slices are queued for deletion (kept retain_deleted, like any
        -- freed data); those the dump names again leave the queue below.
        INSERT INTO delslice (slice_id, size) SELECT r.slice_id, r.size FROM slice_ref r ON CONFLICT DO NOTHING;
        DELETE FROM edge; DELETE FROM node; DELETE FROM slice; DELETE FROM slice_ref; DELETE FROM symlink;
        DELETE FROM xattr; DELETE FROM acl; DELETE FROM sustained; DELETE FROM unlinked; DELETE FROM plock;
        DELETE FROM lock_wait; DELETE FROM dir_stats; DELETE FROM session;
        DELETE FROM quota WHERE kind <> 'fs';
        DELETE FROM quota_usage WHERE kind <> 'fs';
    END IF;
    SELECT * INTO v_setting FROM setting;
    IF NOT FOUND THEN
        SELECT * INTO v_format FROM format(p_name, p_storage, p_bucket, p_block_size, p_trash_days,
                                          p_capacity, p_inodes, 'fsync', p_uuid,
                                          p_compression => p_compression, p_encrypt_algo => p_encrypt_algo,
                                          p_encrypt_key => p_encrypt_key);
        IF v_format.errno <> 0 THEN
            errno := v_format.errno; message := v_format.message;
            RETURN;
        END IF;
    ELSIF lower(v_setting.compression) <> lower(coalesce(p_compression, 'none'))
          OR v_setting.encrypt_algo <> v_algo THEN
        errno := 22;
        message := pg_catalog.format('the dump''s volume stores blocks with compression %s and encryption %s, the '
                                     'formatted volume with compression %s and encryption %s: its blocks could '
                                     'not be read; load into an unformatted database',
                                     coalesce(p_compression, 'none'), coalesce(nullif(v_algo, ''), 'none'),
                                     v_setting.compression, coalesce(nullif(v_setting.encrypt_algo, ''), 'none'));
        RETURN;
    ELSIF v_algo <> '' AND coalesce((SELECT s.encrypt_key FROM secret s), '') <> p_encrypt_key THEN
        errno := 22;
        message := 'the dump''s volume seals its objects with another RSA key than the formatted volume: its '
                   'blocks could not be read; load into an unformatted database';
        RETURN;
    ELSIF v_setting.block_size <> p_block_size OR v_setting.name <> p_name THEN
        errno := 22;
        message := pg_catalog.format('the dump''s volume %L has blocks of %s bytes under %s/, the formatted volume %L'
                                     ' %s bytes under %s/: its blocks could not be found; format the database with'
                                     ' the dump''s name and block size (or load into an unformatted one)',
                                     p_name, p_block_size, p_name, v_setting.name, v_setting.block_size,
                                     v_setting.name);
        RETURN;
    END IF;
    -- a node dumped at several names with a wrong link count is staged at
    -- each: keep the first copy of its rows
    IF EXISTS (SELECT 1 FROM load_node l GROUP BY l.inode HAVING count(*) > 1) THEN
        DELETE FROM load_node l USING (SELECT x.inode, min(x.ctid) AS first FROM load_node x GROUP BY x.inode
                                        HAVING count(*) > 1) d
         WHERE l.inode = d.inode AND l.ctid <> d.first;
        DELETE FROM load_slice l USING (SELECT x.inode, x.chunk_index, x.ord, min(x.ctid) AS first FROM load_slice x
                                         GROUP BY x.inode, x.chunk_index, x.ord HAVING count(*) > 1) d
         WHERE (l.inode, l.chunk_index, l.ord) = (d.inode, d.chunk_index, d.ord) AND l.ctid <> d.first;
        DELETE FROM load_symlink l USING (SELECT x.inode, min(x.ctid) AS first FROM load_symlink x GROUP BY x.inode
                                           HAVING count(*) > 1) d
         WHERE l.inode = d.inode AND l.ctid <> d.first;
        DELETE FROM load_xattr l USING (SELECT x.inode, x.name, min(x.ctid) AS first FROM load_xattr x
                                         GROUP BY x.inode, x.name HAVING count(*) > 1) d
         WHERE (l.inode, l.name) = (d.inode, d.name) AND l.ctid <> d.first;
        DELETE FROM load_acl l USING (SELECT x.inode, x.kind, x.tag, x.qualifier, min(x.ctid) AS first FROM load_acl x
                                       GROUP BY x.inode, x.kind, x.tag, x.qualifier HAVING count(*) > 1) d
         WHERE (l.inode, l.kind, l.tag, l.qualifier) = (d.inode, d.kind, d.tag, d.qualifier) AND l.ctid <> d.first;
    END IF;
    -- (a shard has no root of its own: the root database's is the volume's)
    IF _this_shard() = 0 AND NOT EXISTS (SELECT 1 FROM node WHERE inode = 1) THEN
        INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, parent)
        VALUES (1, 2, 511, 0, 0, 0, 0, 0, 2, 1);
    END IF;
    IF p_enable_acl THEN
        UPDATE setting SET enable_acl = true;
    END IF;

    -- (loaded into a shard, a shard root's entry comes with it, its parent
    -- in another database: it gives the node its parent and is not kept
    -- here; `jfs load --shard` links the name in the parent's database)
    IF EXISTS (SELECT 1 FROM load_edge e WHERE NOT EXISTS (SELECT 1 FROM load_node n WHERE n.inode = e.inode))
       OR EXISTS (SELECT 1 FROM load_edge e WHERE e.parent <> 1
                     AND NOT (_this_shard() <> 0 AND _remote(e.parent))
                     AND NOT EXISTS (SELECT 1 FROM load_node n WHERE n.inode = e.parent AND n.type = 2)) THEN
        errno := 22; message := 'the dump has entries of nodes it does not hold, or in non-directories';
        RETURN;
    END IF;

    UPDATE node n SET mode = l.mode, uid = l.uid, gid = l.gid, atime = l.atime, mtime = l.mtime, ctime = l.ctime,
                      tier = l.tier
      FROM load_node l WHERE l.inode = 1 AND n.inode = 1;
    -- each node with what follows from the staged entries and slices: the
    -- link count (a file's names; 2 + a directory's subdirectories), a
    -- directory's parent, and the bytes a file's chunks of one slice show
    -- (chunks of several slices are overlaid below, once they are in)
    INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, rdev, tier, parent, used)
    SELECT l.inode, l.type, l.mode & 4095, l.uid, l.gid, l.atime, l.mtime, l.ctime,
           CASE WHEN l.type = 2 THEN 2 + coalesce(sub.k, 0) ELSE coalesce(names.k, 0) END,
           CASE WHEN l.type = 1 THEN l.length ELSE 0 END, l.rdev, l.tier,
           CASE WHEN l.type = 2 THEN coalesce(names.parent, 0) ELSE 0 END,
           CASE WHEN l.type = 1 THEN coalesce(one.used, 0) ELSE 0 END
      FROM load_node l
      LEFT JOIN (SELECT e.inode, count(*)::integer AS k, min(e.parent) AS parent FROM load_edge e
                  GROUP BY e.inode) names ON names.inode = l.inode
      LEFT JOIN (SELECT e.parent, count(*)::integer AS k FROM load_edge e
                   JOIN load_node d ON d.inode = e.inode AND d.type = 2 GROUP BY e.parent) sub ON sub.parent = l.inode
      LEFT JOIN (SELECT c.inode, sum(c.data)::bigint AS used
                   FROM (SELECT s.inode, sum(s.len) FILTER (WHERE s.slice_id <> 0) AS data FROM load_slice s
                          WHERE s.len > 0 GROUP BY s.inode, s.chunk_index HAVING count(*) = 1) c
                  GROUP BY c.inode) one ON one.inode = l.inode
     WHERE l.inode <> 1;
    GET DIAGNOSTICS nodes = ROW_COUNT;
    nodes := nodes + CASE WHEN _this_shard() = 0 THEN 1 ELSE 0 END;
    INSERT INTO edge (parent, name, inode, type)
    SELECT e.parent, e.name, e.inode, n.type FROM load_edge e JOIN node n ON n.inode = e.inode
     WHERE _this_shard() = 0 OR NOT _remote(e.parent)
     ORDER BY e.parent, e.name;
    GET DIAGNOSTICS entries = ROW_COUNT;
    UPDATE node SET nlink = 2 + (SELECT count(*) FROM edge e WHERE e.parent = 1 AND e.type = 2) WHERE inode = 1;

    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    SELECT s.inode, s.chunk_index, s.slice_id, s.slice_size, s.slice_off, s.len, s.pos
      FROM load_slice s JOIN node n ON n.inode = s.inode AND n.type = 1
     WHERE s.len > 0
     ORDER BY s.inode, s.chunk_index, s.ord;
    GET DIAGNOSTICS slices = ROW_COUNT;
    INSERT INTO slice_ref (slice_id, size, refs)
    SELECT s.slice_id, max(s.slice_size), count(*) FROM slice s WHERE s.slice_id <> 0 GROUP BY s.slice_id;
    DELETE FROM delslice d WHERE EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = d.slice_id);
    UPDATE node n SET used = n.used + m.used
      FROM (SELECT c.inode, sum(_range_size(_chunk_data(c.inode, c.chunk_index)))::bigint AS used
              FROM (SELECT s.inode, s.chunk_index FROM slice s GROUP BY s.inode, s.chunk_index
                    HAVING count(*) > 1) c
             GROUP BY c.inode) m
     WHERE n.inode = m.inode;

    INSERT INTO symlink (inode, target)
    SELECT l.inode, l.target FROM load_symlink l JOIN node n ON n.inode = l.inode AND n.type = 3;
    UPDATE node n SET length = length(s.target) FROM symlink s WHERE n.inode = s.inode;
    INSERT INTO xattr (inode, name, value)
    SELECT l.inode, l.name, l.value FROM load_xattr l WHERE EXISTS (SELECT 1 FROM node n WHERE n.inode = l.inode);
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT l.inode, l.kind::"char", l.tag, l.qualifier, l.perm FROM load_acl l
     WHERE EXISTS (SELECT 1 FROM node n WHERE n.inode = l.inode);

    -- (ids of other shards, from a sharded volume's dump, keep theirs: the
    -- counters go on within this database's shard)
    UPDATE counter SET next = greatest(next, p_next_inode,
                                       (SELECT max(inode) + 1 FROM node WHERE inode >> 48 = _this_shard()))
     WHERE name = 'inode';
    UPDATE counter SET next = greatest(next, p_next_slice,
                                       (SELECT max(slice_id) + 1 FROM slice_ref WHERE slice_id >> 48 = _this_shard()))
     WHERE name = 'slice';

    FOR q IN SELECT * FROM load_quota l
              WHERE l.kind IN ('user', 'group') OR (l.kind = 'dir' AND EXISTS (SELECT 1 FROM node n
                                                                  WHERE n.inode = l.key AND n.type = 2))
              ORDER BY l.kind, l.key
    LOOP
        PERFORM _set_quota(q.kind, q.key, q.max_space, q.max_inodes);
    END LOOP;
    PERFORM count(*) FROM check_quota(NULL, NULL, true);
    PERFORM _quota_flags();
    errno := 0;
    message := pg_catalog.format('loaded %s nodes, %s entries, %s slices', nodes, entries, slices);
END
$$;


-- A directory quota by the directory's inode (administration), for the
-- directories of a shard (sql/shard.sql), which have no path from the
-- volume's root in their own database: `jfs quota set --path` finds the
-- inode across shards. As set_quota otherwise: the quota counts this
-- database's nodes below it and stops at a shard root.
CREATE FUNCTION set_dir_quota(p_inode bigint, p_space bigint, p_inodes bigint DEFAULT 0)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = p_inode AND n.type = 2 AND n.nlink > 0) THEN
        RAISE EXCEPTION 'jfs.set_dir_quota: no directory % in this database', coalesce(p_inode::text, 'NULL')
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN QUERY SELECT * FROM _set_quota('dir', p_inode, p_space, p_inodes);
END
$$;

-- Removes the quota of the directory of inode p_inode (administration;
-- see set_dir_quota): whether there was one.
CREATE FUNCTION delete_dir_quota(p_inode bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN _delete_quota('dir', p_inode);
END
$$;

-- Where the node of inode p_inode is, from the entries of this database:
-- the topmost directory above it here (1, the volume's root; on a shard,
-- the shard root its entries lead to, whose own entry is in its parent's
-- database) and its path below that ('' for that directory itself).
CREATE FUNCTION place(p_inode bigint, OUT top bigint, OUT below text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    WITH RECURSIVE up(at, path, depth) AS (
        SELECT p_inode, ''::text, 0
        UNION ALL
        SELECT e.parent, '/' || _name_text(e.name) || u.path, u.depth + 1
          FROM up u
          JOIN LATERAL (SELECT x.parent, x.name FROM edge x WHERE x.inode = u.at
                         ORDER BY x.parent, x.name LIMIT 1) e ON true
         WHERE u.at <> 1 AND u.depth < 100000
    )
    SELECT u.at, u.path INTO top, below FROM up u ORDER BY u.depth DESC LIMIT 1;
END
$$;

-- The directory quotas of this database by inode, with where each
-- directory is (see place): what `jfs quota list` shows of a shard.
CREATE FUNCTION dir_quotas()
RETURNS TABLE (key bigint, top bigint, below text, max_space bigint, used_space bigint, max_inodes bigint,
               used_inodes bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT q.key, p.top, p.below, q.max_space, coalesce(u.space, 0)::bigint, q.max_inodes,
           coalesce(u.inodes, 0)::bigint
      FROM quota q
      CROSS JOIN LATERAL place(q.key) p
      LEFT JOIN LATERAL (SELECT sum(x.space) AS space, sum(x.inodes) AS inodes FROM quota_usage x
                          WHERE x.kind = 'dir' AND x.key = q.key) u ON true
     WHERE q.kind = 'dir'
     ORDER BY q.key
$$;


-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, check and repair the volume (fsck, check_quota: full scans
-- no client need run), keep read-only roles' store keys, cap the bytes
-- waiting for deletion, make a database a shard and add it to the map, make
-- and check shard roots (removing one is an rmdir: write_procedures).
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap',
             'shard_init', 'shard_add', 'shard_root_make', 'shard_root_link', 'shard_links',
             'shard_roots', 'set_dir_quota', 'delete_dir_quota']::name[];

-- (new functions: nobody's until granted, as a fresh install leaves them)
REVOKE EXECUTE ON FUNCTION set_dir_quota(bigint, bigint, bigint), delete_dir_quota(bigint), place(bigint),
    dir_quotas() FROM PUBLIC;
