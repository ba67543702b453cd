-- jfs 0.2.31 -> 0.2.32.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.32 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- Small files in the database: a file no longer than setting.inline_max
-- (0, off, for a volume made before; jfs config --inline-max) keeps the
-- bytes it is written with in inline_data, committed with its metadata
-- (write_slices, mknod_with_slices: p_inline), and read_chunk returns them
-- with its slices. volume() says inline_max; inline_blocks (for jfs dump)
-- and inline_usage read what is kept; set_inline_max (administration)
-- sets it.

ALTER TABLE setting ADD COLUMN
    -- a file no longer than this many bytes keeps the bytes it is written
    -- with in this database (inline_data), committed with its metadata,
    -- instead of in object storage (jfs format/config --inline-max; 0: off).
    -- At most 128 KiB: a row stays far below what TOAST stores comfortably
    inline_max       integer NOT NULL DEFAULT 0 CHECK (inline_max BETWEEN 0 AND 131072);

-- A slice kept in the database: what its block's object would hold,
-- byte for byte, so that the database never sees the plain bytes of an
-- encrypted volume and a dump can write the object as it would have been.
CREATE TABLE inline_data (
    slice_id bigint PRIMARY KEY REFERENCES slice_ref ON DELETE CASCADE,
    data     bytea  NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('inline_data', '');
REVOKE ALL ON TABLE inline_data FROM PUBLIC;

-- The roles that may call the functions made again below keep the right
-- (kept across the drop).
DO $upgrade$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['read_chunk(bigint, integer)',
                             'write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer)',
                             'mknod_with_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, bigint, bytea, integer, integer, bigint, bigint)',
                             'volume()']
    LOOP
        PERFORM pg_catalog.set_config('jfs.upgrade_grantees_' || pg_catalog.split_part(f, '(', 1), coalesce((
            SELECT pg_catalog.string_agg(a.grantee::text, ',')
              FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
             WHERE p.oid = f::pg_catalog.regprocedure
               AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0), ''), true);
    END LOOP;
END
$upgrade$;

DROP FUNCTION read_chunk(bigint, integer),
    write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer),
    mknod_with_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, bigint, bytea, integer, integer, bigint, bigint),
    volume();
DROP FUNCTION _write_slice(bigint, integer, integer, bigint, integer, integer, integer, bigint, boolean);

-- Appends a slice to chunk p_chunk_index of file p_inode: bytes
-- [p_slice_off, p_slice_off + p_len) of stored slice p_slice_id (of size
-- p_slice_size) now appear at [p_pos, p_pos + p_len) of the chunk, over
-- whatever was there. Called after the slice's blocks are in object storage.
-- Extends the length, sets mtime (p_mtime, default now) and ctime. The
-- slice id must be one alloc_ids handed out, committed nowhere yet and not
-- queued for deletion (EINVAL): each write's slice is committed once. A
-- slice ending at or past 2^57 bytes, the largest file, is EFBIG.
-- With p_defer, growth within the file's last 4 KiB unit is not added to
-- dir_stats but returned in `deferred`, for the caller to add after every
-- quota row it charges (write_slices: the lock order of _charge).
-- With p_inline, the slice is kept here (inline_data) instead of in object
-- storage: p_inline is what its one block's object would hold. Only for
-- a whole slice in chunk 0 of a file that is no longer than the volume's
-- inline_max after it, shorter than a block (it is one block), the bytes
-- at most inline_max plus 4 KiB (what compression and sealing may add);
-- else errno 7 (E2BIG), nothing
-- changed: the caller stores the block as an object and sends it again.
CREATE FUNCTION _write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint, p_defer boolean, p_inline bytea,
    OUT a attr, OUT deferred bigint)
LANGUAGE plpgsql AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    v_had bigint;
    n node;
BEGIN
    deferred := 0;
    IF p_chunk_index IS NULL OR p_chunk_index < 0 OR p_pos IS NULL OR p_pos < 0 OR p_len IS NULL OR p_len <= 0
       OR p_pos::bigint + p_len > _chunk_size() OR p_slice_id IS NULL OR p_slice_id <= 0
       OR p_slice_off IS NULL OR p_slice_off < 0 OR p_slice_size IS NULL
       OR p_slice_off::bigint + p_len > p_slice_size THEN
        a := _err(22);
        RETURN;
    ELSIF p_chunk_index::bigint * _chunk_size() + p_pos + p_len >= 144115188075855872 THEN
        -- (a file ends before 2^57, as setattr keeps it: the chunk index
        -- of its length must fit an integer)
        a := _err(27);
        RETURN;
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    v_errno := _file_errno(n);
    IF v_errno = 0 AND NOT _fresh_slice_id(p_slice_id) THEN
        v_errno := 22;
    END IF;
    IF v_errno <> 0 THEN
        a := _err(v_errno);
        RETURN;
    END IF;
    v_end := greatest(n.length, p_chunk_index::bigint * _chunk_size() + p_pos + p_len);
    IF p_inline IS NOT NULL AND (v_end > s.inline_max OR p_slice_off <> 0 OR p_len <> p_slice_size
                                 OR p_len >= s.block_size OR octet_length(p_inline) > s.inline_max + 4096) THEN
        a := _err(7);
        RETURN;
    END IF;
    IF p_defer AND _space(v_end) = _space(n.length) THEN
        deferred := v_end - n.length;
    ELSE
        -- a longer file must fit the quotas: refused before anything changes
        v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true, v_end - n.length);
        IF v_errno <> 0 THEN
            a := _err(v_errno);
            RETURN;
        END IF;
    END IF;
    -- (a concurrent commit of the same id makes this fail: the id is used once)
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    IF p_inline IS NOT NULL THEN
        INSERT INTO inline_data (slice_id, data) VALUES (p_slice_id, p_inline);
    END IF;
    -- the bytes that showed data under the new slice (none for an append)
    v_had := _range_size(_chunk_data(p_inode, p_chunk_index, p_pos, p_pos + p_len));
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, p_slice_off, p_len, p_pos);
    n.length := v_end; n.mtime := coalesce(p_mtime, v_now); n.ctime := v_now;
    n.used := n.used + p_len - v_had;
    UPDATE node SET length = v_end, mtime = n.mtime, ctime = v_now, used = n.used
     WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    a := _to_attr(n);
END
$$;

-- Commits slices of one file in order, in one transaction and one round
-- trip (a flush of many small writes): as write_slice for each
-- (p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i]), up
-- to the first that fails, whose errno comes back in `a` (those before it
-- stay committed). Returns how many were committed and the file's
-- attributes after the last of them. At most 10000 slices (EINVAL).
--
-- When every slice is committed and p_set is not 0, setattr's change
-- (p_set, p_mode, p_uid, p_gid, p_atime, p_set_mtime; no size) follows in
-- the same transaction: a mount sends the chmod, chown and utimens it
-- answered while the file's writes were pending with their commit (cp -a's
-- sequence in one round trip). A mode is set only if the file's mode is
-- still p_base_mode (when given), the one the mount showed before its
-- chmod: a chmod made meanwhile by someone else came later and stands.
-- Its errno comes back in attr_errno (0: set, and `a` shows it; NULL: not
-- tried); a refused change leaves the slices committed.
--
-- p_inline[i], when p_inline is given and it is not NULL, keeps slice i in
-- the database instead of object storage (_write_slice says when it may:
-- errno 7 when not, for the caller to store it and send it again).
CREATE FUNCTION write_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint DEFAULT NULL,
    p_set integer DEFAULT 0, p_mode integer DEFAULT NULL, p_uid bigint DEFAULT NULL,
    p_gid bigint DEFAULT NULL, p_atime bigint DEFAULT NULL, p_set_mtime bigint DEFAULT NULL,
    p_base_mode integer DEFAULT NULL, p_inline bytea[] DEFAULT NULL)
RETURNS TABLE (committed integer, a attr, attr_errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_ids), 0);
    v_attr attr;
    v_set attr;
    w record;
    v_deferred bigint := 0;
    v_done integer := v_n;
    v_change integer := coalesce(p_set, 0);
BEGIN
    IF v_n = 0 OR v_n > 10000 OR coalesce(cardinality(p_chunks), -1) <> v_n
       OR coalesce(cardinality(p_pos), -1) <> v_n OR coalesce(cardinality(p_sizes), -1) <> v_n
       OR coalesce(cardinality(p_offs), -1) <> v_n OR coalesce(cardinality(p_lens), -1) <> v_n
       OR coalesce(cardinality(p_inline), v_n) <> v_n OR coalesce(p_set, 0) & 8 <> 0 THEN
        RETURN QUERY SELECT 0, _err(22), NULL::integer;
        RETURN;
    END IF;
    FOR i IN 1..v_n LOOP
        w := _write_slice(p_inode, p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i], p_mtime, true,
                          p_inline[i]);
        v_attr := w.a;
        v_deferred := v_deferred + w.deferred;
        IF v_attr.errno <> 0 THEN
            v_done := i - 1;
            EXIT;
        END IF;
    END LOOP;
    -- the growth within 4 KiB units, to dir_stats after every quota row
    IF v_deferred <> 0 THEN
        PERFORM _charge_space(p_inode, NULL, NULL, 0, false, v_deferred);
    END IF;
    IF v_change & 1 <> 0 AND p_base_mode IS NOT NULL AND v_attr.mode <> p_base_mode & 4095 THEN
        v_change := v_change & ~1;
    END IF;
    IF v_done < v_n OR v_change = 0 THEN
        RETURN QUERY SELECT v_done, v_attr, CASE WHEN v_done = v_n AND coalesce(p_set, 0) <> 0 THEN 0 END;
        RETURN;
    END IF;
    v_set := setattr(p_inode, v_change, p_mode, p_uid, p_gid, p_atime, p_set_mtime);
    IF v_set.errno = 0 THEN
        v_attr := v_set;
    END IF;
    RETURN QUERY SELECT v_done, v_attr, v_set.errno;
END
$$;

-- The slices of one chunk in commit order: later rows shadow earlier ones
-- where they overlap. slice_id 0 is a hole (zeros). `inline` is the stored
-- block of a slice kept in the database (inline_data; NULL for one in
-- object storage), so a small file's bytes come with its slices. An error
-- row (errno <> 0) comes back alone when the inode does not exist or is
-- not a file.
CREATE FUNCTION read_chunk(p_inode bigint, p_chunk_index integer)
RETURNS TABLE (errno integer, pos integer, slice_id bigint, slice_size integer, slice_off integer, len integer,
               inline bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_type smallint;
BEGIN
    RETURN QUERY
        SELECT 0, s.pos, s.slice_id, s.slice_size, s.slice_off, s.len, i.data
          FROM slice s LEFT JOIN inline_data i ON i.slice_id = s.slice_id AND s.slice_id <> 0
         WHERE s.inode = p_inode AND s.chunk_index = p_chunk_index
         ORDER BY s.seq;
    IF NOT FOUND THEN
        SELECT n.type INTO v_type FROM node n WHERE n.inode = p_inode;
        IF v_type IS NULL OR v_type <> 1 THEN
            RETURN QUERY SELECT CASE WHEN v_type IS NULL THEN 2 WHEN v_type = 2 THEN 21 ELSE 22 END,
                                NULL::integer, NULL::bigint, NULL::integer, NULL::integer, NULL::integer,
                                NULL::bytea;
        END IF;
    END IF;
END
$$;

-- write_slices for a regular file the caller's session made as inode
-- p_inode under its lease of directory p_parent and has not committed yet:
-- the file is first made as mknod makes it (p_name, mode p_node_mode less
-- p_umask, owner p_node_uid:p_node_gid), in the same transaction and round
-- trip (a copy's or an unpack's file: its creation goes with its data's
-- commit at close). A name that names p_inode already (the same call sent
-- again after its answer was lost) is taken as made. create_errno is
-- mknod's (0: made); when it is not 0 nothing is committed and `a` holds
-- it too.
CREATE FUNCTION mknod_with_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint,
    p_set integer, p_mode integer, p_uid bigint, p_gid bigint, p_atime bigint, p_set_mtime bigint,
    p_base_mode integer, p_parent bigint, p_name bytea, p_node_mode integer, p_umask integer,
    p_node_uid bigint, p_node_gid bigint, p_inline bytea[] DEFAULT NULL)
RETURNS TABLE (create_errno integer, committed integer, a attr, attr_errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_made attr;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = p_inode) THEN
        v_made := mknod(p_parent, p_name, 1, p_node_mode, p_node_uid, p_node_gid, 0, NULL, p_inode, p_umask);
        IF v_made.errno <> 0 THEN
            RETURN QUERY SELECT v_made.errno, 0, v_made, NULL::integer;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT 0, w.committed, w.a, w.attr_errno
      FROM write_slices(p_inode, p_chunks, p_pos, p_ids, p_sizes, p_offs, p_lens, p_mtime, p_set, p_mode,
                        p_uid, p_gid, p_atime, p_set_mtime, p_base_mode, p_inline) w;
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

-- The slices kept in the database (inline_data), their sizes and stored blocks,
-- in id order after p_after, at most p_limit: what `jfs dump` writes as
-- objects, so that a dump names only blocks that exist.
CREATE FUNCTION inline_blocks(p_after bigint, p_limit integer)
RETURNS TABLE (slice_id bigint, size integer, data bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT i.slice_id, r.size, i.data FROM inline_data i JOIN slice_ref r ON r.slice_id = i.slice_id
     WHERE i.slice_id > p_after ORDER BY i.slice_id LIMIT p_limit
$$;

-- How much the database keeps of files' bytes (inline_data): slices,
-- stored bytes, and the files that use them; and the volume's inline_max.
CREATE FUNCTION inline_usage(OUT slices bigint, OUT bytes bigint, OUT files bigint, OUT inline_max integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT (SELECT count(*) FROM inline_data), (SELECT coalesce(sum(octet_length(data)), 0) FROM inline_data),
           (SELECT count(DISTINCT s.inode) FROM slice s JOIN inline_data i ON i.slice_id = s.slice_id),
           (SELECT s.inline_max FROM setting s)
$$;

-- Sets the length up to which files keep their bytes in the database
-- (administration; 0: none; at most 131072; NULL leaves it). Applies to
-- writes from then on: what was kept stays until rewritten. Returns the
-- setting.
CREATE FUNCTION set_inline_max(p_bytes integer DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_max integer;
BEGIN
    IF p_bytes < 0 OR p_bytes > 131072 THEN
        RAISE EXCEPTION 'jfs.set_inline_max: bytes from 0 (off) to 131072, not %', p_bytes
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET inline_max = coalesce(p_bytes, s.inline_max) RETURNING s.inline_max INTO v_max;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_inline_max: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_max;
END
$$;


-- _write_slice of one slice (see there).
CREATE OR REPLACE FUNCTION write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    w record;
BEGIN
    w := _write_slice(p_inode, p_chunk_index, p_pos, p_slice_id, p_slice_size, p_slice_off, p_len, p_mtime, false,
                      NULL);
    RETURN w.a;
END
$$;

-- The slices some file uses (id and size), in id order after p_after, at
-- most p_limit: what `jfs fsck --check-objects` looks for in the object store
-- (a slice kept in the database, inline_data, has no object).
CREATE OR REPLACE FUNCTION live_slices(p_after bigint, p_limit integer) RETURNS TABLE (slice_id bigint, size integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT r.slice_id, r.size FROM slice_ref r WHERE r.slice_id > p_after AND r.refs > 0
       AND NOT EXISTS (SELECT 1 FROM inline_data i WHERE i.slice_id = r.slice_id)
     ORDER BY r.slice_id LIMIT p_limit
$$;

-- The files at or below p_path (with p_recursive) with their tier and their
-- slices: what `jfs tier set|restore|status` walks. Holes have no objects,
-- nor do slices kept in the database (inline_data: they stay there,
-- whatever the tier).
CREATE OR REPLACE FUNCTION tier_files(p_path text, p_recursive boolean DEFAULT false)
RETURNS TABLE (inode bigint, tier smallint, storage_class text, slice_id bigint, slice_size integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_inode bigint := resolve(p_path);
BEGIN
    IF v_inode IS NULL THEN
        RAISE EXCEPTION 'jfs.tier_files: % does not exist', coalesce(p_path, 'NULL') USING ERRCODE = 'undefined_object';
    END IF;
    RETURN QUERY
        WITH RECURSIVE tree(inode) AS (
            SELECT v_inode
            UNION
            SELECT e.inode FROM tree t JOIN edge e ON e.parent = t.inode
             WHERE p_recursive AND EXISTS (SELECT 1 FROM node d WHERE d.inode = t.inode AND d.type = 2)
        )
        SELECT n.inode, n.tier, coalesce(t.storage_class, ''), s.slice_id, s.slice_size
          FROM tree x
          JOIN node n ON n.inode = x.inode AND n.type = 1
          LEFT JOIN tier t ON t.id = n.tier
          JOIN slice s ON s.inode = n.inode AND s.slice_id <> 0
         WHERE NOT EXISTS (SELECT 1 FROM inline_data i WHERE i.slice_id = s.slice_id)
         ORDER BY n.inode, s.slice_id;
END
$$;


-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, check and repair the volume (fsck, check_quota: full scans
-- no client need run), keep read-only roles' store keys, cap the bytes
-- waiting for deletion, make a database a shard and add it to the map, make
-- and check shard roots (removing one is an rmdir: write_procedures), set
-- how long a file may be and keep its bytes in the database.
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap',
             'shard_init', 'shard_add', 'shard_root_make', 'shard_root_link', 'shard_links',
             'shard_roots', 'set_dir_quota', 'delete_dir_quota', 'set_inline_max']::name[];

-- Nothing in schema jfs is usable by PUBLIC (sql/security.sql).
REVOKE EXECUTE ON FUNCTION read_chunk(bigint, integer),
    write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, bytea[]),
    mknod_with_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, bigint, bytea, integer, integer, bigint, bigint, bytea[]),
    volume(),
    _write_slice(bigint, integer, integer, bigint, integer, integer, integer, bigint, boolean, bytea),
    inline_blocks(bigint, integer), inline_usage(), set_inline_max(integer) FROM PUBLIC;

-- The functions made again, to the roles that could call them before;
-- inline_blocks and inline_usage to those that could read chunks.
DO $upgrade$
DECLARE
    g record;
    r text;
BEGIN
    FOR g IN SELECT * FROM (VALUES ('read_chunk', 'read_chunk(bigint, integer)'),
                                   ('write_slices', 'write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, bytea[])'),
                                   ('mknod_with_slices', 'mknod_with_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, bigint, bytea, integer, integer, bigint, bigint, bytea[])'),
                                   ('volume', 'volume()'),
                                   ('read_chunk', 'inline_blocks(bigint, integer)'),
                                   ('read_chunk', 'inline_usage()')) AS t(was, proc)
    LOOP
        FOREACH r IN ARRAY pg_catalog.string_to_array(pg_catalog.current_setting('jfs.upgrade_grantees_' || g.was), ',')
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', g.proc, r::oid::pg_catalog.regrole);
        END LOOP;
    END LOOP;
END
$upgrade$;

-- The initial privileges of jfs's objects are their owner's alone, as a
-- fresh install makes them: the grants just made inside ALTER EXTENSION
-- are not (pg_dump would leave them out of a dump). As 0.2.15 repairs
-- them; it changes nothing where nothing needs it.
UPDATE pg_catalog.pg_init_privs i
   SET initprivs = ARRAY(SELECT item FROM pg_catalog.unnest(i.initprivs) AS item
                          WHERE (SELECT a.grantee = a.grantor
                                   FROM pg_catalog.aclexplode(ARRAY[item]) AS a LIMIT 1))
 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = i.classoid AND d.objid = i.objoid)
   AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(i.initprivs) AS a WHERE a.grantee <> a.grantor);

-- PostgreSQL 17 and later also record each role named in an initial
-- privilege in pg_shdepend (deptype 'i'): those taken out above go too.
DELETE FROM pg_catalog.pg_shdepend s
 WHERE pg_catalog.current_setting('server_version_num')::integer >= 170000
   AND s.deptype = 'i'
   AND s.dbid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = s.classid AND d.objid = s.objid)
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) AS a
                    WHERE i.classoid = s.classid AND i.objoid = s.objid AND i.objsubid = s.objsubid
                      AND a.grantee = s.refobjid);
