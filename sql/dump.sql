-- jfs dump / jfs load: the whole volume as a stream of rows (read in one
-- REPEATABLE READ snapshot by the client, which writes JuiceFS's JSON dump
-- layout as the rows arrive), and the set-based load of a dump that a client
-- has copied into temporary staging tables.

-- The tree under p_root (the root itself first, depth 0), depth first: every
-- directory's entries right after it, each with all that the dump writes of
-- it. A node with several names comes at each of them. Below the root
-- (p_root = 1) the trash is left out; it is dumped on its own (p_root =
-- _trash_inode()). chunks is the file's slices as JSON, in JuiceFS's form:
-- [{"index": chunk, "slices": [{"id", "pos", "size", "off", "len"}, ...]}],
-- each chunk's slices in commit order (later ones shadow earlier ones).
-- acl_* are the ACL rows: kind ('a' access, 'd' default), tag, qualifier, perm.
-- A shard root (a directory of another shard, sql/shard.sql) comes with
-- its name, inode and type and no attributes (mode NULL): its shard's
-- dump_tree of it gives them, and what is below it.
CREATE FUNCTION dump_tree(p_root bigint DEFAULT 1)
RETURNS TABLE (depth integer, name bytea, inode bigint, type smallint, mode integer, uid bigint, gid bigint,
               atime bigint, mtime bigint, ctime bigint, nlink integer, length bigint, rdev bigint,
               tier smallint, target bytea, xattr_names bytea[], xattr_values bytea[], chunks text,
               acl_kinds text[], acl_tags smallint[], acl_qualifiers bigint[], acl_perms smallint[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp SET work_mem = '64MB' AS $$
    WITH RECURSIVE t(inode, type, name, depth, path) AS (
        SELECT p_root, NULL::smallint, NULL::bytea, 0, ARRAY[]::bigint[]
        UNION ALL
        SELECT e.inode, e.type, e.name, t.depth + 1, t.path || e.cookie
          FROM t JOIN edge e ON e.parent = t.inode
         WHERE NOT (p_root = 1 AND e.parent = 1 AND e.inode = _trash_inode())
    )
    SELECT t.depth, t.name, t.inode, coalesce(n.type, t.type), n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
           n.nlink, n.length, n.rdev, n.tier, s.target, x.names, x.vals, c.chunks, a.kinds, a.tags, a.qualifiers,
           a.perms
      FROM t
      LEFT JOIN node n ON n.inode = t.inode
      LEFT JOIN symlink s ON n.type = 3 AND s.inode = n.inode
      LEFT JOIN LATERAL (SELECT array_agg(x.name ORDER BY x.name) AS names, array_agg(x.value ORDER BY x.name) AS vals
                           FROM xattr x WHERE x.inode = n.inode) x ON true
      LEFT JOIN LATERAL (
          SELECT '[' || string_agg('{"index":' || k.chunk_index || ',"slices":[' || k.slices || ']}', ','
                                   ORDER BY k.chunk_index) || ']' AS chunks
            FROM (SELECT s.chunk_index,
                         string_agg('{"id":' || s.slice_id || ',"pos":' || s.pos || ',"size":' || s.slice_size
                                    || ',"off":' || s.slice_off || ',"len":' || s.len || '}', ',' ORDER BY s.seq)
                         AS slices
                    FROM slice s WHERE n.type = 1 AND s.inode = n.inode GROUP BY s.chunk_index) k
      ) c ON true
      LEFT JOIN LATERAL (SELECT array_agg(a.kind::text ORDER BY a.kind, a.tag, a.qualifier) AS kinds,
                                array_agg(a.tag ORDER BY a.kind, a.tag, a.qualifier) AS tags,
                                array_agg(a.qualifier ORDER BY a.kind, a.tag, a.qualifier) AS qualifiers,
                                array_agg(a.perm ORDER BY a.kind, a.tag, a.qualifier) AS perms
                           FROM acl a WHERE a.inode = n.inode) a ON true
     ORDER BY t.path
$$;

-- What a dump writes beside the tree: the settings (without the keys), the
-- counters and the usage; the quotas of directories, users and groups.
CREATE FUNCTION dump_volume(OUT name text, OUT uuid uuid, OUT storage text, OUT bucket text, OUT block_size integer,
                            OUT trash_days integer, OUT capacity bigint, OUT inodes bigint, OUT enable_acl boolean,
                            OUT next_inode bigint, OUT next_slice bigint, OUT used_space bigint,
                            OUT used_inodes bigint, OUT has_trash boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.name, s.uuid, s.storage, s.bucket, s.block_size, s.trash_days, q.max_space, q.max_inodes, s.enable_acl,
           (SELECT c.next FROM counter c WHERE c.name = 'inode'), (SELECT c.next FROM counter c WHERE c.name = 'slice'),
           (SELECT coalesce(sum(u.space), 0)::bigint FROM quota_usage u WHERE u.kind = 'fs' AND u.key = 0),
           (SELECT coalesce(sum(u.inodes), 0)::bigint FROM quota_usage u WHERE u.kind = 'fs' AND u.key = 0),
           EXISTS (SELECT 1 FROM node n WHERE n.inode = _trash_inode())
      FROM setting s LEFT JOIN quota q ON q.kind = 'fs' AND q.key = 0
$$;

CREATE FUNCTION dump_quotas() RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT q.kind, q.key, q.max_space, q.max_inodes FROM quota q WHERE q.kind <> 'fs' ORDER BY q.kind, q.key
$$;

-- Whether the calling mount is the one to write the automatic metadata
-- backup now (`jfs mount --backup-meta`): the one call that finds the last
-- backup at least p_interval old (or none) records now and gets its UTC
-- time as YYYY-MM-DD-HHMMSS (the backup's name); every other mount's call
-- in that interval gets NULL.
CREATE FUNCTION backup_claim(p_interval interval) RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    UPDATE setting SET last_backup = now() WHERE last_backup IS NULL OR last_backup <= now() - p_interval
    RETURNING to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD-HH24MISS')
$$;

-- Gives back a claim whose backup failed (p_stamp: what backup_claim
-- returned), so that the next mount to ask writes it.
CREATE FUNCTION backup_release(p_stamp text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    UPDATE setting SET last_backup = NULL
     WHERE to_char(last_backup AT TIME ZONE 'UTC', 'YYYY-MM-DD-HH24MISS') = p_stamp;
    RETURN FOUND;
END
$$;

-- Staging tables of a load, for this session's transaction: the client
-- copies a dump's nodes, entries, slices, symlinks, xattrs, ACLs and quotas
-- into them (COPY), then jfs.load_staged() moves them into the volume set by
-- set. A node is staged once (a hard link's other names as edges only).
CREATE FUNCTION load_begin() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    CREATE TEMP TABLE load_node (inode bigint, type smallint, mode integer, uid bigint, gid bigint,
                                 atime bigint, mtime bigint, ctime bigint, nlink integer, length bigint,
                                 rdev bigint, tier smallint) ON COMMIT DROP;
    CREATE TEMP TABLE load_edge (parent bigint, name bytea, inode bigint) ON COMMIT DROP;
    -- ord: the slice's place in its chunk's list (later shadows earlier)
    CREATE TEMP TABLE load_slice (inode bigint, chunk_index integer, ord integer, slice_id bigint,
                                  slice_size integer, slice_off integer, len integer, pos integer) ON COMMIT DROP;
    CREATE TEMP TABLE load_symlink (inode bigint, target bytea) ON COMMIT DROP;
    CREATE TEMP TABLE load_xattr (inode bigint, name bytea, value bytea) ON COMMIT DROP;
    CREATE TEMP TABLE load_acl (inode bigint, kind text, tag smallint, qualifier bigint, perm smallint) ON COMMIT DROP;
    CREATE TEMP TABLE load_quota (kind text, key bigint, max_space bigint, max_inodes bigint) ON COMMIT DROP;
    EXECUTE pg_catalog.format('GRANT INSERT ON pg_temp.load_node, pg_temp.load_edge, pg_temp.load_slice, '
                              'pg_temp.load_symlink, pg_temp.load_xattr, pg_temp.load_acl, pg_temp.load_quota TO %I',
                              session_user);
END
$$;

-- Whether the volume holds nothing but its root (formatted or not).
CREATE FUNCTION _volume_empty() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM edge) AND NOT EXISTS (SELECT 1 FROM node WHERE inode <> 1);
END
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
CREATE FUNCTION load_staged(p_force boolean, p_name text, p_uuid uuid, p_storage text, p_bucket text,
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
