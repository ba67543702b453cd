-- jfs 0.2.6 -> 0.2.7.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.7 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- setting.squash_roles: some client role is squashed. mknod looks the
-- caller's squash up only then (sql/internal.sql, namespace.sql); grant_client,
-- grant_admin and format keep it.

ALTER TABLE setting ADD COLUMN squash_roles boolean NOT NULL DEFAULT false;

CREATE FUNCTION _some_role_squashed() RETURNS boolean
LANGUAGE sql STABLE AS $$ SELECT EXISTS (SELECT 1 FROM jfs.client_role r WHERE r.squash <> 'none') $$;

UPDATE setting SET squash_roles = _some_role_squashed();

CREATE OR REPLACE FUNCTION grant_client(p_role name, p_read_only boolean DEFAULT NULL,
                             p_root_squash text DEFAULT NULL, p_all_squash text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_limits jfs.client_role;
    v_squash text := coalesce(nullif(p_all_squash, ''), nullif(p_root_squash, ''));
    v_ids text[];
BEGIN
    IF p_root_squash <> '' AND p_all_squash <> '' THEN
        RAISE EXCEPTION 'jfs.grant_client: a role has a root squash or an all squash, not both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_limits FROM jfs.client_role c WHERE c.role = p_role;
    IF NOT FOUND THEN
        v_limits := ROW(p_role, false, 'none', 65534, 65534);
    END IF;
    v_limits.read_only := coalesce(p_read_only, v_limits.read_only);
    IF v_squash IS NOT NULL THEN
        v_ids := regexp_match(v_squash, '^([0-9]{1,10}):([0-9]{1,10})$');
        IF v_ids IS NULL OR NOT jfs._id_ok(v_ids[1]::bigint) OR NOT jfs._id_ok(v_ids[2]::bigint) THEN
            RAISE EXCEPTION 'jfs.grant_client: a squash is UID:GID (each 0 .. 4294967294), not "%"', v_squash
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_limits.squash := CASE WHEN p_all_squash <> '' THEN 'all' ELSE 'root' END;
        v_limits.squash_uid := v_ids[1]::bigint;
        v_limits.squash_gid := v_ids[2]::bigint;
    ELSIF p_root_squash = '' OR p_all_squash = '' THEN
        v_limits.squash := 'none';
    END IF;
    PERFORM jfs._grant_procedures(p_role, false, v_limits.read_only);
    INSERT INTO jfs.client_role AS c VALUES (v_limits.*)
        ON CONFLICT (role) DO UPDATE
       SET read_only = excluded.read_only, squash = excluded.squash,
           squash_uid = excluded.squash_uid, squash_gid = excluded.squash_gid;
    UPDATE jfs.setting SET squash_roles = jfs._some_role_squashed();
END
$$;

CREATE OR REPLACE FUNCTION grant_admin(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jfs._grant_procedures(p_role, true, false);
    DELETE FROM jfs.client_role c WHERE c.role = p_role;
    UPDATE jfs.setting SET squash_roles = jfs._some_role_squashed();
END
$$;

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
    OUT errno integer, OUT uuid uuid, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    old setting;
    v_now bigint := _now();
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
        UPDATE setting SET name = p_name, storage = p_storage, bucket = p_bucket,
               block_size = p_block_size, trash_days = p_trash_days, meta_durability = p_meta_durability;
        UPDATE quota SET max_space = p_capacity, max_inodes = p_inodes WHERE kind = 'fs' AND key = 0;
        PERFORM _quota_reshare('fs', 0, 0, 0);
        PERFORM _quota_flags();
        IF p_access_key IS NOT NULL OR p_secret_key IS NOT NULL THEN
            INSERT INTO secret (access_key, secret_key) VALUES (coalesce(p_access_key, ''), coalesce(p_secret_key, ''))
                ON CONFLICT (id) DO UPDATE SET access_key = coalesce(p_access_key, secret.access_key),
                                               secret_key = coalesce(p_secret_key, secret.secret_key);
        END IF;
        errno := 0; uuid := old.uuid;
        message := pg_catalog.format('volume %L settings updated', p_name);
        RETURN;
    END IF;

    uuid := coalesce(p_uuid, gen_random_uuid());
    INSERT INTO setting (name, uuid, storage, bucket, block_size, trash_days, meta_durability, squash_roles)
    VALUES (p_name, uuid, p_storage, coalesce(p_bucket, ''), p_block_size, p_trash_days, p_meta_durability,
            _some_role_squashed());
    IF p_access_key IS NOT NULL OR p_secret_key IS NOT NULL THEN
        INSERT INTO secret (access_key, secret_key) VALUES (coalesce(p_access_key, ''), coalesce(p_secret_key, ''));
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

CREATE OR REPLACE FUNCTION mknod(
    p_parent bigint, p_name bytea, p_type integer, p_mode integer, p_uid bigint, p_gid bigint,
    p_rdev bigint DEFAULT 0, p_target bytea DEFAULT NULL, p_inode bigint DEFAULT NULL,
    p_umask integer DEFAULT 0)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    par record;
    n node;
    v_acl_tags smallint[];
    v_acl_ids bigint[];
    v_acl_perms smallint[];
    v_squash record;
BEGIN
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    ELSIF p_type IS NULL OR p_type NOT BETWEEN 1 AND 7 OR p_mode IS NULL OR p_uid IS NULL OR p_gid IS NULL
          OR NOT _mode_ok(p_mode, p_type) OR NOT _id_ok(p_uid) OR NOT _id_ok(p_gid) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND (p_target IS NULL OR length(p_target) = 0 OR position('\x00'::bytea IN p_target) > 0) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND length(p_target) > 4096 THEN
        RETURN _err(36);
    ELSIF p_inode = _trash_inode() THEN
        IF p_parent <> 1 OR p_name <> '\x2e7472617368'::bytea OR p_type <> 2 OR p_uid <> 0 OR p_gid <> 0
           OR p_mode & 4095 <> 448 THEN
            RETURN _err(1);
        END IF;
    ELSIF _reserved_name(p_parent, p_name) THEN
        RETURN _err(17);
    ELSIF p_inode IS NOT NULL AND (p_inode < 2 OR NOT _handed_out('inode', p_inode)
                                   OR EXISTS (SELECT 1 FROM node x WHERE x.inode = p_inode)) THEN
        RETURN _err(22);
    END IF;

    -- the parent must stay a directory until we commit: FOR KEY SHARE keeps
    -- rmdir out but lets other creates in (mkdir changes its nlink: NO KEY UPDATE)
    -- (with the settings and the chain of quota roots the entry is charged to)
    IF p_type = 2 THEN
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
               s.squash_roles
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR NO KEY UPDATE OF d;
    ELSE
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
               s.squash_roles
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

    -- a directory's default ACL, if any, replaces the umask (sql/acl.sql)
    IF par.enable_acl AND p_type <> 3 THEN
        SELECT array_agg(a.tag ORDER BY a.tag, a.qualifier), array_agg(a.qualifier ORDER BY a.tag, a.qualifier),
               array_agg(a.perm ORDER BY a.tag, a.qualifier)
          INTO v_acl_tags, v_acl_ids, v_acl_perms
          FROM acl a WHERE a.inode = p_parent AND a.kind = 'd';
    END IF;

    n.inode := coalesce(p_inode, _next_ids('inode', 1));
    n.type := p_type::smallint;
    IF v_acl_tags IS NULL THEN
        n.mode := p_mode & 4095 & ~coalesce(p_umask, 0);
    ELSE
        n.mode := _acl_create_mode(p_mode & 4095, v_acl_tags, v_acl_perms);
    END IF;
    n.uid := p_uid;
    n.gid := p_gid;
    IF par.squash_roles AND NOT (p_type = 2 AND p_mode & 4095 = 448 AND p_uid = 0 AND p_gid = 0
                                 AND (p_inode = _trash_inode() OR p_parent = _trash_inode())) THEN
        v_squash := _caller_squash();
        n.uid := _squashed(p_uid, v_squash.kind, v_squash.uid);
        n.gid := _squashed(p_gid, v_squash.kind, v_squash.gid);
    END IF;
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
    n.used := 0;

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
    ELSIF v_acl_tags IS NOT NULL THEN
        PERFORM _acl_inherit(n.inode, p_type = 2, v_acl_tags, v_acl_ids, v_acl_perms);
    END IF;
    IF p_type = 2 THEN
        UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE inode = p_parent;
    ELSIF _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
    END IF;
    INSERT INTO change (op, inode, parent, name, uid, gid)
    VALUES ((ARRAY['create', 'mkdir', 'symlink', 'mknod', 'mknod', 'mknod', 'mknod'])[p_type],
            n.inode, p_parent, p_name, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

-- ---------------------------------------------------------------------------
-- One check for "a regular file, else ENOENT/EISDIR/EINVAL" (_file_errno)
-- where write_slice, zero_range, seek_data and copy_range wrote it out.

CREATE FUNCTION _file_errno(p_node node) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_node.inode IS NULL THEN 2 WHEN p_node.type = 2 THEN 21
                WHEN p_node.type <> 1 THEN 22 ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    v_had bigint;
    n node;
BEGIN
    IF p_chunk_index IS NULL OR p_chunk_index < 0 OR p_pos IS NULL OR p_pos < 0 OR p_len IS NULL OR p_len <= 0
       OR p_pos::bigint + p_len > _chunk_size() OR p_slice_id IS NULL OR p_slice_id <= 0
       OR p_slice_off IS NULL OR p_slice_off < 0 OR p_slice_size IS NULL
       OR p_slice_off::bigint + p_len > p_slice_size THEN
        RETURN _err(22);
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    v_errno := _file_errno(n);
    IF v_errno = 0 AND NOT _fresh_slice_id(p_slice_id) THEN
        v_errno := 22;
    END IF;
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    v_end := greatest(n.length, p_chunk_index::bigint * _chunk_size() + p_pos + p_len);
    -- a longer file must fit the quotas: refused before anything changes
    v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    -- (a concurrent commit of the same id makes this fail: the id is used once)
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    -- the bytes that showed data under the new slice (none for an append)
    v_had := _range_size(_chunk_data(p_inode, p_chunk_index, p_pos, p_pos + p_len));
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, p_slice_off, p_len, p_pos);
    n.length := v_end; n.mtime := coalesce(p_mtime, v_now); n.ctime := v_now;
    n.used := n.used + p_len - v_had;
    UPDATE node SET length = v_end, mtime = n.mtime, ctime = v_now, used = n.used
     WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION zero_range(p_inode bigint, p_offset bigint, p_length bigint, p_keep_size boolean)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    n node;
BEGIN
    IF p_offset IS NULL OR p_offset < 0 OR p_length IS NULL OR p_length <= 0 OR p_keep_size IS NULL THEN
        RETURN _err(22);
    ELSIF NOT p_keep_size AND p_offset >= 144115188075855872 - p_length THEN  -- 2^57: chunk index past int range
        RETURN _err(27);
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    v_errno := _file_errno(n);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF p_keep_size AND p_offset >= n.length THEN
        RETURN _to_attr(n);   -- nothing of the file in the range: nothing changes
    END IF;
    IF p_keep_size THEN
        v_end := p_offset + least(p_length, n.length - p_offset);
    ELSE
        v_end := p_offset + p_length;
    END IF;
    IF v_end > n.length THEN
        v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true);
        IF v_errno <> 0 THEN
            RETURN _err(v_errno);
        END IF;
    END IF;
    -- past the old end nothing shows data (truncate and writes keep it so)
    n.used := n.used - _zero(p_inode, p_offset, least(v_end, n.length));
    n.length := greatest(n.length, v_end);
    n.mtime := v_now; n.ctime := v_now;
    UPDATE node SET length = n.length, used = n.used, mtime = v_now, ctime = v_now WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION seek_data(p_inode bigint, p_offset bigint, p_hole boolean,
                          OUT errno integer, OUT found_at bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_chunk bigint := _chunk_size();
    v_next bigint;         -- the first chunk not yet looked at
    v_from integer;        -- where the chunk is looked at from
    v_shows int4multirange;
    n node;
    c integer;
BEGIN
    SELECT * INTO n FROM node WHERE inode = p_inode;
    errno := _file_errno(n);
    IF errno <> 0 THEN
        RETURN;
    ELSIF p_hole IS NULL THEN
        errno := 22; RETURN;
    ELSIF p_offset IS NULL OR p_offset < 0 OR p_offset >= n.length THEN
        errno := 6; RETURN;
    END IF;
    errno := 0;
    v_next := p_offset / v_chunk;
    FOR c IN SELECT DISTINCT s.chunk_index FROM slice s
              WHERE s.inode = p_inode AND s.chunk_index BETWEEN p_offset / v_chunk AND (n.length - 1) / v_chunk
              ORDER BY s.chunk_index
    LOOP
        IF p_hole AND c > v_next THEN
            found_at := greatest(p_offset, v_next * v_chunk); RETURN;   -- a chunk with no slices
        END IF;
        v_from := greatest(p_offset - c * v_chunk, 0);
        v_shows := _chunk_data(p_inode, c)
                   * int4multirange(int4range(v_from, least(n.length - c * v_chunk, v_chunk)::integer));
        IF p_hole THEN
            v_shows := int4multirange(int4range(v_from, v_chunk::integer)) - v_shows;
        END IF;
        IF NOT isempty(v_shows) THEN
            found_at := least(c * v_chunk + lower(v_shows), n.length); RETURN;
        END IF;
        v_next := c + 1;
    END LOOP;
    IF p_hole THEN
        found_at := least(greatest(p_offset, v_next * v_chunk), n.length);
    ELSE
        errno := 6;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION copy_range(p_src bigint, p_src_offset bigint, p_dst bigint, p_dst_offset bigint,
                           p_length bigint, OUT errno integer, OUT copied bigint, OUT length bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_chunk bigint := _chunk_size();
    v_shift bigint;
    v_end bigint;
    v_ids bigint[];
    v_errno integer;
    src node;
    dst node;
BEGIN
    copied := 0;
    IF p_src_offset IS NULL OR p_src_offset < 0 OR p_dst_offset IS NULL OR p_dst_offset < 0
       OR p_length IS NULL OR p_length < 0 THEN
        errno := 22; RETURN;
    END IF;
    -- both nodes locked in inode order (two copies between the same files
    -- in opposite directions cannot deadlock); the source only against
    -- changes (writes, truncates and compactions lock it for update)
    IF p_src < p_dst THEN
        SELECT * INTO src FROM node WHERE inode = p_src FOR SHARE;
        SELECT * INTO dst FROM node WHERE inode = p_dst FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO dst FROM node WHERE inode = p_dst FOR NO KEY UPDATE;
        SELECT * INTO src FROM node WHERE inode = p_src FOR SHARE;
    END IF;
    -- (the first of 2, 21, 22 either file meets)
    errno := least(nullif(_file_errno(src), 0), nullif(_file_errno(dst), 0));
    IF errno IS NOT NULL THEN
        RETURN;
    END IF;
    copied := greatest(least(p_length, src.length - p_src_offset), 0);
    IF p_src = p_dst AND copied > 0 AND p_src_offset < p_dst_offset + copied
       AND p_dst_offset < p_src_offset + copied THEN
        copied := 0; errno := 22; RETURN;
    END IF;
    IF p_dst_offset >= 144115188075855872 - copied THEN  -- 2^57: chunk index past int range
        copied := 0; errno := 27; RETURN;
    END IF;
    length := dst.length;
    errno := 0;
    IF copied = 0 THEN
        RETURN;
    END IF;
    v_end := p_dst_offset + copied;
    IF v_end > dst.length THEN
        v_errno := _charge_space(p_dst, dst.uid, dst.gid, _space(v_end) - _space(dst.length), true);
        IF v_errno <> 0 THEN
            copied := 0; errno := v_errno; RETURN;
        END IF;
    END IF;
    PERFORM _lock_refs(p_dst, p_dst_offset, v_end, p_src, p_src_offset, p_src_offset + copied);
    dst.used := dst.used - _zero(p_dst, p_dst_offset, least(v_end, dst.length));
    dst.used := dst.used + _data_size(p_src, p_src_offset, p_src_offset + copied);
    v_shift := p_dst_offset - p_src_offset;
    -- the source's rows cut to the range (file offsets a..b, the slice's
    -- bytes from off), moved by v_shift, split at the destination's chunk
    -- ends; inserted in the source's commit order (seq is drawn as the
    -- rows arrive, so later rows still shadow earlier ones)
    WITH cut AS (
        SELECT sl.seq, sl.slice_id, sl.slice_size,
               greatest(sl.chunk_index * v_chunk + sl.pos, p_src_offset) AS a,
               least(sl.chunk_index * v_chunk + sl.pos + sl.len, p_src_offset + copied) AS b,
               sl.slice_off + greatest(p_src_offset - (sl.chunk_index * v_chunk + sl.pos), 0) AS off
          FROM slice sl
         WHERE sl.inode = p_src
           AND sl.chunk_index BETWEEN p_src_offset / v_chunk AND (p_src_offset + copied - 1) / v_chunk
    ), pieces AS (
        SELECT c.seq, c.slice_id, c.slice_size, k AS chunk_index,
               greatest(c.a + v_shift, k * v_chunk) AS a,
               least(c.b + v_shift, (k + 1) * v_chunk) AS b,
               c.off + greatest(k * v_chunk - (c.a + v_shift), 0) AS off
          FROM cut c,
               generate_series((c.a + v_shift) / v_chunk, (c.b + v_shift - 1) / v_chunk) k
         WHERE c.b > c.a
    ), copied_rows AS (
        INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
        SELECT p_dst, p.chunk_index, p.slice_id, p.slice_size, p.off, p.b - p.a, p.a - p.chunk_index * v_chunk
          FROM (SELECT * FROM pieces ORDER BY seq, chunk_index) p
        RETURNING slice_id
    )
    SELECT array_agg(slice_id) INTO v_ids FROM copied_rows WHERE slice_id <> 0;
    IF v_ids IS NOT NULL THEN
        PERFORM 1 FROM slice_ref WHERE slice_id = ANY (v_ids) ORDER BY slice_id FOR UPDATE;
        UPDATE slice_ref r SET refs = r.refs + c.n
          FROM (SELECT id, count(*)::integer AS n FROM unnest(v_ids) id GROUP BY id) c
         WHERE r.slice_id = c.id;
    END IF;
    length := greatest(dst.length, v_end);
    UPDATE node SET length = copy_range.length, used = dst.used, mtime = v_now, ctime = v_now
     WHERE inode = p_dst;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_dst, dst.uid, dst.gid);
END
$$;

REVOKE EXECUTE ON FUNCTION _some_role_squashed(), _file_errno(node) FROM PUBLIC;
