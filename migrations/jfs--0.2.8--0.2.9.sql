-- jfs 0.2.8 -> 0.2.9.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.9 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Blocks compressed and objects sealed as JuiceFS stores them: the
-- volume's compression and encryption algorithm (setting), its RSA key
-- (secret); format and load_staged taking them, volume and volume_secrets
-- giving them. (Run the jfs.grant_* calls again: these four are new
-- functions.)

ALTER TABLE setting
    ADD COLUMN compression text NOT NULL DEFAULT 'none' CHECK (lower(compression) IN ('none', 'lz4', 'zstd')),
    ADD COLUMN encrypt_algo text NOT NULL DEFAULT '' CHECK (encrypt_algo IN ('', 'aes256gcm-rsa', 'chacha20-rsa'));
ALTER TABLE secret ADD COLUMN encrypt_key text NOT NULL DEFAULT '';

DROP FUNCTION format(text, text, text, integer, integer, bigint, bigint, text, uuid, boolean, text, text);
DROP FUNCTION volume();
DROP FUNCTION volume_secrets();
DROP FUNCTION load_staged(boolean, text, uuid, text, text, integer, integer, bigint, bigint, bigint, bigint, boolean);

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

CREATE OR REPLACE FUNCTION volume(OUT name text, OUT uuid uuid, OUT storage text, OUT bucket text, OUT block_size integer,
                       OUT trash_days integer, OUT capacity bigint, OUT inodes bigint, OUT meta_durability text,
                       OUT skip_dir_mtime_ns bigint, OUT enable_acl boolean, OUT compression text,
                       OUT encrypt_algo text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.name, s.uuid, s.storage, s.bucket, s.block_size, s.trash_days, q.max_space, q.max_inodes, s.meta_durability,
           s.skip_dir_mtime_ns, s.enable_acl, s.compression, s.encrypt_algo
      FROM setting s LEFT JOIN quota q ON q.kind = 'fs' AND q.key = 0
$$;

CREATE OR REPLACE FUNCTION volume_secrets(OUT access_key text, OUT secret_key text, OUT encrypt_key text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.access_key, s.secret_key, s.encrypt_key FROM secret s
$$;


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
    IF NOT EXISTS (SELECT 1 FROM node WHERE inode = 1) THEN
        INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, parent)
        VALUES (1, 2, 511, 0, 0, 0, 0, 0, 2, 1);
    END IF;
    IF p_enable_acl THEN
        UPDATE setting SET enable_acl = true;
    END IF;

    IF EXISTS (SELECT 1 FROM load_edge e WHERE NOT EXISTS (SELECT 1 FROM load_node n WHERE n.inode = e.inode))
       OR EXISTS (SELECT 1 FROM load_edge e WHERE e.parent <> 1
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
    nodes := nodes + 1;
    INSERT INTO edge (parent, name, inode, type)
    SELECT e.parent, e.name, e.inode, n.type FROM load_edge e JOIN node n ON n.inode = e.inode
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

    UPDATE counter SET next = greatest(next, p_next_inode,
                                       (SELECT max(inode) + 1 FROM node WHERE inode < _trash_inode()))
     WHERE name = 'inode';
    UPDATE counter SET next = greatest(next, p_next_slice, (SELECT max(slice_id) + 1 FROM slice_ref))
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


REVOKE EXECUTE ON FUNCTION format(text, text, text, integer, integer, bigint, bigint, text, uuid, boolean, text, text,
                                  text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION volume() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION volume_secrets() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION load_staged(boolean, text, uuid, text, text, integer, integer, bigint, bigint, bigint,
                                       bigint, boolean, text, text, text) FROM PUBLIC;
