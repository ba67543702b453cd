-- Volume-wide procedures: format, statfs, id reservation and sync.

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
CREATE FUNCTION format(
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

-- Used and free space and inodes, as statfs(2) reports them: of the volume,
-- or, for a directory p_inode other than the root (a mount of a
-- subdirectory), of the nearest directory quota at or above it where that
-- quota has a limit (the volume's figures where it has none; never more
-- available than the volume has). Without a capacity the volume reports
-- 1 PiB in total, doubled while more than 80% of it is charged; without
-- an inode limit, used + 10 Mi free inodes, the free ones doubled alike.
-- The volume's used space counts the bytes waiting for deletion (the
-- store holds them until the mounts delete them).
CREATE FUNCTION statfs(p_inode bigint DEFAULT 1, OUT errno integer, OUT total_space bigint, OUT avail_space bigint,
                       OUT used_inodes bigint, OUT avail_inodes bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_used_space bigint;
    v_cap bigint;
    v_inodes bigint;
    v_root bigint;
    q record;
BEGIN
    SELECT max_space, max_inodes INTO v_cap, v_inodes FROM quota WHERE kind = 'fs' AND key = 0;
    IF NOT FOUND THEN
        errno := 5; RETURN;
    END IF;
    SELECT coalesce(sum(space), 0), coalesce(sum(quota_usage.inodes), 0) INTO v_used_space, used_inodes
      FROM quota_usage WHERE kind = 'fs' AND key = 0;
    -- what waits for deletion still takes room in the store: df shows it
    v_used_space := v_used_space + (SELECT coalesce(sum(u.bytes), 0) FROM delete_usage u);
    -- without a capacity, 1 PiB, doubled while what is charged passes 80%
    -- of it (as JuiceFS shows it): no file, however sparse, fills df
    total_space := CASE WHEN v_cap > 0 THEN v_cap ELSE 1125899906842624 END;
    WHILE NOT v_cap > 0 AND total_space < 4611686018427387904
          AND total_space::numeric * 8 < v_used_space::numeric * 10 LOOP
        total_space := total_space * 2;
    END LOOP;
    avail_space := greatest(total_space - v_used_space, 0);
    -- (and 10 Mi free inodes, doubled while those used pass 80%)
    avail_inodes := CASE WHEN v_inodes > 0 THEN greatest(v_inodes - used_inodes, 0) ELSE 10485760 END;
    WHILE NOT v_inodes > 0 AND avail_inodes < 4611686018427387904
          AND used_inodes::numeric * 10 > (used_inodes + avail_inodes)::numeric * 8 LOOP
        avail_inodes := avail_inodes * 2;
    END LOOP;
    errno := 0;
    IF p_inode IS NOT NULL AND p_inode <> 1 THEN
        SELECT n.qroot INTO v_root FROM node n WHERE n.inode = p_inode AND n.type = 2;
        IF NOT FOUND THEN
            errno := 2; RETURN;
        END IF;
        SELECT l.max_space, l.max_inodes, coalesce(sum(x.space), 0) AS space, coalesce(sum(x.inodes), 0) AS inodes
          INTO q
          FROM quota l LEFT JOIN quota_usage x ON x.kind = l.kind AND x.key = l.key
         WHERE l.kind = 'dir' AND l.key = v_root
         GROUP BY l.max_space, l.max_inodes;
        IF q.max_space > 0 THEN
            total_space := q.max_space;
            avail_space := least(greatest(q.max_space - q.space, 0), avail_space);
        END IF;
        IF q.max_inodes > 0 THEN
            used_inodes := q.inodes;
            avail_inodes := least(greatest(q.max_inodes - q.inodes, 0), avail_inodes);
        END IF;
    END IF;
END
$$;

-- Reserves p_count consecutive ids of kind 'inode' or 'slice' for the
-- caller; returns the first. A client reserves a range and uses it without
-- touching the counter again.
CREATE FUNCTION alloc_ids(p_kind text, p_count integer) RETURNS bigint
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

-- Waits until everything committed so far (by any session) is flushed to
-- the WAL on disk and, when the server has synchronous standbys
-- (synchronous_standby_names), flushed on them too: a failover to one then
-- loses nothing this vouched for. fsync, fsyncdir, syncfs and close after
-- writes call it in 'fsync' durability mode. Costs nothing when nothing is
-- pending: the local flush, and every synchronous standby's, has passed
-- the end of the WAL (a standby away, or a role that may not read
-- pg_stat_replication, counts as pending). A commit waits only if its
-- transaction wrote WAL (an xid alone writes none, and its commit then is
-- as asynchronous as the commits it was to cover): the transactional
-- message is that WAL, and the synchronous commit of this transaction
-- flushes, here and on the synchronous standbys, everything inserted
-- before it.
CREATE FUNCTION sync() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_end pg_lsn := pg_current_wal_insert_lsn();
BEGIN
    IF pg_current_wal_flush_lsn() < v_end
       OR (current_setting('synchronous_standby_names') <> ''
           AND coalesce((SELECT min(r.flush_lsn) FROM pg_stat_replication r
                          WHERE r.sync_state IN ('sync', 'quorum')), '0/0'::pg_lsn) < v_end) THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
        PERFORM pg_catalog.pg_logical_emit_message(true, 'jfs.sync', '');
    END IF;
END
$$;

-- The volume's format, for clients (which may not read the tables).
CREATE FUNCTION volume(OUT name text, OUT uuid uuid, OUT storage text, OUT bucket text, OUT block_size integer,
                       OUT trash_days integer, OUT capacity bigint, OUT inodes bigint, OUT meta_durability text,
                       OUT skip_dir_mtime_ns bigint, OUT enable_acl boolean, OUT compression text,
                       OUT encrypt_algo text, OUT inline_max integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.name, s.uuid, s.storage, s.bucket, s.block_size, s.trash_days, q.max_space, q.max_inodes, s.meta_durability,
           s.skip_dir_mtime_ns, s.enable_acl, s.compression, s.encrypt_algo, s.inline_max
      FROM setting s LEFT JOIN quota q ON q.kind = 'fs' AND q.key = 0
$$;

-- The object store's keys and the blocks' RSA key, for mounts. A
-- read-only role gets the keys kept for readers (set_reader_keys), or
-- none: never keys that can delete blocks (it still gets the RSA key,
-- without which nothing reads; its passphrase is never stored here).
-- VOLATILE so that jfs.grant_reader, which grants the read-only functions,
-- never grants this one.
CREATE FUNCTION volume_secrets(OUT access_key text, OUT secret_key text, OUT encrypt_key text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT CASE WHEN r.ro THEN s.reader_access_key ELSE s.access_key END,
           CASE WHEN r.ro THEN s.reader_secret_key ELSE s.secret_key END, s.encrypt_key
      FROM secret s CROSS JOIN (SELECT _caller_read_only() AS ro) r
$$;

-- Keeps p_access_key and p_secret_key as the object store's keys of
-- read-only roles (administration): keys of a user of the store that may
-- only read its bucket. '' for both: read-only roles get no keys (their
-- mounts then use the credentials of their own environment).
CREATE FUNCTION set_reader_keys(p_access_key text, p_secret_key text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_access_key IS NULL OR p_secret_key IS NULL OR (p_access_key = '') <> (p_secret_key = '') THEN
        RAISE EXCEPTION 'jfs.set_reader_keys: an access key and its secret key, or empty strings for both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO secret (reader_access_key, reader_secret_key) VALUES (p_access_key, p_secret_key)
        ON CONFLICT (id) DO UPDATE SET reader_access_key = excluded.reader_access_key,
                                       reader_secret_key = excluded.reader_secret_key;
END
$$;

-- `jfs destroy`, its first step (administration): marks the volume of uuid
-- p_uuid as being destroyed, after which no session opens (session_open
-- refuses), so the client can delete its objects with nobody writing new
-- ones, then call destroy_finish. Running it again (a destroy that stopped
-- half way) is allowed. errno 2: the database holds no volume; 22: p_uuid
-- is not its uuid; 16: sessions are live (a heartbeat within their
-- timeout), unless p_force, which ends them.
CREATE FUNCTION destroy_begin(p_uuid uuid, p_force boolean DEFAULT false, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting;
    v_live bigint;
BEGIN
    -- the row lock orders this with session_open (which reads it FOR SHARE)
    SELECT * INTO s FROM setting FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2; message := 'the database holds no volume';
        RETURN;
    ELSIF s.uuid IS DISTINCT FROM p_uuid THEN
        errno := 22;
        message := pg_catalog.format('the volume here is %s (uuid %s), not %s: give its uuid (jfs status shows it)',
                                     s.name, s.uuid, coalesce(p_uuid::text, 'NULL'));
        RETURN;
    END IF;
    SELECT count(*) INTO v_live FROM session x
     WHERE x.heartbeat > now() - coalesce(x.session_timeout, interval '5 minutes');
    IF v_live > 0 AND NOT coalesce(p_force, false) THEN
        errno := 16;
        message := pg_catalog.format('%s session(s) of the volume are live (see jfs status): unmount it everywhere '
                                     'first, or pass --force to end them', v_live);
        RETURN;
    END IF;
    DELETE FROM lock_wait; DELETE FROM plock; DELETE FROM sustained; DELETE FROM session;
    UPDATE setting SET destroying = coalesce(destroying, now());
    errno := 0;
END
$$;

-- `jfs destroy`, its last step (administration), after the volume's
-- objects are deleted: empties every table of the volume, so the database
-- is as CREATE EXTENSION left it (the client roles' limits stay) and
-- `jfs format` can make a new volume (session ids go on counting, so none
-- names a session of the old volume's mounts). errno 2: no volume; 22:
-- p_uuid is not its uuid, or destroy_begin did not mark it; 16: a reader
-- of the tables (a dump, a query) kept them locked for 10 seconds.
CREATE FUNCTION destroy_finish(p_uuid uuid, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp SET lock_timeout = '10s' AS $$
DECLARE
    s setting;
    v_tables text;
    q record;
BEGIN
    SELECT * INTO s FROM setting FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2; message := 'the database holds no volume';
        RETURN;
    ELSIF s.uuid IS DISTINCT FROM p_uuid OR s.destroying IS NULL THEN
        errno := 22;
        message := pg_catalog.format('volume %s (uuid %s) is not being destroyed by uuid %s: jfs.destroy_begin first',
                                     s.name, s.uuid, coalesce(p_uuid::text, 'NULL'));
        RETURN;
    END IF;
    SELECT string_agg(c.oid::regclass::text, ', ' ORDER BY c.relname) INTO v_tables
      FROM pg_class c
     WHERE c.relnamespace = 'jfs'::regnamespace AND c.relkind IN ('r', 'p')
       AND c.relname NOT IN ('client_role', 'tree_lock');
    BEGIN
        EXECUTE 'TRUNCATE ' || v_tables;
    EXCEPTION WHEN lock_not_available THEN
        errno := 16;
        message := 'another session holds the volume''s tables (a dump, a long query): try again when it ends';
        RETURN;
    END;
    FOR q IN SELECT c.oid::regclass AS seq FROM pg_class c
              WHERE c.relnamespace = 'jfs'::regnamespace AND c.relkind = 'S' AND c.relname <> 'session_sid'
    LOOP
        EXECUTE pg_catalog.format('ALTER SEQUENCE %s RESTART', q.seq);
    END LOOP;
    errno := 0;
END
$$;
