-- jfs 0.1.0 -> 0.2.0 (released: frozen, like every script here).
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.0 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- POSIX ACLs (sql/schema.sql): the volume's switch and the ACL entries.
-- First, as later functions read them.

ALTER TABLE setting ADD COLUMN enable_acl boolean NOT NULL DEFAULT false;

-- POSIX ACL entries (sql/acl.sql): kind 'a' access, 'd' default; tag as in
-- the kernel's xattr format; qualifier the uid or gid of a named entry, -1
-- for the others.
CREATE TABLE acl (
    inode     bigint   NOT NULL,
    kind      "char"   NOT NULL CHECK (kind IN ('a', 'd')),
    tag       smallint NOT NULL CHECK (tag IN (1, 2, 4, 8, 16, 32)),
    qualifier bigint   NOT NULL,
    perm      smallint NOT NULL CHECK (perm BETWEEN 0 AND 7),
    PRIMARY KEY (inode, kind, tag, qualifier)
);
SELECT pg_catalog.pg_extension_config_dump('acl', '');
REVOKE ALL ON acl FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Compaction (sql/compact.sql, sql/internal.sql): _drop_chunks drops a range
-- of chunks (releasing references with _release_slices, which sql/range.sql
-- uses too), _drop_slices is written with it.

-- Releases one reference to a slice per time its id is in p_slice_ids (the
-- ids of slice rows just deleted; holes, id 0, are skipped): slices whose
-- last reference went away are queued in delslice for the mounts to delete
-- their objects. References are locked in id order, so concurrent releases
-- of shared slices cannot deadlock.
CREATE FUNCTION _release_slices(p_slice_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_freed bigint[];
BEGIN
    IF p_slice_ids IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM slice_ref WHERE slice_id = ANY (p_slice_ids) ORDER BY slice_id FOR UPDATE;
    WITH counts AS (
        SELECT id AS slice_id, count(*)::integer AS n FROM unnest(p_slice_ids) id
         WHERE id <> 0 GROUP BY id
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

-- Drops the slices of chunks p_from_chunk..p_to_chunk of files: slice rows
-- deleted, their references released (_release_slices).
CREATE FUNCTION _drop_chunks(p_inodes bigint[], p_from_chunk integer, p_to_chunk integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_gone bigint[];
BEGIN
    WITH gone AS (
        DELETE FROM slice WHERE inode = ANY (p_inodes) AND chunk_index BETWEEN p_from_chunk AND p_to_chunk
        RETURNING slice_id
    )
    SELECT array_agg(slice_id) INTO v_gone FROM gone WHERE slice_id <> 0;
    PERFORM _release_slices(v_gone);
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
       OR p_pos::bigint + p_slice_size > _chunk_size() OR p_rows IS NULL OR p_rows < 1 THEN
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
    -- the new slice shows data all along (holes stored as zeros)
    UPDATE node SET used = used + p_slice_size - _range_size(_chunk_data(p_inode, p_chunk_index))
     WHERE inode = p_inode;
    PERFORM _drop_chunks(ARRAY[p_inode], p_chunk_index, p_chunk_index);
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, 0, p_slice_size, p_pos);
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    PERFORM _log_node_change('compact', p_inode);
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
    v_truncated boolean := false;
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
            v_truncated := true;
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
    IF v_set & ~8 <> 0 OR v_truncated THEN
        INSERT INTO change (op, inode, uid, gid)
        VALUES (CASE WHEN v_truncated THEN 'truncate' ELSE 'setattr' END, n.inode, n.uid, n.gid);
    END IF;
    RETURN _to_attr(n);
END
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

-- ---------------------------------------------------------------------------
-- Administration gets its own grant (sql/security.sql): grant_client no
-- longer grants format, quotas and tiers; grant_admin does. Roles that
-- 0.1.0's grant_client gave them lose them here: a DBA runs
-- jfs.grant_admin for the roles that administer the volume (README,
-- "Upgrading").

-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, repair what fsck finds.
CREATE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted']::name[];

-- EXECUTE on every procedure (SECURITY DEFINER function) to p_role, those
-- of administration only when p_admin.
CREATE FUNCTION _grant_procedures(p_role name, p_admin boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef
                AND (p_admin OR p.proname <> ALL (jfs.admin_procedures()))
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;

-- A mount's role: every procedure but those of administration.
CREATE OR REPLACE FUNCTION grant_client(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jfs._grant_procedures(p_role, false);
END
$$;

-- An administrator's role: every procedure.
CREATE FUNCTION grant_admin(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jfs._grant_procedures(p_role, true);
END
$$;

REVOKE EXECUTE ON FUNCTION admin_procedures(), _grant_procedures(name, boolean),
    grant_admin(name) FROM PUBLIC;

DO $$
DECLARE
    f regprocedure;
    grantee name;
BEGIN
    FOR f, grantee IN
        SELECT p.oid::regprocedure, a.grantee::regrole::name
          FROM pg_proc p, LATERAL aclexplode(p.proacl) a
         WHERE p.pronamespace = 'jfs'::regnamespace AND p.proname = ANY (jfs.admin_procedures())
           AND a.grantee <> 0 AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', f, grantee);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- POSIX ACLs stored and enforced (sql/acl.sql); new entries inherit a
-- directory's default ACL in mknod, which takes the umask (the kernel
-- leaves it to the file system when ACLs are on); volume() says whether
-- they are on; what frees or copies nodes frees or copies their ACLs; the
-- ACL xattrs are listed.

-- POSIX ACLs, when the volume has them on (`jfs format --enable-acl` or
-- `jfs config --enable-acl`; like JuiceFS, they cannot be turned off again).
-- Rows of table acl, one per entry, tagged as in the kernel's xattr format
-- (1 user_obj, 2 user, 4 group_obj, 8 group, 16 mask, 32 other).
--
-- An access ACL shares the node's mode bits: the owner's entry is the
-- owner bits, the mask (or, without one, the owning group's entry) the
-- group bits, and other the other bits, so chmod changes them as POSIX
-- says with no ACL row to update. Its rows are what the mode cannot hold:
-- the owning group's entry and the named users and groups. A node without
-- rows has the minimal ACL its mode stands for. A default ACL (directories
-- only) keeps every entry as a row; new entries in the directory inherit it
-- (mknod: the umask is then ignored, the mode given is masked by the ACL).

-- Turns POSIX ACLs on for the volume. Returns whether they were off.
CREATE FUNCTION enable_acl() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    UPDATE setting SET enable_acl = true WHERE NOT enable_acl;
    RETURN FOUND;
END
$$;

-- Whether an ACL (its entries' tags, qualifiers and permissions) is well
-- formed: one owner, owning group and other entry, a mask when a named user
-- or group is present, at most one mask, named entries with valid and
-- distinct ids, permissions 0..7.
CREATE FUNCTION _acl_valid(p_tags smallint[], p_ids bigint[], p_perms smallint[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT cardinality(p_tags) = cardinality(p_ids) AND cardinality(p_tags) = cardinality(p_perms)
       AND count(*) FILTER (WHERE e.tag = 1) = 1
       AND count(*) FILTER (WHERE e.tag = 4) = 1
       AND count(*) FILTER (WHERE e.tag = 32) = 1
       AND count(*) FILTER (WHERE e.tag = 16) <= 1
       AND (count(*) FILTER (WHERE e.tag IN (2, 8)) = 0 OR count(*) FILTER (WHERE e.tag = 16) = 1)
       AND bool_and(e.tag IN (1, 2, 4, 8, 16, 32) AND e.perm BETWEEN 0 AND 7)
       AND bool_and(CASE WHEN e.tag IN (2, 8) THEN _id_ok(e.id) ELSE true END)
       AND count(DISTINCT (e.tag, CASE WHEN e.tag IN (2, 8) THEN e.id ELSE -1 END)) = count(*)
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
$$;

-- The mode of a new node made with p_mode under a directory whose default
-- ACL is given: the special bits kept, the permission bits masked by the
-- ACL's owner, mask (or owning group) and other entries.
CREATE FUNCTION _acl_create_mode(p_mode integer, p_tags smallint[], p_perms smallint[]) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT (p_mode & 3584)
           | (((max(e.perm) FILTER (WHERE e.tag = 1)) & (p_mode >> 6) & 7) << 6)
           | ((coalesce(max(e.perm) FILTER (WHERE e.tag = 16), max(e.perm) FILTER (WHERE e.tag = 4))
               & (p_mode >> 3) & 7) << 3)
           | ((max(e.perm) FILTER (WHERE e.tag = 32)) & p_mode & 7)
      FROM unnest(p_tags, p_perms) AS e(tag, perm)
$$;

-- Gives the new node p_inode the ACLs its parent's default ACL (tags, ids,
-- perms) passes on: an access ACL when the default one is more than a
-- mode (its mask and owner bits are in the mode already), and, to a
-- directory, the default ACL itself.
CREATE FUNCTION _acl_inherit(p_inode bigint, p_is_dir boolean, p_tags smallint[], p_ids bigint[],
                             p_perms smallint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT p_inode, 'a', e.tag, e.id, e.perm
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
     WHERE e.tag IN (2, 4, 8) AND p_tags && ARRAY[2, 8, 16]::smallint[];
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT p_inode, 'd', e.tag, e.id, e.perm
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
     WHERE p_is_dir;
$$;

-- The ACL of node p_inode of kind p_kind ('a' access, 'd' default) as
-- entries sorted by tag and qualifier (the xattr's order). errno 61
-- (ENODATA) when the node has none beyond its mode, 2 when it is gone,
-- 95 (EOPNOTSUPP) when the volume has ACLs off.
CREATE FUNCTION get_acl(p_inode bigint, p_kind "char", OUT errno integer,
                        OUT tags smallint[], OUT ids bigint[], OUT perms smallint[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_mode integer;
BEGIN
    IF NOT (SELECT s.enable_acl FROM setting s) THEN
        errno := 95; RETURN;
    END IF;
    SELECT n.mode INTO v_mode FROM node n WHERE n.inode = p_inode;
    IF NOT FOUND THEN
        errno := 2; RETURN;
    END IF;
    SELECT array_agg(e.tag ORDER BY e.tag, e.id), array_agg(e.id ORDER BY e.tag, e.id),
           array_agg(e.perm ORDER BY e.tag, e.id)
      INTO tags, ids, perms
      FROM (SELECT a.tag, a.qualifier AS id, a.perm FROM acl a WHERE a.inode = p_inode AND a.kind = p_kind
            UNION ALL
            -- an access ACL's owner, mask and other entries are the mode's bits
            SELECT t.tag, -1, t.perm
              FROM (VALUES (1::smallint, (v_mode >> 6 & 7)::smallint), (16, (v_mode >> 3 & 7)::smallint),
                           (32, (v_mode & 7)::smallint)) AS t(tag, perm)
             WHERE p_kind = 'a' AND EXISTS (SELECT 1 FROM acl a WHERE a.inode = p_inode AND a.kind = 'a')) e;
    errno := CASE WHEN tags IS NULL THEN 61 ELSE 0 END;
END
$$;

-- Sets (entries given) or removes (p_tags NULL) the ACL of kind p_kind of
-- node p_inode. An access ACL sets the mode's permission bits (see above);
-- one no richer than a mode leaves no rows. Returns errno: 0; 2 when the
-- node is gone; 13 (EACCES) for a default ACL of a non-directory; 22 for a
-- malformed ACL; 95 (EOPNOTSUPP) when the volume has ACLs off.
CREATE FUNCTION set_acl(p_inode bigint, p_kind "char", p_tags smallint[], p_ids bigint[],
                        p_perms smallint[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    n record;
    v_bits integer;
BEGIN
    IF NOT s.enable_acl THEN
        RETURN 95;
    ELSIF p_kind IS NULL OR p_kind NOT IN ('a', 'd')
          OR (p_tags IS NOT NULL AND NOT coalesce(_acl_valid(p_tags, p_ids, p_perms), false)) THEN
        RETURN 22;
    END IF;
    SELECT d.type, d.mode INTO n FROM node d WHERE d.inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    ELSIF p_kind = 'd' AND n.type <> 2 THEN
        RETURN CASE WHEN p_tags IS NULL THEN 0 ELSE 13 END;
    END IF;
    DELETE FROM acl WHERE inode = p_inode AND kind = p_kind;
    PERFORM _log_node_change('setacl', p_inode);
    IF p_tags IS NULL THEN
        UPDATE node SET ctime = _now() WHERE inode = p_inode;
        RETURN 0;
    END IF;
    IF p_kind = 'd' THEN
        INSERT INTO acl (inode, kind, tag, qualifier, perm)
        SELECT p_inode, 'd', e.tag, CASE WHEN e.tag IN (2, 8) THEN e.id ELSE -1 END, e.perm
          FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm);
        UPDATE node SET ctime = _now() WHERE inode = p_inode;
        RETURN 0;
    END IF;
    SELECT (max(e.perm) FILTER (WHERE e.tag = 1) << 6)
           | (coalesce(max(e.perm) FILTER (WHERE e.tag = 16), max(e.perm) FILTER (WHERE e.tag = 4)) << 3)
           | max(e.perm) FILTER (WHERE e.tag = 32)
      INTO v_bits FROM unnest(p_tags, p_perms) AS e(tag, perm);
    IF p_tags && ARRAY[2, 8, 16]::smallint[] THEN
        INSERT INTO acl (inode, kind, tag, qualifier, perm)
        SELECT p_inode, 'a', e.tag, CASE WHEN e.tag IN (2, 8) THEN e.id ELSE -1 END, e.perm
          FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm) WHERE e.tag IN (2, 4, 8);
    END IF;
    UPDATE node SET mode = (n.mode & ~511) | v_bits, ctime = _now() WHERE inode = p_inode;
    RETURN 0;
END
$$;

-- For people: every ACL entry with its node's path, as getfacl shows it
-- (the access ACL's owner, mask and other entries come from the mode).
CREATE VIEW acls AS
SELECT a.inode, path(a.inode) AS path, CASE a.kind WHEN 'a' THEN 'access' ELSE 'default' END AS kind,
       CASE a.tag WHEN 1 THEN 'user' WHEN 2 THEN 'user' WHEN 4 THEN 'group' WHEN 8 THEN 'group'
                  WHEN 16 THEN 'mask' ELSE 'other' END AS tag,
       CASE WHEN a.tag IN (2, 8) THEN a.qualifier END AS id,
       (CASE WHEN a.perm & 4 <> 0 THEN 'r' ELSE '-' END) || (CASE WHEN a.perm & 2 <> 0 THEN 'w' ELSE '-' END)
       || (CASE WHEN a.perm & 1 <> 0 THEN 'x' ELSE '-' END) AS perm
  FROM acl a;

DROP FUNCTION mknod(bigint, bytea, integer, integer, bigint, bigint, bigint, bytea, bigint);
-- Creates a node of any type in p_parent: 1 file, 2 directory, 3 symlink
-- (p_target), 4 fifo, 5 block and 6 char device (p_rdev), 7 socket.
-- p_inode is an id from a range the client reserved with alloc_ids; NULL
-- allocates one here. A directory with the set-group-id bit passes its group
-- (and, to subdirectories, the bit) on.
CREATE FUNCTION mknod(
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
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR NO KEY UPDATE OF d;
    ELSE
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl
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

DROP FUNCTION volume();
-- The volume's format, for clients (which may not read the tables).
CREATE FUNCTION volume(OUT name text, OUT uuid uuid, OUT storage text, OUT bucket text, OUT block_size integer,
                       OUT trash_days integer, OUT capacity bigint, OUT inodes bigint, OUT meta_durability text,
                       OUT skip_dir_mtime_ns bigint, OUT enable_acl boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.name, s.uuid, s.storage, s.bucket, s.block_size, s.trash_days, q.max_space, q.max_inodes, s.meta_durability,
           s.skip_dir_mtime_ns, s.enable_acl
      FROM setting s LEFT JOIN quota q ON q.kind = 'fs' AND q.key = 0
$$;

-- Removes nodes whose last link is gone and that no session holds open:
-- their data references, symlink targets, xattrs, their figures as
-- directories, and their usage (volume, owners), set-based. Their entries
-- are gone already (and were uncharged by whoever removed them).
CREATE OR REPLACE FUNCTION _free_nodes(p_inodes bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v record;
BEGIN
    WITH gone AS (
        DELETE FROM node WHERE inode = ANY (p_inodes) RETURNING inode, type, length, uid, gid
    )
    SELECT array_agg(inode) FILTER (WHERE type = 1 AND length > 0) AS files,
           array_agg(inode) FILTER (WHERE type = 2) AS dirs,
           array_agg(uid) AS uids, array_agg(gid) AS gids, array_agg(_node_space(type, length)) AS spaces
      INTO v
      FROM gone;
    IF v.uids IS NULL THEN
        RETURN;
    END IF;
    IF v.files IS NOT NULL THEN
        PERFORM _drop_slices(v.files, 0);
    END IF;
    DELETE FROM symlink WHERE inode = ANY (p_inodes);
    DELETE FROM xattr WHERE inode = ANY (p_inodes);
    DELETE FROM acl WHERE inode = ANY (p_inodes);
    IF v.dirs IS NOT NULL THEN
        PERFORM _forget_dirs(v.dirs);
    END IF;
    PERFORM _uncharge_nodes(v.uids, v.gids, v.spaces);
END
$$;

-- Removes the empty directory p_name from p_parent.
CREATE OR REPLACE FUNCTION rmdir(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_child bigint;
    v_type smallint;
    v_pqroot bigint;
    n node;
BEGIN
    IF p_name = '\x2e'::bytea THEN
        RETURN _err(22);
    ELSIF p_name = '\x2e2e'::bytea THEN
        RETURN _err(39);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type INTO v_child, v_type FROM edge e WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v_type <> 2 THEN
            RETURN _err(20);
        END IF;
        PERFORM _lock_nodes(ARRAY[p_parent, v_child], ARRAY['nokey', 'update']);
        IF EXISTS (SELECT 1 FROM edge WHERE parent = p_parent AND name = p_name AND inode = v_child) THEN
            IF NOT _dir_is_empty(v_child) THEN
                RETURN _err(39);
            END IF;
            -- with a trash, the directory moves there instead
            IF s.trash_days > 0 AND _to_trash(p_parent, p_name) = 0 THEN
                RETURN _attr(v_child);
            END IF;
            DELETE FROM edge WHERE parent = p_parent AND name = p_name;
            DELETE FROM node WHERE inode = v_child RETURNING * INTO n;
            DELETE FROM xattr WHERE inode = v_child;
            DELETE FROM acl WHERE inode = v_child;
            PERFORM _forget_dirs(ARRAY[v_child]);
            UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent
            RETURNING qroot INTO v_pqroot;
            PERFORM _uncharge_entry(p_parent, v_pqroot, 1, 4096);
            PERFORM _uncharge_nodes(ARRAY[n.uid], ARRAY[n.gid], ARRAY[4096::bigint]);
            n.nlink := 0;
            INSERT INTO change (op, inode, parent, name, uid, gid)
            VALUES ('rmdir', n.inode, p_parent, p_name, n.uid, n.gid);
            RETURN _to_attr(n);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'rmdir: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- Copies the node p_src (a file, or a directory with everything below it) to
-- the new entry p_dst_name of directory p_dst_parent. New nodes take ids from
-- one reserved range; entries, slices, symlink targets and xattrs are copied;
-- each shared slice gains one reference per new slice row, so the clone is
-- copy-on-write (a later write to either side makes new slices). Hard links
-- inside the tree stay hard links in the clone (nlink counts the entries in
-- the clone); a link from outside the tree is not followed. Modes and times
-- are kept, ctime is now; p_uid/p_gid, when given, own the new nodes.
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
-- destination parent is not a directory, 17 the name exists, 22/36 bad name,
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
BEGIN
    IF v_errno <> 0 THEN
        RETURN QUERY SELECT v_errno, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    ELSIF _is_dot(p_dst_name) THEN
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
        SELECT m.new, n.type, n.mode, coalesce(p_uid, n.uid), coalesce(p_gid, n.gid), n.atime, n.mtime, v_now,
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
        SELECT ne.parent, count(*) AS inodes, sum(_node_space(nn.type, nn.length)) AS space
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
           (SELECT count(*) FROM shared) AS shared,
           (SELECT count(*) FROM referenced) AS referenced,
           (SELECT count(*) FROM new_slices)
             + (SELECT count(*) FROM new_targets) + (SELECT count(*) FROM new_xattrs)
             + (SELECT count(*) FROM new_acls) AS rows
      INTO v_res;

    IF v_res.nodes <> v_res.mapped THEN
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
    INSERT INTO dir_stats AS d (inode, stripe, space, inodes)
    SELECT u.dir, _stripe(), u.space, u.inodes FROM unnest(v_res.dirs, v_res.dir_spaces, v_res.dir_inodes) u(dir, space, inodes)
        ON CONFLICT ON CONSTRAINT dir_stats_pkey
        DO UPDATE SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes;
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
END
$$;

-- The names of a node's extended attributes, in byte order, with those of
-- its POSIX ACLs (sql/acl.sql) when it has any beyond its mode. (An ACL
-- stored as a plain xattr by 0.1.0 is not listed: it never took effect.)
CREATE OR REPLACE FUNCTION listxattr(p_inode bigint, OUT errno integer, OUT names bytea[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM node WHERE inode = p_inode) THEN
        errno := 2; RETURN;
    END IF;
    SELECT coalesce(array_agg(e.name ORDER BY e.name), '{}') INTO names
      FROM (SELECT x.name FROM xattr x
             WHERE x.inode = p_inode
               AND x.name NOT IN ('system.posix_acl_access'::bytea, 'system.posix_acl_default'::bytea)
            UNION ALL
            SELECT DISTINCT convert_to(CASE a.kind WHEN 'a' THEN 'system.posix_acl_access'
                                                   ELSE 'system.posix_acl_default' END, 'UTF8')
              FROM acl a WHERE a.inode = p_inode) e;
    errno := 0;
END
$$;
REVOKE EXECUTE ON FUNCTION enable_acl(), _acl_valid(smallint[], bigint[], smallint[]),
    _acl_create_mode(integer, smallint[], smallint[]),
    _acl_inherit(bigint, boolean, smallint[], bigint[], smallint[]),
    get_acl(bigint, "char"), set_acl(bigint, "char", smallint[], bigint[], smallint[]),
    mknod(bigint, bytea, integer, integer, bigint, bigint, bigint, bytea, bigint, integer),
    volume() FROM PUBLIC;
REVOKE ALL ON acls FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- A client role reads no view: `jfs quota` lists quotas through a procedure.
-- The rows of view quotas, for a client role (`jfs quota get|list|set`),
-- which reads no table or view itself.
CREATE FUNCTION list_quotas() RETURNS SETOF quotas
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT * FROM quotas
$$;

REVOKE EXECUTE ON FUNCTION list_quotas() FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- grant_reader also grants the read-only helpers the views call (view
-- jfs.trash calls jfs._trash_inode()).
CREATE OR REPLACE FUNCTION grant_reader(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    EXECUTE pg_catalog.format('GRANT SELECT ON ALL TABLES IN SCHEMA jfs TO %I', p_role);
    EXECUTE pg_catalog.format('REVOKE SELECT ON jfs.secret FROM %I', p_role);
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.provolatile IN ('s', 'i')
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;


-- ---------------------------------------------------------------------------
-- jfs gc counts the whole queue of freed slices (it counted one page of
-- pending_delslices, at most 100,000).
-- How many freed slices wait in the queue (jfs gc; pending_delslices
-- gives them in pages).
CREATE FUNCTION delslice_count() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT count(*) FROM delslice
$$;

REVOKE EXECUTE ON FUNCTION delslice_count() FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Table delfile was never used (deletes queue slices in delslice).
ALTER EXTENSION jfs DROP TABLE delfile;
DROP TABLE delfile;

-- ---------------------------------------------------------------------------
-- The change log (sql/schema.sql, sql/changelog.sql): every procedure that
-- changes the file system writes what it changed into table change, in its
-- own transaction; jfs.changes and jfs.changes_since(id) show it to people,
-- changelog_prune keeps it within the volume's retention. (mknod, rmdir,
-- setattr, set_acl, compact_chunk and clone_node, replaced earlier in this
-- script, write their rows there; the other procedures follow.)
ALTER TABLE setting ADD COLUMN changelog_max_age interval NOT NULL DEFAULT '1 day' CHECK (changelog_max_age >= '1 minute');
ALTER TABLE setting ADD COLUMN changelog_max_rows bigint NOT NULL DEFAULT 10000000 CHECK (changelog_max_rows >= 1000);

CREATE SEQUENCE change_id;

CREATE TABLE change (
    id      bigint      PRIMARY KEY DEFAULT nextval('change_id'),
    xid     xid8        NOT NULL DEFAULT pg_current_xact_id(),
    at      timestamptz NOT NULL DEFAULT now(),
    op      text        NOT NULL,
    inode   bigint,
    parent  bigint,
    name    bytea,
    parent2 bigint,
    name2   bytea,
    inode2  bigint,
    uid     bigint,
    gid     bigint,
    session bigint      DEFAULT substring(current_setting('application_name') FROM '^jfs:([0-9]{1,18})$')::bigint
);
CREATE INDEX change_xid ON change (xid, id);
SELECT pg_catalog.pg_extension_config_dump('change', '');
SELECT pg_catalog.pg_extension_config_dump('change_id', '');
REVOKE ALL ON change FROM PUBLIC;
REVOKE ALL ON SEQUENCE change_id FROM PUBLIC;

-- Logs change p_op of node p_inode (p_name: the xattr's name), with its owner.
CREATE FUNCTION _log_node_change(p_op text, p_inode bigint, p_name bytea DEFAULT NULL) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO change (op, inode, name, uid, gid)
    SELECT p_op, n.inode, p_name, n.uid, n.gid FROM node n WHERE n.inode = p_inode
$$;

-- The path of entry p_name of directory p_parent as far as it resolves now
-- (NULL once the directory is gone). Qualified names: a view inlines it in
-- the reader's search_path.
CREATE FUNCTION _entry_path(p_parent bigint, p_name bytea) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_parent = 1 THEN '/' ELSE jfs.path(p_parent) || '/' END || jfs._name_text(p_name)
$$;

-- Every change kept, with its paths as they resolve now: path is the entry
-- made, removed or renamed (or the node's path when the change is to a
-- node), path2 where a rename or clone put it; xattr names the extended
-- attribute of setxattr/removexattr. Order by id (insertion) or use
-- changes_since.
CREATE VIEW changes AS
SELECT c.id, c.at, c.op,
       CASE WHEN c.parent IS NOT NULL THEN _entry_path(c.parent, c.name) ELSE path(c.inode) END AS path,
       _entry_path(c.parent2, c.name2) AS path2,
       CASE WHEN c.parent IS NULL THEN _name_text(c.name) END AS xattr,
       c.inode, c.inode2, c.uid, c.gid, c.session
  FROM change c;

-- The changes after change p_after (0: from the oldest kept), at most
-- p_limit, for a consumer that keeps the last id it saw as its bookmark.
-- Transactions commit in another order than their rows' ids, so a change
-- is given only once every transaction that could still add a row before it
-- is over (the row's transaction is older than the snapshot's xmin), and in
-- the order (xid, id), which such late rows cannot enter: a consumer sees
-- every change once, none later than its successors. A long-running writing
-- transaction holds the feed back (not the mounts, which read the log
-- themselves) until it ends. A bookmark that was pruned is an error: the
-- changes in between are lost to that consumer.
CREATE FUNCTION changes_since(p_after bigint DEFAULT 0, p_limit integer DEFAULT 10000)
RETURNS SETOF changes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_horizon xid8 := pg_snapshot_xmin(pg_current_snapshot());
    v_after_xid xid8;
BEGIN
    IF coalesce(p_after, 0) > 0 THEN
        SELECT c.xid INTO v_after_xid FROM change c WHERE c.id = p_after;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jfs.changes_since: change % is not in the change log', p_after
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'It was pruned (the log keeps jfs.setting.changelog_max_age and changelog_max_rows) '
                             'or never committed: the changes after it are lost to this bookmark; '
                             'start again from 0 or from an id of jfs.changes.';
        END IF;
    END IF;
    RETURN QUERY
        SELECT v.*
          FROM (SELECT c.id, c.xid FROM change c
                 WHERE c.xid < v_horizon
                   AND (v_after_xid IS NULL OR (c.xid, c.id) > (v_after_xid, p_after))
                 ORDER BY c.xid, c.id
                 LIMIT greatest(coalesce(p_limit, 10000), 1)) k
          JOIN changes v ON v.id = k.id
         ORDER BY k.xid, k.id;
END
$$;

-- Deletes, oldest first and at most p_limit per call, the rows older than
-- setting.changelog_max_age and those more than changelog_max_rows ids
-- below the newest (so at most that many are kept). Returns the rows deleted.
CREATE FUNCTION changelog_prune(p_limit integer DEFAULT 100000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_max_age interval;
    v_max_rows bigint;
    v_newest bigint;
    v_count bigint;
BEGIN
    SELECT s.changelog_max_age, s.changelog_max_rows INTO v_max_age, v_max_rows FROM setting s;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT max(c.id) INTO v_newest FROM change c;
    DELETE FROM change c
     WHERE c.id IN (SELECT o.id FROM change o ORDER BY o.id LIMIT greatest(coalesce(p_limit, 100000), 1))
       AND (c.at < now() - v_max_age OR c.id <= v_newest - v_max_rows);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Sets how long and how many rows the change log keeps (NULL: unchanged).
-- Administration (jfs config --changelog-max-age / --changelog-max-rows).
CREATE FUNCTION set_changelog_retention(p_max_age interval DEFAULT NULL, p_max_rows bigint DEFAULT NULL,
                                        OUT max_age interval, OUT max_rows bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_max_age < interval '1 minute' THEN
        RAISE EXCEPTION 'jfs.set_changelog_retention: the change log keeps changes at least a minute, not %', p_max_age
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Mounts read the log behind its newest rows; a feed consumer needs time to catch up.';
    ELSIF p_max_rows < 1000 THEN
        RAISE EXCEPTION 'jfs.set_changelog_retention: the change log keeps at least 1000 changes, not %', p_max_rows
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET changelog_max_age = coalesce(p_max_age, s.changelog_max_age),
                         changelog_max_rows = coalesce(p_max_rows, s.changelog_max_rows)
    RETURNING s.changelog_max_age, s.changelog_max_rows INTO max_age, max_rows;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_changelog_retention: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;

-- For mounts, which keep the kernel's caches in step with the others: the
-- changes of transactions from p_horizon on (a horizon an earlier call
-- returned; NULL: none, just the horizon) that the session p_sid did not
-- make, or made where its kernel cannot know (trees removed or cloned
-- server-side, tiers, moves into the trash, /.trash made), and the new horizon. Every
-- change of a transaction older than the horizon is in this answer or an
-- earlier one; those of transactions running at it come again in the next
-- (a mount skips ids it applied; applying twice is harmless anyway). The
-- first row carries only the horizon.
CREATE FUNCTION changes_for_mount(p_sid bigint, p_horizon bigint)
RETURNS TABLE (horizon bigint, id bigint, xid bigint, op text, inode bigint, parent bigint, name bytea,
               parent2 bigint, name2 bytea, inode2 bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x)
    SELECT h.x, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::bytea, NULL::bigint,
           NULL::bytea, NULL::bigint
      FROM h
    UNION ALL
    SELECT h.x, c.id, c.xid::text::bigint, c.op, c.inode, c.parent, c.name, c.parent2, c.name2, c.inode2
      FROM h, change c
     WHERE p_horizon IS NOT NULL AND c.xid >= p_horizon::text::xid8
       AND (c.session IS DISTINCT FROM p_sid OR c.op IN ('rmr', 'clone', 'tier', 'tier_tree')
            OR _in_trash(coalesce(c.parent2, c.parent)) OR c.inode = _trash_inode())
$$;

-- A new name p_name in p_parent for the non-directory p_inode.
CREATE OR REPLACE FUNCTION link(p_inode bigint, p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    v_ptype smallint;
    v_pqroot bigint;
    v_limits boolean;
    n node;
BEGIN
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    END IF;
    PERFORM _lock_nodes(ARRAY[p_inode, p_parent], ARRAY['nokey', 'share']);
    SELECT * INTO n FROM node WHERE inode = p_inode;
    SELECT d.type, d.qroot, st.quota_limits INTO v_ptype, v_pqroot, v_limits FROM node d, setting st WHERE d.inode = p_parent;
    IF n.inode IS NULL OR n.nlink = 0 OR v_ptype IS NULL THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(1);
    ELSIF v_ptype <> 2 THEN
        RETURN _err(20);
    END IF;
    -- a new entry: counted under p_parent and the directory quotas above it
    v_errno := _charge(false, NULL, NULL, _quota_roots(v_pqroot), p_parent, 1, _node_space(n.type, n.length), v_limits);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, n.type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, v_pqroot, 1, _node_space(n.type, n.length));
        RETURN _err(17);
    END IF;
    UPDATE node SET nlink = nlink + 1, ctime = v_now WHERE inode = p_inode RETURNING * INTO n;
    PERFORM _touch_dir(p_parent, v_now, s.skip_dir_mtime_ns);
    INSERT INTO change (op, inode, parent, name, uid, gid) VALUES ('link', n.inode, p_parent, p_name, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

-- Removes the name p_name (not a directory) from p_parent. At zero links
-- the node is freed, unless p_open_inodes (the inodes the calling session
-- p_sid has open) holds it: then it stays (nlink 0) until that session releases it.
-- Returns the node as it is after the call (nlink 0 when it lost its last link).
CREATE OR REPLACE FUNCTION unlink(p_parent bigint, p_name bytea, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}')
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v record;
    par record;
    c node;
    v_trashed integer;
BEGIN
    IF _is_dot(p_name) THEN
        RETURN _err(21);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days INTO v
          FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v.type = 2 THEN
            RETURN _err(21);
        END IF;
        -- with a trash, a last link moves there instead
        IF attempt = 1 AND v.trash_days > 0 AND (SELECT n.nlink FROM node n WHERE n.inode = v.inode) = 1 THEN
            v_trashed := _to_trash(p_parent, p_name);
            IF v_trashed = 0 THEN
                RETURN _attr(v.inode);
            END IF;
        END IF;
        IF attempt = 1 THEN
            PERFORM _durability(v.meta_durability);
        END IF;
        -- lock order: ascending inode
        IF p_parent < v.inode THEN
            SELECT mtime, ctime, qroot INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
            SELECT * INTO c FROM node WHERE inode = v.inode FOR UPDATE;
        ELSE
            SELECT * INTO c FROM node WHERE inode = v.inode FOR UPDATE;
            SELECT mtime, ctime, qroot INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
        END IF;
        -- the entry may have changed while we waited for the locks
        DELETE FROM edge WHERE parent = p_parent AND name = p_name AND inode = v.inode;
        IF FOUND THEN
            PERFORM _uncharge_entry(p_parent, par.qroot, 1, _node_space(c.type, c.length));
            c.nlink := c.nlink - 1;
            c.ctime := v_now;
            IF c.nlink > 0 THEN
                UPDATE node SET nlink = c.nlink, ctime = v_now WHERE inode = c.inode;
            ELSIF NOT _keep_open(c.inode, p_sid, p_open_inodes) THEN
                -- a node that had links has no sustained rows: nobody else holds it
                PERFORM _free_node(c.inode);
            END IF;
            IF _dir_times_stale(par.mtime, par.ctime, v_now, v.skip_dir_mtime_ns) THEN
                UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
            END IF;
            INSERT INTO change (op, inode, parent, name, uid, gid)
            VALUES ('unlink', c.inode, p_parent, p_name, c.uid, c.gid);
            RETURN _to_attr(c);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'unlink: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- Moves (p_parent, p_name) to (p_new_parent, p_new_name). A replaced
-- non-directory loses that link and, at zero links, is freed unless the
-- session p_sid has it open (p_open_inodes). Directories that move between
-- parents take a volume-wide transaction lock first (as Linux takes its
-- per-superblock rename mutex), so two renames can never build a cycle.
-- Returns errno, the moved inode, and the replaced (or exchanged) inode with
-- its nlink after the call (0 and NULL when nothing was replaced).
CREATE OR REPLACE FUNCTION rename(
    p_parent bigint, p_name bytea, p_new_parent bigint, p_new_name bytea,
    p_flags integer DEFAULT 0, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}',
    OUT errno integer, OUT inode bigint, OUT replaced bigint, OUT replaced_nlink integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_exchange boolean := coalesce(p_flags, 0) & 2 <> 0;
    v_noreplace boolean := coalesce(p_flags, 0) & 1 <> 0;
    v_cross boolean := p_parent <> p_new_parent;
    v_src bigint; v_src_type smallint;
    v_dst bigint; v_dst_type smallint;
    v_dir_type smallint;
    v_mode text;
    v_skip bigint;
    v_moves_dir boolean;
    v_locked_tree boolean := false;
    v_now_src bigint; v_now_dst bigint;
    v_nlink integer;
    v_src_node node;
    v_dst_node node;
    v_gone node;
BEGIN
    replaced := 0;
    IF coalesce(p_flags, 0) & ~3 <> 0 OR (v_exchange AND v_noreplace) THEN
        errno := 22; RETURN;
    END IF;
    IF _is_dot(p_name) OR _is_dot(p_new_name) THEN
        errno := CASE WHEN v_noreplace THEN 17 ELSE 16 END; RETURN;
    END IF;
    errno := greatest(_check_name(p_name), _check_name(p_new_name));
    IF errno <> 0 THEN
        RETURN;
    END IF;

    FOR attempt IN 1..5 LOOP
        SELECT se.inode, se.type, de.inode, de.type, st.meta_durability, st.skip_dir_mtime_ns
          INTO v_src, v_src_type, v_dst, v_dst_type, v_mode, v_skip
          FROM setting st
          LEFT JOIN edge se ON se.parent = p_parent AND se.name = p_name
          LEFT JOIN edge de ON de.parent = p_new_parent AND de.name = p_new_name;
        IF v_src IS NULL THEN
            errno := _missing(p_parent, p_name); RETURN;
        END IF;
        inode := v_src;
        IF v_dst IS NULL THEN
            SELECT n.type INTO v_dir_type FROM node n WHERE n.inode = p_new_parent;
            IF v_dir_type IS NULL THEN
                errno := 2; RETURN;
            ELSIF v_dir_type <> 2 THEN
                errno := 20; RETURN;
            ELSIF v_exchange THEN
                errno := 2; RETURN;
            END IF;
        ELSIF v_noreplace THEN
            errno := 17; RETURN;
        ELSIF v_dst = v_src THEN
            -- both names are links to one file: POSIX says do nothing
            errno := 0; RETURN;
        ELSIF NOT v_exchange AND v_src_type = 2 AND v_dst_type <> 2 THEN
            errno := 20; RETURN;
        ELSIF NOT v_exchange AND v_src_type <> 2 AND v_dst_type = 2 THEN
            errno := 21; RETURN;
        END IF;
        IF attempt = 1 THEN
            PERFORM _durability(v_mode);
        END IF;

        v_moves_dir := v_cross AND (v_src_type = 2 OR (v_exchange AND v_dst_type = 2));
        IF v_moves_dir AND NOT v_locked_tree THEN
            PERFORM pg_advisory_xact_lock(1785095027, 1);  -- 'jfs' rename lock
            v_locked_tree := true;
        END IF;
        IF v_cross OR v_dst IS NOT NULL THEN
            PERFORM _lock_nodes(ARRAY[p_parent, p_new_parent, v_src, v_dst],
                                ARRAY['share', 'share', 'update', 'update']);
        ELSE
            PERFORM _lock_nodes(ARRAY[p_parent, v_src], ARRAY['share', 'update']);
        END IF;
        -- both entries must still be what we read before waiting for the locks
        SELECT (SELECT e.inode FROM edge e WHERE e.parent = p_parent AND e.name = p_name),
               (SELECT e.inode FROM edge e WHERE e.parent = p_new_parent AND e.name = p_new_name)
          INTO v_now_src, v_now_dst;
        IF v_now_src IS DISTINCT FROM v_src OR v_now_dst IS DISTINCT FROM v_dst
           OR (v_moves_dir AND NOT v_locked_tree) THEN
            CONTINUE;
        END IF;

        IF v_cross AND v_src_type = 2 AND _is_ancestor(v_src, p_new_parent) THEN
            errno := 22; RETURN;
        END IF;
        IF v_cross AND v_exchange AND v_dst_type = 2 AND _is_ancestor(v_dst, p_parent) THEN
            errno := 22; RETURN;
        END IF;
        IF NOT v_exchange AND v_dst_type = 2 THEN
            IF NOT _dir_is_empty(v_dst) THEN
                errno := 39; RETURN;
            END IF;
        END IF;

        -- usage: a move between directories under different quota roots
        -- must fit the new roots' limits (refused before anything changes)
        IF v_cross THEN
            SELECT * INTO v_src_node FROM node WHERE node.inode = v_src;
            errno := _move_entry(v_src, v_src_node.type, v_src_node.length, p_parent, p_new_parent);
            IF errno <> 0 THEN
                RETURN;
            END IF;
            IF v_exchange THEN
                SELECT * INTO v_dst_node FROM node WHERE node.inode = v_dst;
                errno := _move_entry(v_dst, v_dst_node.type, v_dst_node.length, p_new_parent, p_parent);
                IF errno <> 0 THEN
                    -- undo the first move (it fitted where it was)
                    PERFORM _move_entry(v_src, v_src_node.type, v_src_node.length, p_new_parent, p_parent);
                    RETURN;
                END IF;
            END IF;
        END IF;

        IF v_exchange THEN
            UPDATE edge SET inode = v_dst, type = v_dst_type WHERE parent = p_parent AND name = p_name;
            UPDATE edge SET inode = v_src, type = v_src_type WHERE parent = p_new_parent AND name = p_new_name;
            UPDATE node SET ctime = v_now,
                   parent = CASE WHEN node.type <> 2 THEN node.parent
                                 WHEN node.inode = v_src THEN p_new_parent ELSE p_parent END
             WHERE node.inode IN (v_src, v_dst);
            IF v_cross THEN
                -- p_parent loses src if it is a directory and gains dst if that is one
                v_nlink := (v_dst_type = 2)::integer - (v_src_type = 2)::integer;
                IF v_nlink <> 0 THEN
                    UPDATE node SET nlink = nlink + CASE WHEN node.inode = p_parent THEN v_nlink ELSE -v_nlink END
                     WHERE node.inode IN (p_parent, p_new_parent);
                END IF;
            END IF;
            replaced := v_dst;
            SELECT n.nlink INTO replaced_nlink FROM node n WHERE n.inode = v_dst;
        ELSE
            IF v_dst IS NOT NULL AND v_dst_type <> 2
               AND (SELECT n.nlink FROM node n WHERE n.inode = v_dst) = 1
               AND _to_trash(p_new_parent, p_new_name) = 0 THEN
                -- with a trash, the replaced file moves there
                replaced := v_dst;
                replaced_nlink := 1;
            ELSIF v_dst IS NOT NULL THEN
                DELETE FROM edge WHERE parent = p_new_parent AND name = p_new_name;
                replaced := v_dst;
                SELECT * INTO v_gone FROM node WHERE node.inode = v_dst;
                PERFORM _uncharge_entry(p_new_parent, (SELECT n.qroot FROM node n WHERE n.inode = p_new_parent),
                                        1, _node_space(v_gone.type, v_gone.length));
                IF v_dst_type = 2 THEN
                    DELETE FROM node WHERE node.inode = v_dst;
                    DELETE FROM xattr WHERE xattr.inode = v_dst;
                    PERFORM _forget_dirs(ARRAY[v_dst]);
                    UPDATE node SET nlink = nlink - 1 WHERE node.inode = p_new_parent;
                    PERFORM _uncharge_nodes(ARRAY[v_gone.uid], ARRAY[v_gone.gid], ARRAY[4096::bigint]);
                    replaced_nlink := 0;
                ELSE
                    UPDATE node SET nlink = nlink - 1, ctime = v_now WHERE node.inode = v_dst
                    RETURNING nlink INTO replaced_nlink;
                    IF replaced_nlink = 0 AND NOT _keep_open(v_dst, p_sid, p_open_inodes) THEN
                        PERFORM _free_node(v_dst);
                    END IF;
                END IF;
            END IF;
            UPDATE edge SET parent = p_new_parent, name = p_new_name, cookie = nextval('edge_cookie')
             WHERE parent = p_parent AND name = p_name;
            IF v_cross AND v_src_type = 2 THEN
                UPDATE node SET ctime = v_now, parent = p_new_parent WHERE node.inode = v_src;
                UPDATE node SET nlink = nlink + CASE WHEN node.inode = p_new_parent THEN 1 ELSE -1 END
                 WHERE node.inode IN (p_parent, p_new_parent);
            ELSE
                UPDATE node SET ctime = v_now WHERE node.inode = v_src;
            END IF;
        END IF;
        PERFORM _touch_dir(p_parent, v_now, v_skip);
        IF v_cross THEN
            PERFORM _touch_dir(p_new_parent, v_now, v_skip);
        END IF;
        INSERT INTO change (op, inode, parent, name, parent2, name2, inode2, uid, gid)
        SELECT CASE WHEN v_exchange THEN 'exchange' ELSE 'rename' END, v_src, p_parent, p_name,
               p_new_parent, p_new_name, nullif(replaced, 0), n.uid, n.gid
          FROM node n WHERE n.inode = v_src;
        errno := 0;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'rename: entries kept changing under concurrent operations; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- Appends a slice to chunk p_chunk_index of file p_inode: bytes
-- [p_slice_off, p_slice_off + p_len) of stored slice p_slice_id (of size
-- p_slice_size) now appear at [p_pos, p_pos + p_len) of the chunk, over
-- whatever was there. Called after the slice's blocks are in object storage.
-- Extends the length, sets mtime (p_mtime, default now) and ctime.
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
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(21);
    ELSIF n.type <> 1 THEN
        RETURN _err(22);
    END IF;
    v_end := greatest(n.length, p_chunk_index::bigint * _chunk_size() + p_pos + p_len);
    -- a longer file must fit the quotas: refused before anything changes
    v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    -- the bytes that showed data under the new slice (none for an append)
    v_had := _range_size(_chunk_data(p_inode, p_chunk_index, p_pos, p_pos + p_len));
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, p_slice_off, p_len, p_pos);
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1)
        ON CONFLICT (slice_id) DO UPDATE SET refs = slice_ref.refs + 1;
    n.length := v_end; n.mtime := coalesce(p_mtime, v_now); n.ctime := v_now;
    n.used := n.used + p_len - v_had;
    UPDATE node SET length = v_end, mtime = n.mtime, ctime = v_now, used = n.used
     WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION setxattr(p_inode bigint, p_name bytea, p_value bytea, p_flags integer DEFAULT 0)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_flags integer := coalesce(p_flags, 0);
BEGIN
    IF p_name IS NULL OR length(p_name) = 0 OR position('\x00'::bytea IN p_name) > 0
       OR v_flags & ~3 <> 0 OR v_flags = 3 OR p_value IS NULL THEN
        RETURN 22;
    ELSIF length(p_name) > 255 THEN
        RETURN 34;
    ELSIF length(p_value) > 65536 THEN
        RETURN 7;
    END IF;
    PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    IF v_flags = 1 THEN
        INSERT INTO xattr (inode, name, value) VALUES (p_inode, p_name, p_value) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RETURN 17;
        END IF;
    ELSIF v_flags = 2 THEN
        UPDATE xattr SET value = p_value WHERE inode = p_inode AND name = p_name;
        IF NOT FOUND THEN
            RETURN 61;
        END IF;
    ELSE
        INSERT INTO xattr (inode, name, value) VALUES (p_inode, p_name, p_value)
            ON CONFLICT (inode, name) DO UPDATE SET value = EXCLUDED.value;
    END IF;
    UPDATE node SET ctime = _now() WHERE inode = p_inode;
    PERFORM _log_node_change('setxattr', p_inode, p_name);
    RETURN 0;
END
$$;

CREATE OR REPLACE FUNCTION removexattr(p_inode bigint, p_name bytea) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
BEGIN
    PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    DELETE FROM xattr WHERE inode = p_inode AND name = p_name;
    IF NOT FOUND THEN
        RETURN 61;
    END IF;
    UPDATE node SET ctime = _now() WHERE inode = p_inode;
    PERFORM _log_node_change('removexattr', p_inode, p_name);
    RETURN 0;
END
$$;

-- Sets the tier of the node at p_path (and, with p_recursive, of everything
-- below it, set-based; directories pass it on to what is created in them
-- later). Returns the nodes whose tier changed.
CREATE OR REPLACE FUNCTION set_tier(p_path text, p_id integer, p_recursive boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_inode bigint := resolve(p_path);
    v_changed bigint;
BEGIN
    IF p_id IS NULL OR p_id NOT BETWEEN 0 AND 3 THEN
        RAISE EXCEPTION 'jfs.set_tier: tier id must be 0..3, not %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF v_inode IS NULL THEN
        RAISE EXCEPTION 'jfs.set_tier: % does not exist', coalesce(p_path, 'NULL')
            USING ERRCODE = 'undefined_object', HINT = 'Paths are absolute, from the volume''s root.';
    END IF;
    WITH RECURSIVE tree(inode) AS (
        SELECT v_inode
        UNION
        SELECT e.inode FROM tree t JOIN edge e ON e.parent = t.inode
         WHERE p_recursive AND EXISTS (SELECT 1 FROM node d WHERE d.inode = t.inode AND d.type = 2)
    ), changed AS (
        UPDATE node n SET tier = p_id, ctime = _now()
         WHERE n.inode IN (SELECT t.inode FROM tree t) AND n.tier <> p_id
        RETURNING 1
    )
    SELECT count(*) INTO v_changed FROM changed;
    IF v_changed > 0 THEN
        PERFORM _log_node_change(CASE WHEN p_recursive THEN 'tier_tree' ELSE 'tier' END, v_inode);
    END IF;
    RETURN v_changed;
END
$$;

-- Removes the non-directory entries p_names of p_parent: entries deleted,
-- nlink decremented, nodes at zero links freed (or kept for session p_sid if
-- listed in p_open_inodes), their slices released and freed slices queued in
-- delslice, usage updated: a handful of set-based statements whatever the
-- number of names. One row per given name: errno 0 (removed, with the inode),
-- 2 ENOENT, 21 EISDIR (a directory, or . / ..), 22/36 for a bad name.
CREATE OR REPLACE FUNCTION batch_unlink(p_parent bigint, p_names bytea[], p_sid bigint DEFAULT 0,
                             p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    par record;
    v_targets bigint[];
    v_done_names bytea[];
    v_done_inodes bigint[];
    v_spaces bigint[];
BEGIN
    SELECT d.type, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days INTO par
      FROM node d, setting s WHERE d.inode = p_parent;
    IF par.type IS DISTINCT FROM 2 THEN
        RETURN QUERY SELECT u.n, CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, NULL::bigint
                       FROM unnest(p_names) WITH ORDINALITY u(n, i) ORDER BY u.i;
        RETURN;
    END IF;
    IF par.trash_days > 0 AND NOT _in_trash(p_parent) THEN
        -- with a trash: one unlink per name (each last link moves there), same transaction
        RETURN QUERY
            SELECT u.n, CASE WHEN _is_dot(u.n) THEN 21 ELSE x.errno END,
                   CASE WHEN x.errno = 0 THEN x.inode END
              FROM unnest(p_names) WITH ORDINALITY u(n, i)
              LEFT JOIN LATERAL (SELECT * FROM unlink(p_parent, u.n, p_sid, p_open_inodes)
                                  WHERE NOT _is_dot(u.n)) x ON true
             ORDER BY u.i;
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
    )
    SELECT array_agg(g.name), array_agg(g.inode), array_agg(_node_space(n.type, n.length))
      INTO v_done_names, v_done_inodes, v_spaces
      FROM gone g JOIN node n ON n.inode = g.inode;
    IF v_done_inodes IS NOT NULL THEN
        PERFORM _uncharge_entries(array_fill(p_parent, ARRAY[cardinality(v_done_inodes)]), v_spaces);
    END IF;
    PERFORM _drop_links(v_done_inodes, v_now, p_sid, p_open_inodes);
    IF v_done_names IS NOT NULL AND _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    END IF;
    INSERT INTO change (op, inode, parent, name)
    SELECT 'unlink', d.i, p_parent, d.nm FROM unnest(v_done_names, v_done_inodes) d(nm, i);

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

-- Removes the tree p_name of p_parent (a directory and everything below it;
-- a non-directory is simply unlinked), at most p_limit entries per call so
-- that no transaction grows without bound: files first, then directories
-- that became empty, deepest first, the tree's root last. Call again until
-- done; a step that stops halfway leaves a smaller, consistent tree. The
-- directories of the tree are locked for the step, so a concurrent create
-- inside either lands before (and a later step removes it) or finds its
-- directory gone (ENOENT). Hard links from outside the tree survive; files
-- the session p_sid has open stay until released.
CREATE OR REPLACE FUNCTION rmr(p_parent bigint, p_name bytea, p_limit integer DEFAULT 100000, p_sid bigint DEFAULT 0,
                    p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (errno integer, removed bigint, done boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_root bigint;
    v_root_type smallint;
    v_mode text;
    v_dirs bigint[];
    v_depths integer[];
    v_files record;
    v_gone bigint[];
    v_parents bigint[];
    v_spaces bigint[];
    v_pqroot bigint;
    v_removed bigint := 0;
    v_count bigint;
    v_limit integer := greatest(coalesce(p_limit, 100000), 1);
BEGIN
    SELECT e.inode, e.type, s.meta_durability INTO v_root, v_root_type, v_mode
      FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
    IF v_root IS NULL THEN
        RETURN QUERY SELECT CASE WHEN _is_dot(p_name) THEN 22 ELSE _missing(p_parent, p_name) END, 0::bigint, true;
        RETURN;
    END IF;
    IF v_root_type <> 2 THEN
        RETURN QUERY SELECT b.errno, (b.errno = 0)::integer::bigint, true
                       FROM batch_unlink(p_parent, ARRAY[p_name], p_sid, p_open_inodes) b;
        RETURN;
    END IF;
    -- with a trash, the whole tree moves there in one step
    IF EXISTS (SELECT 1 FROM setting WHERE trash_days > 0) AND NOT _in_trash(p_parent) THEN
        v_count := (_subtree_usage(v_root)).inodes + 1;
        IF _to_trash(p_parent, p_name) = 0 THEN
            RETURN QUERY SELECT 0, v_count, true;
            RETURN;
        END IF;
    END IF;
    PERFORM _durability(v_mode);
    -- one row per step: the tree below the entry loses entries
    INSERT INTO change (op, inode, parent, name) VALUES ('rmr', v_root, p_parent, p_name);

    -- the tree's directories, with their depth below the root
    WITH RECURSIVE t(inode, depth) AS (
        SELECT v_root, 0
        UNION ALL
        SELECT e.inode, t.depth + 1 FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
    )
    SELECT array_agg(t.inode ORDER BY t.depth), array_agg(t.depth ORDER BY t.depth) INTO v_dirs, v_depths FROM t;

    -- up to p_limit non-directories in them
    SELECT array_agg(f.parent) AS parents, array_agg(f.name) AS names, array_agg(f.inode) AS inodes INTO v_files
      FROM (SELECT e.parent, e.name, e.inode FROM edge e
             WHERE e.parent = ANY (v_dirs) AND e.type <> 2 LIMIT v_limit) f;

    -- lock the directories and those nodes together, in inode order
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_dirs || coalesce(v_files.inodes, '{}'))
     ORDER BY n.inode FOR UPDATE;

    IF v_files.inodes IS NOT NULL THEN
        WITH gone AS (
            DELETE FROM edge e
             USING unnest(v_files.parents, v_files.names, v_files.inodes) AS f(parent, name, inode)
             WHERE e.parent = f.parent AND e.name = f.name AND e.inode = f.inode
            RETURNING e.parent, e.inode
        )
        SELECT count(*), array_agg(g.inode), array_agg(g.parent), array_agg(_node_space(n.type, n.length))
          INTO v_count, v_gone, v_parents, v_spaces
          FROM gone g JOIN node n ON n.inode = g.inode;
        v_removed := v_removed + v_count;
        PERFORM _uncharge_entries(v_parents, v_spaces);
        PERFORM _drop_links(v_gone, v_now, p_sid, p_open_inodes);
        IF v_count >= v_limit THEN
            RETURN QUERY SELECT 0, v_removed, false;
            RETURN;
        END IF;
    END IF;

    -- directories that are empty now, deepest first
    FOR d IN REVERSE coalesce(v_depths[cardinality(v_depths)], 0)..1 LOOP
        WITH gone AS (
            DELETE FROM edge e
             WHERE e.inode IN (SELECT u.i FROM unnest(v_dirs, v_depths) u(i, dep) WHERE u.dep = d)
               AND e.type = 2
               AND NOT EXISTS (SELECT 1 FROM edge c WHERE c.parent = e.inode)
            RETURNING e.parent, e.inode
        ), per_parent AS (
            SELECT g.parent, count(*)::integer AS n FROM gone g GROUP BY g.parent
        ), relinked AS (
            UPDATE node x SET nlink = x.nlink - p.n, mtime = v_now, ctime = v_now FROM per_parent p
             WHERE x.inode = p.parent
            RETURNING x.inode
        )
        SELECT array_agg(g.inode), array_agg(g.parent) INTO v_gone, v_parents FROM gone g;
        IF v_gone IS NOT NULL THEN
            PERFORM _uncharge_entries(v_parents, array_fill(4096::bigint, ARRAY[cardinality(v_gone)]));
            PERFORM _free_nodes(v_gone);
            v_removed := v_removed + cardinality(v_gone);
        END IF;
    END LOOP;

    -- the root itself, once empty
    IF NOT _dir_is_empty(v_root) THEN
        RETURN QUERY SELECT 0, v_removed, false;
        RETURN;
    END IF;
    PERFORM 1 FROM node n WHERE n.inode = p_parent FOR NO KEY UPDATE;
    DELETE FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = v_root;
    UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent
    RETURNING qroot INTO v_pqroot;
    PERFORM _uncharge_entry(p_parent, v_pqroot, 1, 4096);
    PERFORM _free_nodes(ARRAY[v_root]);
    RETURN QUERY SELECT 0, v_removed + 1, true;
END
$$;

REVOKE EXECUTE ON FUNCTION _log_node_change(text, bigint, bytea), _entry_path(bigint, bytea),
    changes_since(bigint, integer), changelog_prune(integer), set_changelog_retention(interval, bigint),
    changes_for_mount(bigint, bigint)
    FROM PUBLIC;
REVOKE ALL ON changes FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Open files across mounts (sql/schema.sql, internal.sql, batch.sql,
-- session.sql): a file whose last name goes while other sessions are live
-- is kept a moment (unlinked) for a mount that has it open to hold it.
-- Files that lost their last name while other sessions were live and none of
-- the remover's handles had them open: kept (nlink 0, still charged) from
-- `at` for a grace period, so that a mount with the file open, reading the
-- removal from the change log, holds it (jfs.sustain) before it is freed
-- (jfs.free_unlinked).
CREATE TABLE unlinked (
    inode bigint      PRIMARY KEY,
    at    timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('unlinked', '');

-- Whether a session other than p_sid is live: one may have a file open
-- that p_sid's call removes the last name of.
CREATE FUNCTION _others_live(p_sid bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM session WHERE sid IS DISTINCT FROM p_sid)
$$;


-- Whether a node that just lost its last link stays: when the calling
-- session p_sid has it open (p_open_inodes lists the inodes the client has
-- open) it is kept with nlink 0 in sustained until released; a regular
-- file is also kept, in unlinked, while another session is live (it may
-- have the file open: see jfs.sustain and jfs.free_unlinked).
-- The caller has stored nlink 0 or frees the node when this says false.
CREATE OR REPLACE FUNCTION _keep_open(p_inode bigint, p_sid bigint, p_open_inodes bigint[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_sid > 0 AND p_inode = ANY (p_open_inodes) AND EXISTS (SELECT 1 FROM session WHERE sid = p_sid) THEN
        UPDATE node SET nlink = 0, ctime = _now() WHERE inode = p_inode;
        INSERT INTO sustained (sid, inode) VALUES (p_sid, p_inode) ON CONFLICT DO NOTHING;
        RETURN true;
    END IF;
    IF _others_live(p_sid) THEN
        UPDATE node SET nlink = 0, ctime = _now() WHERE inode = p_inode AND type = 1;
        IF FOUND THEN
            INSERT INTO unlinked (inode) VALUES (p_inode) ON CONFLICT DO NOTHING;
            RETURN true;
        END IF;
    END IF;
    RETURN false;
END
$$;

-- Drops one link of a node per element of p_inodes (the entries just
-- deleted; a node named twice loses two): nodes keeping other links get a
-- lower nlink; nodes left with none are freed, except those the session p_sid
-- has open (p_open_inodes), which stay with nlink 0 in sustained until
-- released, and regular files while other sessions are live, which stay in
-- unlinked (see _keep_open). Nodes about to be freed are not updated first
-- (for a big batch that halves the rows written).
CREATE OR REPLACE FUNCTION _drop_links(p_inodes bigint[], p_now bigint, p_sid bigint, p_open_inodes bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_zero bigint[];
    v_keep bigint[] := '{}';
    v_parked bigint[];
BEGIN
    IF p_inodes IS NULL THEN
        RETURN;
    END IF;
    WITH per_node AS (
        SELECT i AS inode, count(*)::integer AS n FROM unnest(p_inodes) i GROUP BY i
    ), linked AS (
        UPDATE node x SET nlink = x.nlink - p.n, ctime = p_now FROM per_node p
         WHERE x.inode = p.inode AND x.nlink > p.n
        RETURNING x.inode
    )
    SELECT array_agg(p.inode) INTO v_zero FROM per_node p WHERE p.inode NOT IN (SELECT l.inode FROM linked l);
    IF v_zero IS NULL THEN
        RETURN;
    END IF;
    IF p_sid > 0 AND cardinality(p_open_inodes) > 0 AND EXISTS (SELECT 1 FROM session WHERE sid = p_sid) THEN
        SELECT coalesce(array_agg(z), '{}') INTO v_keep FROM unnest(v_zero) z WHERE z = ANY (p_open_inodes);
        UPDATE node SET nlink = 0, ctime = p_now WHERE inode = ANY (v_keep);
        INSERT INTO sustained (sid, inode) SELECT p_sid, k FROM unnest(v_keep) k ON CONFLICT DO NOTHING;
    END IF;
    v_zero := ARRAY(SELECT z FROM unnest(v_zero) z WHERE NOT z = ANY (v_keep));
    IF _others_live(p_sid) THEN
        WITH parked AS (
            UPDATE node SET nlink = 0, ctime = p_now WHERE inode = ANY (v_zero) AND type = 1
            RETURNING inode
        ), kept AS (
            INSERT INTO unlinked (inode) SELECT inode FROM parked ON CONFLICT DO NOTHING RETURNING inode
        )
        SELECT coalesce(array_agg(inode), '{}') INTO v_parked FROM parked;
        v_zero := ARRAY(SELECT z FROM unnest(v_zero) z WHERE NOT z = ANY (v_parked));
    END IF;
    PERFORM _free_nodes(v_zero);
END
$$;

-- Ends a locked session: its open-unlinked inodes are released (freed when
-- no other session holds them), its locks dropped, its row deleted.
CREATE OR REPLACE FUNCTION _end_session(p_sid bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_inode bigint;
    v_released integer := 0;
BEGIN
    FOR v_inode IN DELETE FROM sustained WHERE sid = p_sid RETURNING inode LOOP
        PERFORM 1 FROM node WHERE inode = v_inode FOR UPDATE;
        IF _unheld(v_inode) THEN
            PERFORM _free_node(v_inode);
        END IF;
        v_released := v_released + 1;
    END LOOP;
    DELETE FROM lock_wait WHERE sid = p_sid;
    DELETE FROM plock WHERE sid = p_sid;
    DELETE FROM session WHERE sid = p_sid;
    RETURN v_released;
END
$$;

-- The session closed its last handle of p_inode: an unlinked inode no
-- other session holds is freed. 0, or 2 if p_sid did not hold it.
CREATE OR REPLACE FUNCTION release(p_sid bigint, p_inode bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM 1 FROM node WHERE inode = p_inode FOR UPDATE;
    DELETE FROM sustained WHERE sid = p_sid AND inode = p_inode;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    IF _unheld(p_inode) THEN
        PERFORM _free_node(p_inode);
    END IF;
    RETURN 0;
END
$$;


-- Whether node p_inode (locked by the caller) has no name and nobody
-- holds it: no session has it open, and it is not kept in unlinked for
-- other mounts (free_unlinked frees those).
CREATE FUNCTION _unheld(p_inode bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM node WHERE inode = p_inode AND nlink = 0)
       AND NOT EXISTS (SELECT 1 FROM sustained WHERE inode = p_inode)
       AND NOT EXISTS (SELECT 1 FROM unlinked WHERE inode = p_inode)
$$;

-- Session p_sid holds those of p_inodes (files it has open) that lost
-- their last name elsewhere and are still kept (nlink 0, in unlinked or
-- held by another session): they stay until it releases them (release,
-- or the end of its session). A mount calls it when it reads a removal
-- from the change log. Returns the inodes among p_inodes it holds.
CREATE FUNCTION sustain(p_sid bigint, p_inodes bigint[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM 1 FROM session WHERE sid = p_sid FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN '{}';
    END IF;
    PERFORM 1 FROM node WHERE inode = ANY (p_inodes) AND nlink = 0 ORDER BY inode FOR UPDATE;
    INSERT INTO sustained (sid, inode)
    SELECT p_sid, n.inode FROM node n WHERE n.inode = ANY (p_inodes) AND n.nlink = 0
    ON CONFLICT DO NOTHING;
    RETURN ARRAY(SELECT s.inode FROM sustained s WHERE s.sid = p_sid AND s.inode = ANY (p_inodes) ORDER BY 1);
END
$$;

-- Frees the files kept in unlinked for longer than p_grace (at least a
-- second) that no session holds; those held are left to their last
-- holder's release. Any client may call it (mounts do, in the background).
-- Returns the number of files freed.
CREATE FUNCTION free_unlinked(p_limit integer DEFAULT 10000, p_grace interval DEFAULT '10 seconds')
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_due bigint[];
    v_free bigint[];
BEGIN
    PERFORM _begin();
    SELECT array_agg(u.inode) INTO v_due
      FROM (SELECT inode FROM unlinked
             WHERE at < now() - greatest(p_grace, interval '1 second')
             ORDER BY at LIMIT p_limit FOR UPDATE SKIP LOCKED) u;
    IF v_due IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM node WHERE inode = ANY (v_due) ORDER BY inode FOR UPDATE;
    DELETE FROM unlinked WHERE inode = ANY (v_due);
    SELECT array_agg(n.inode) INTO v_free
      FROM node n
     WHERE n.inode = ANY (v_due) AND n.nlink = 0
       AND NOT EXISTS (SELECT 1 FROM sustained s WHERE s.inode = n.inode);
    IF v_free IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM _free_nodes(v_free);
    RETURN cardinality(v_free);
END
$$;


REVOKE EXECUTE ON FUNCTION _others_live(bigint), _unheld(bigint), sustain(bigint, bigint[]),
    free_unlinked(integer, interval) FROM PUBLIC;
REVOKE ALL ON unlinked FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Locks shared by every mount (sql/lock.sql): fcntl record locks and flock
-- locks in one table of ranges, kept by setlk / getlk / unlock_owner.
-- 0.1.0's flock and plock tables were never written (locks stayed in each
-- kernel): they are replaced.
ALTER EXTENSION jfs DROP TABLE flock;
DROP TABLE flock;
ALTER EXTENSION jfs DROP TABLE plock;
DROP TABLE plock;

-- File locks, shared by every mount: POSIX record locks (fcntl) and BSD
-- locks (flock, which the kernel hands to FUSE as whole-file records of the
-- open file's own owner). One row per locked range of an owner, ranges of
-- an owner never overlapping; sql/lock.sql keeps them.
CREATE TABLE plock (
    inode  bigint   NOT NULL,
    sid    bigint   NOT NULL,
    owner  bigint   NOT NULL,   -- the kernel's lock owner, within the session
    ltype  smallint NOT NULL CHECK (ltype IN (0, 1)),  -- 0 shared (read), 1 exclusive (write)
    lstart bigint   NOT NULL CHECK (lstart >= 0),
    lend   bigint   NOT NULL CHECK (lend >= lstart),   -- the last byte locked
    pid    integer  NOT NULL,   -- the locking process, on its host (for F_GETLK)
    PRIMARY KEY (inode, sid, owner, lstart)
);

-- Owners waiting for a lock (F_SETLKW, flock without LOCK_NB), refreshed by
-- each retry: what deadlock detection follows.
CREATE TABLE lock_wait (
    sid    bigint      NOT NULL,
    owner  bigint      NOT NULL,
    inode  bigint      NOT NULL,
    ltype  smallint    NOT NULL,
    lstart bigint      NOT NULL,
    lend   bigint      NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sid, owner, inode)
);
SELECT pg_catalog.pg_extension_config_dump('plock', '');
SELECT pg_catalog.pg_extension_config_dump('lock_wait', '');

-- File locks shared by every mount (table plock): POSIX record locks with
-- their split-and-merge rules, and BSD flock locks, which the kernel sends
-- as whole-file records of the open file's owner. A lock is taken or
-- refused in one transaction, serialized per file by its node row; a
-- blocked F_SETLKW is the client's loop of setlk calls with p_wait, each
-- refreshing its lock_wait row, which deadlock detection follows. Locks go
-- with their owner's close (unlock_owner) and with their session.

-- The locks of owners other than (p_sid, p_owner) on file p_inode that
-- conflict with locking p_start..p_end as p_type: overlapping ranges, one
-- side exclusive; first byte first.
CREATE FUNCTION _lock_conflicts(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
                                p_start bigint, p_end bigint) RETURNS SETOF plock
LANGUAGE sql STABLE AS $$
    SELECT * FROM plock l
     WHERE l.inode = p_inode AND (l.sid, l.owner) <> (p_sid, p_owner)
       AND l.lstart <= p_end AND l.lend >= p_start AND (l.ltype = 1 OR p_type = 1)
     ORDER BY l.lstart
$$;

-- Whether owner (p_sid, p_owner), waiting for the range, waits (through
-- other waiting owners) on itself. Wait rows not refreshed lately (a
-- client gone from its loop) do not count.
CREATE FUNCTION _lock_deadlock(p_sid bigint, p_owner bigint, p_inode bigint, p_type integer,
                               p_start bigint, p_end bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE blocker (sid, owner) AS (
        SELECT l.sid, l.owner FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end) l
        UNION
        SELECT l.sid, l.owner
          FROM blocker b
          JOIN lock_wait w ON w.sid = b.sid AND w.owner = b.owner AND w.at > now() - interval '5 seconds'
          CROSS JOIN LATERAL _lock_conflicts(w.inode, w.sid, w.owner, w.ltype, w.lstart, w.lend) l
    )
    SELECT EXISTS (SELECT 1 FROM blocker b WHERE b.sid = p_sid AND b.owner = p_owner)
$$;

-- Locks (p_type 0 shared, 1 exclusive) or unlocks (2) bytes p_start..p_end
-- (inclusive) of file p_inode for owner p_owner of session p_sid, as
-- fcntl(F_SETLK) does: the owner's own locks in the range are replaced
-- (split where they reach past it), touching locks of the same type merged.
-- Returns errno: 0 done; 11 (EAGAIN) another owner holds a conflicting
-- lock; with p_wait (the caller will wait and call again) 35 (EDEADLK)
-- when that owner waits, through others, for this one; 22 bad range or
-- type; 2 no such file; 37 (ENOLCK) the session is gone.
CREATE FUNCTION setlk(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
                      p_start bigint, p_end bigint, p_pid integer, p_wait boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_start bigint := p_start;
    v_end bigint := p_end;
    r plock;
BEGIN
    PERFORM _begin();
    IF p_type NOT IN (0, 1, 2) OR p_start < 0 OR p_end < p_start THEN
        RETURN 22;
    END IF;
    PERFORM 1 FROM session WHERE sid = p_sid FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN 37;
    END IF;
    -- one change of a file's locks at a time
    PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    IF p_type <> 2 AND EXISTS (SELECT 1 FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end)) THEN
        IF NOT p_wait THEN
            RETURN 11;
        END IF;
        IF _lock_deadlock(p_sid, p_owner, p_inode, p_type, p_start, p_end) THEN
            DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
            RETURN 35;
        END IF;
        INSERT INTO lock_wait (sid, owner, inode, ltype, lstart, lend)
        VALUES (p_sid, p_owner, p_inode, p_type, p_start, p_end)
        ON CONFLICT (sid, owner, inode) DO UPDATE
            SET ltype = excluded.ltype, lstart = excluded.lstart, lend = excluded.lend, at = now();
        RETURN 11;
    END IF;
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
    -- the owner's locks that overlap or touch the range (no overflow: both >= 0)
    FOR r IN DELETE FROM plock
              WHERE inode = p_inode AND sid = p_sid AND owner = p_owner
                AND lstart - 1 <= p_end AND lend >= p_start - 1
              RETURNING * LOOP
        IF p_type <> 2 AND r.ltype = p_type THEN
            v_start := least(v_start, r.lstart);
            v_end := greatest(v_end, r.lend);
        ELSE
            IF r.lstart < p_start THEN
                INSERT INTO plock VALUES (p_inode, p_sid, p_owner, r.ltype, r.lstart, p_start - 1, r.pid);
            END IF;
            IF r.lend > p_end THEN
                INSERT INTO plock VALUES (p_inode, p_sid, p_owner, r.ltype, p_end + 1, r.lend, r.pid);
            END IF;
        END IF;
    END LOOP;
    IF p_type <> 2 THEN
        INSERT INTO plock VALUES (p_inode, p_sid, p_owner, p_type, v_start, v_end, p_pid);
    END IF;
    RETURN 0;
END
$$;

-- fcntl(F_GETLK): the first lock of another owner that conflicts with
-- locking p_start..p_end as p_type, or ltype 2 (F_UNLCK) when none does.
CREATE FUNCTION getlk(p_inode bigint, p_sid bigint, p_owner bigint, p_type integer,
                      p_start bigint, p_end bigint,
                      OUT ltype integer, OUT lstart bigint, OUT lend bigint, OUT pid integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    SELECT l.ltype, l.lstart, l.lend, l.pid INTO ltype, lstart, lend, pid
      FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end) l
     LIMIT 1;
    IF NOT FOUND THEN
        ltype := 2; lstart := p_start; lend := p_end; pid := 0;
    END IF;
END
$$;

-- Drops every lock owner p_owner of session p_sid holds on file p_inode
-- (the close of a file by a process, the last close of an flock'd open
-- file); returns how many ranges went.
CREATE FUNCTION unlock_owner(p_inode bigint, p_sid bigint, p_owner bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM _begin();
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode;
    DELETE FROM plock WHERE inode = p_inode AND sid = p_sid AND owner = p_owner;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Owner p_owner of session p_sid no longer waits for a lock of p_inode (its
-- wait was interrupted): deadlock detection stops following it at once.
CREATE FUNCTION cancel_lock_wait(p_inode bigint, p_sid bigint, p_owner bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    DELETE FROM lock_wait WHERE sid = p_sid AND owner = p_owner AND inode = p_inode
$$;

-- Who holds which locks, for people: the file's path, the session's host.
CREATE VIEW locks AS
SELECT l.inode, path(l.inode) AS path, l.sid, s.host, l.pid, l.owner,
       CASE l.ltype WHEN 0 THEN 'shared' ELSE 'exclusive' END AS type,
       l.lstart AS start, CASE WHEN l.lend = 9223372036854775807 THEN NULL ELSE l.lend END AS "end"
  FROM plock l LEFT JOIN session s ON s.sid = l.sid;

REVOKE EXECUTE ON FUNCTION _lock_conflicts(bigint, bigint, bigint, integer, bigint, bigint),
    _lock_deadlock(bigint, bigint, bigint, integer, bigint, bigint),
    setlk(bigint, bigint, bigint, integer, bigint, bigint, integer, boolean),
    getlk(bigint, bigint, bigint, integer, bigint, bigint),
    unlock_owner(bigint, bigint, bigint), cancel_lock_wait(bigint, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON plock, lock_wait, locks FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Byte ranges (sql/range.sql): fallocate PUNCH_HOLE / ZERO_RANGE,
-- lseek SEEK_DATA / SEEK_HOLE, copy_file_range sharing slices.

-- Where chunk p_chunk_index of file p_inode shows data within chunk offsets
-- [p_from, p_to): the slices over that range in commit order, each data
-- slice adding its range, each hole (id 0) taking its range away.
CREATE FUNCTION _chunk_data(p_inode bigint, p_chunk_index integer, p_from integer DEFAULT 0,
                            p_to integer DEFAULT 67108864) RETURNS int4multirange
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_data int4multirange := '{}';
    r record;
BEGIN
    FOR r IN SELECT s.pos, s.len, s.slice_id FROM slice s
              WHERE s.inode = p_inode AND s.chunk_index = p_chunk_index
                AND s.pos < p_to AND s.pos + s.len > p_from
              ORDER BY s.seq
    LOOP
        IF r.slice_id = 0 THEN
            v_data := v_data - int4multirange(int4range(r.pos, r.pos + r.len));
        ELSE
            v_data := v_data + int4multirange(int4range(r.pos, r.pos + r.len));
        END IF;
    END LOOP;
    RETURN v_data * int4multirange(int4range(p_from, p_to));
END
$$;

-- The bytes a multirange covers.
CREATE FUNCTION _range_size(p_ranges int4multirange) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT coalesce(sum(upper(r) - lower(r)), 0)::bigint FROM unnest(p_ranges) r $$;

-- The bytes of [p_from, p_to) of file p_inode that show data: what its
-- node's "used" counts over the whole file (st_blocks).
CREATE FUNCTION _data_size(p_inode bigint, p_from bigint, p_to bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_chunk bigint := _chunk_size();
    v_size bigint := 0;
    c integer;
BEGIN
    IF p_to <= p_from THEN
        RETURN 0;
    END IF;
    FOR c IN SELECT DISTINCT s.chunk_index FROM slice s
              WHERE s.inode = p_inode AND s.chunk_index BETWEEN p_from / v_chunk AND (p_to - 1) / v_chunk
    LOOP
        v_size := v_size + _range_size(_chunk_data(p_inode, c, greatest(p_from - c * v_chunk, 0)::integer,
                                                   least(p_to - c * v_chunk, v_chunk)::integer));
    END LOOP;
    RETURN v_size;
END
$$;

-- Locks, in id order, the references of the slices that file p_inode has in
-- the chunks of bytes [p_from, p_to), and p_inode2 in those of [p_from2,
-- p_to2): a procedure that releases or adds references in several steps
-- takes them all first, in one order, so two such procedures on files that
-- share slices cannot deadlock.
CREATE FUNCTION _lock_refs(p_inode bigint, p_from bigint, p_to bigint,
                           p_inode2 bigint DEFAULT NULL, p_from2 bigint DEFAULT NULL, p_to2 bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_chunk bigint := _chunk_size();
BEGIN
    PERFORM 1 FROM slice_ref r
     WHERE r.slice_id IN (SELECT s.slice_id FROM slice s
                           WHERE s.slice_id <> 0
                             AND ((s.inode = p_inode AND s.chunk_index BETWEEN p_from / v_chunk AND (p_to - 1) / v_chunk)
                                  OR (s.inode = p_inode2
                                      AND s.chunk_index BETWEEN p_from2 / v_chunk AND (p_to2 - 1) / v_chunk)))
     ORDER BY r.slice_id FOR UPDATE;
END
$$;

-- Makes bytes [p_from, p_to) of locked file p_inode read as zeros, p_to at
-- most its length: chunks wholly inside lose their slices, slices wholly
-- inside the range in the chunks at its ends are dropped, and a hole slice
-- covers what still shows there. References are released as the rows go
-- (all locked first, _lock_refs). Returns the bytes of data the range held
-- (the node's "used" falls by it).
CREATE FUNCTION _zero(p_inode bigint, p_from bigint, p_to bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_chunk bigint := _chunk_size();
    v_whole_from integer;
    v_whole_to integer;
    v_gone bigint[];
    v_pos integer;
    v_end integer;
    v_data bigint;
    c integer;
BEGIN
    IF p_to <= p_from THEN
        RETURN 0;
    END IF;
    PERFORM _lock_refs(p_inode, p_from, p_to);
    v_data := _data_size(p_inode, p_from, p_to);
    -- the chunks wholly inside (the last chunk index is 2^31 - 1)
    v_whole_from := least((p_from + v_chunk - 1) / v_chunk, 2147483647)::integer;
    v_whole_to := (p_to / v_chunk)::integer - 1;
    IF (p_from + v_chunk - 1) / v_chunk > 2147483647 THEN
        v_whole_to := -1;
    END IF;
    IF v_whole_from <= v_whole_to THEN
        PERFORM _drop_chunks(ARRAY[p_inode], v_whole_from, v_whole_to);
    END IF;
    FOR c IN SELECT DISTINCT i FROM unnest(ARRAY[p_from / v_chunk, (p_to - 1) / v_chunk]::integer[]) i
              WHERE i NOT BETWEEN v_whole_from AND v_whole_to
    LOOP
        v_pos := greatest(p_from - c * v_chunk, 0);
        v_end := least(p_to - c * v_chunk, v_chunk);
        WITH gone AS (
            DELETE FROM slice WHERE inode = p_inode AND chunk_index = c AND pos >= v_pos AND pos + len <= v_end
            RETURNING slice_id
        )
        SELECT array_agg(slice_id) INTO v_gone FROM gone WHERE slice_id <> 0;
        PERFORM _release_slices(v_gone);
        IF EXISTS (SELECT 1 FROM slice WHERE inode = p_inode AND chunk_index = c
                                       AND pos < v_end AND pos + len > v_pos) THEN
            INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
            VALUES (p_inode, c, 0, 0, 0, v_end - v_pos, v_pos);
        END IF;
    END LOOP;
    RETURN v_data;
END
$$;

-- fallocate PUNCH_HOLE and ZERO_RANGE: bytes [p_offset, p_offset +
-- p_length) of file p_inode read as zeros from now on, the space their
-- slices held freed as far as no other file shares them. With p_keep_size
-- the range stops at the end of the file; without it a range past the end
-- makes the file longer (charged as a write is: 28 ENOSPC or 122 EDQUOT
-- when that passes a limit, nothing changed). Sets mtime and ctime.
-- Returns the file's attributes; errno 2 no such file, 21 a directory,
-- 22 not a regular file or a bad range, 27 past the largest file.
CREATE FUNCTION zero_range(p_inode bigint, p_offset bigint, p_length bigint, p_keep_size boolean)
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
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(21);
    ELSIF n.type <> 1 THEN
        RETURN _err(22);
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

-- lseek SEEK_DATA (p_hole false) and SEEK_HOLE (true) of file p_inode from
-- p_offset, answered from its slices: the first offset at or after p_offset
-- where the file shows data (SEEK_DATA) or does not (SEEK_HOLE; the end of
-- the file counts as a hole). errno 6 (ENXIO) when p_offset is at or past
-- the end, or no data follows it (SEEK_DATA); 2 no such file, 21 a
-- directory, 22 not a regular file.
CREATE FUNCTION seek_data(p_inode bigint, p_offset bigint, p_hole boolean,
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
    IF NOT FOUND THEN
        errno := 2; RETURN;
    ELSIF n.type = 2 THEN
        errno := 21; RETURN;
    ELSIF n.type <> 1 OR p_hole IS NULL THEN
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

-- copy_file_range as metadata: bytes [p_src_offset, p_src_offset + p_length)
-- of file p_src (cut at its end) appear at p_dst_offset of file p_dst, by
-- slice rows that point at the source's slices (each gains a reference), in
-- one transaction; no byte is read or written. The destination range first
-- reads as zeros (_zero), then the source's slices are laid over it in their
-- order, cut to the range and split where the destination's chunks end.
-- Writes to either file later make new slices, so they stay apart. A longer
-- destination is charged as a write is (28/122 when that passes a limit).
-- Returns errno 0 with the bytes copied and the destination's new length;
-- else 2 no such file, 21 a directory, 22 not regular files, a bad range
-- or overlapping ranges of one file, 27 past the largest file.
CREATE FUNCTION copy_range(p_src bigint, p_src_offset bigint, p_dst bigint, p_dst_offset bigint,
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
    IF src.inode IS NULL OR dst.inode IS NULL THEN
        errno := 2; RETURN;
    ELSIF src.type = 2 OR dst.type = 2 THEN
        errno := 21; RETURN;
    ELSIF src.type <> 1 OR dst.type <> 1 THEN
        errno := 22; RETURN;
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

REVOKE EXECUTE ON FUNCTION _release_slices(bigint[]), _chunk_data(bigint, integer, integer, integer),
    _range_size(int4multirange), _data_size(bigint, bigint, bigint),
    _lock_refs(bigint, bigint, bigint, bigint, bigint, bigint),
    _zero(bigint, bigint, bigint), zero_range(bigint, bigint, bigint, boolean),
    seek_data(bigint, bigint, boolean), copy_range(bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Space limits at write() (sql/charge.sql): a writer asks how long a file may
-- grow before it buffers growth.

-- Whether any space limit is set and enforced (a mount asks now and then;
-- with none, its writers need not ask space_limit).
CREATE FUNCTION space_limited() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.quota_limits AND EXISTS (SELECT 1 FROM quota q WHERE q.max_space > 0) FROM setting s
$$;

-- The longest file p_inode may be now before a space limit refuses it: the
-- volume's capacity, its owners' quotas and the directory quotas above each
-- of its entries, given what they hold now (space counts in 4 KiB units of
-- length, see _space). max_length is NULL when no limit applies; over_errno
-- is what the binding limit answers (28 ENOSPC for the volume, 122 EDQUOT
-- for a quota). errno 2: no such node, 22: not a regular file.
CREATE FUNCTION space_limit(p_inode bigint, OUT errno integer, OUT max_length bigint, OUT over_errno integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    f record;
    q record;
    n node;
    v_roots bigint[];
    v_length bigint;
BEGIN
    SELECT * INTO n FROM node WHERE inode = p_inode;
    IF NOT FOUND THEN
        errno := 2; RETURN;
    ELSIF n.type <> 1 THEN
        errno := 22; RETURN;
    END IF;
    errno := 0;
    SELECT quota_limits, owner_quotas, quota_uids, quota_gids INTO f FROM setting;
    IF NOT f.quota_limits THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(r.root), '{}') INTO v_roots
      FROM edge e JOIN node p ON p.inode = e.parent, unnest(_quota_roots(p.qroot)) r(root)
     WHERE e.inode = p_inode AND p.qroot > 0;
    FOR q IN
        SELECT l.kind, l.n, qq.max_space,
               (SELECT coalesce(sum(u.space), 0) FROM quota_usage u WHERE u.kind = l.kind AND u.key = l.key) AS used
          FROM _quota_list(true, _owner_key(f.owner_quotas, f.quota_uids, n.uid),
                           _owner_key(f.owner_quotas, f.quota_gids, n.gid), v_roots) l
          JOIN quota qq ON qq.kind = l.kind AND qq.key = l.key
         WHERE qq.max_space > 0
    LOOP
        -- growth is charged l.n times (hard links in one quota's tree)
        v_length := ((_space(n.length) + greatest(q.max_space - q.used, 0) / q.n) / 4096) * 4096;
        IF max_length IS NULL OR v_length < max_length THEN
            max_length := v_length;
            over_errno := CASE WHEN q.kind = 'fs' THEN 28 ELSE 122 END;
        END IF;
    END LOOP;
END
$$;

REVOKE EXECUTE ON FUNCTION space_limited(), space_limit(bigint) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- st_blocks: node.used counts the bytes a file's slices show (holes left
-- out), kept by every procedure that changes slices, returned in attr.

ALTER TABLE node ADD COLUMN used bigint NOT NULL DEFAULT 0 CHECK (used >= 0);
ALTER TYPE attr ADD ATTRIBUTE used bigint;

-- The attr result of a node (errno 0), or errno 2 alone when p_inode is absent.
CREATE OR REPLACE FUNCTION _attr(p_inode bigint) RETURNS attr
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r attr;
BEGIN
    SELECT 0, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
      INTO r FROM node n WHERE n.inode = p_inode;
    IF NOT FOUND THEN
        r.errno := 2;
    END IF;
    RETURN r;
END
$$;

CREATE OR REPLACE FUNCTION _err(p_errno integer) RETURNS attr
LANGUAGE sql IMMUTABLE AS
$$ SELECT ROW(p_errno, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::attr $$;

CREATE OR REPLACE FUNCTION _to_attr(n node) RETURNS attr
LANGUAGE sql IMMUTABLE AS $$
    SELECT ROW(0, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
               n.nlink, n.length, n.rdev, n.parent, n.tier, n.used)::attr
$$;

-- The node a name refers to in a directory.
CREATE OR REPLACE FUNCTION lookup(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    r attr;
BEGIN
    SELECT 0, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
      INTO r
      FROM edge e JOIN node n ON n.inode = e.inode
     WHERE e.parent = p_parent AND e.name = p_name;
    IF FOUND THEN
        RETURN r;
    END IF;
    IF _is_dot(p_name) THEN
        r := _attr(p_parent);
        IF r.errno <> 0 THEN
            RETURN r;
        ELSIF r.type <> 2 THEN
            RETURN _err(20);
        ELSIF p_name = '\x2e2e'::bytea THEN
            RETURN _attr(r.parent);
        END IF;
        RETURN r;
    END IF;
    RETURN _err(_missing(p_parent, p_name));
END
$$;

-- Sets the length of the locked regular file p: shrinking drops the slices
-- of whole chunks past the end and covers the rest of the boundary chunk
-- with a hole slice (id 0), so growing it again later reads zeros. The
-- caller has charged the change of space (_charge_space).
CREATE OR REPLACE FUNCTION _truncate(p node, p_length bigint, p_now bigint) RETURNS node
LANGUAGE plpgsql AS $$
DECLARE
    v_chunk bigint := _chunk_size();
    v_boundary bigint;
    v_pos bigint;
    v_end bigint;
    n node;
BEGIN
    IF p_length < p.length THEN
        -- what showed data past the new end goes from "used"
        p.used := CASE WHEN p_length = 0 THEN 0 ELSE p.used - _data_size(p.inode, p_length, p.length) END;
        IF (p_length + v_chunk - 1) / v_chunk <= 2147483647 THEN   -- else no whole chunk is past the end
            PERFORM _drop_slices(ARRAY[p.inode], ((p_length + v_chunk - 1) / v_chunk)::integer);
        END IF;
        IF p_length % v_chunk <> 0 THEN
            v_boundary := p_length / v_chunk;
            v_pos := p_length % v_chunk;
            v_end := least(p.length - v_boundary * v_chunk, v_chunk);
            IF v_end > v_pos THEN
                INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
                VALUES (p.inode, v_boundary, 0, 0, 0, v_end - v_pos, v_pos);
            END IF;
        END IF;
    END IF;
    UPDATE node SET length = p_length, used = p.used, mtime = p_now, ctime = p_now
     WHERE inode = p.inode RETURNING * INTO n;
    RETURN n;
END
$$;

DROP FUNCTION readdirplus(bigint, bigint, integer);
CREATE FUNCTION readdirplus(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint, mode integer,
               uid bigint, gid bigint, atime bigint, mtime bigint, ctime bigint, nlink integer,
               length bigint, rdev bigint, parent bigint, tier smallint, used bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    RETURN QUERY
        SELECT 0, e.cookie, e.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
               n.nlink, n.length, n.rdev, n.parent, n.tier, n.used
          FROM edge e JOIN node n ON n.inode = e.inode
         WHERE e.parent = p_dir AND e.cookie > coalesce(p_cookie, 0)
         ORDER BY e.cookie
         LIMIT least(greatest(coalesce(p_limit, 1000), 1), 100000);
    IF NOT FOUND THEN
        v_errno := _readdir_error(p_dir);
        IF v_errno <> 0 THEN
            RETURN QUERY SELECT v_errno, NULL::bigint, NULL::bytea, NULL::bigint, NULL::smallint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::bigint;
        END IF;
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION readdirplus(bigint, bigint, integer) FROM PUBLIC;

UPDATE node n SET used = _data_size(n.inode, 0, n.length)
 WHERE n.type = 1 AND EXISTS (SELECT 1 FROM slice s WHERE s.inode = n.inode);

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

-- ---------------------------------------------------------------------------
ALTER TABLE setting ADD COLUMN retain_deleted interval NOT NULL DEFAULT '0' CHECK (retain_deleted >= '0');
ALTER TABLE setting ADD COLUMN last_backup timestamptz;

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
CREATE FUNCTION dump_tree(p_root bigint DEFAULT 1)
RETURNS TABLE (depth integer, name bytea, inode bigint, type smallint, mode integer, uid bigint, gid bigint,
               atime bigint, mtime bigint, ctime bigint, nlink integer, length bigint, rdev bigint,
               tier smallint, target bytea, xattr_names bytea[], xattr_values bytea[], chunks text,
               acl_kinds text[], acl_tags smallint[], acl_qualifiers bigint[], acl_perms smallint[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp SET work_mem = '64MB' AS $$
    WITH RECURSIVE t(inode, name, depth, path) AS (
        SELECT p_root, NULL::bytea, 0, ARRAY[]::bigint[]
        UNION ALL
        SELECT e.inode, e.name, t.depth + 1, t.path || e.cookie
          FROM t JOIN edge e ON e.parent = t.inode
         WHERE NOT (p_root = 1 AND e.parent = 1 AND e.inode = _trash_inode())
    )
    SELECT t.depth, t.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length,
           n.rdev, n.tier, s.target, x.names, x.vals, c.chunks, a.kinds, a.tags, a.qualifiers, a.perms
      FROM t
      JOIN node n ON n.inode = t.inode
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
LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (SELECT 1 FROM edge) AND NOT EXISTS (SELECT 1 FROM node WHERE inode <> 1)
$$;

-- Moves what load_begin's tables hold into the volume, in the caller's
-- transaction: formats the database first when it is not (with the dump's
-- name, uuid, storage, bucket, block size, trash days, capacity and inode
-- limit; the object store's keys are not in dumps), then inserts the nodes,
-- entries, slices, symlinks, xattrs and ACLs, and rebuilds what follows from
-- them: directory parents, slice references, each file's used bytes, the
-- counters and sequences, dir_stats and every quota's usage. Refuses
-- (errno 17) a volume that holds more than its root unless p_force, which
-- first empties it (errno 16 while it is mounted; its slices are queued
-- for deletion like any freed data, but for those the dump names again);
-- errno 22 for a dump whose volume name or block size differs from the
-- formatted volume's (its blocks would not be found), or whose entries
-- name missing nodes.
CREATE FUNCTION load_staged(p_force boolean, p_name text, p_uuid uuid, p_storage text, p_bucket text,
                            p_block_size integer, p_trash_days integer, p_capacity bigint, p_inodes bigint,
                            p_next_inode bigint, p_next_slice bigint, p_enable_acl boolean,
                            OUT errno integer, OUT message text, OUT nodes bigint, OUT entries bigint,
                            OUT slices bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp SET work_mem = '64MB' AS $$
DECLARE
    v_setting setting;
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
                                          p_capacity, p_inodes, 'fsync', p_uuid);
        IF v_format.errno <> 0 THEN
            errno := v_format.errno; message := v_format.message;
            RETURN;
        END IF;
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

REVOKE EXECUTE ON FUNCTION dump_tree(bigint), dump_volume(), dump_quotas(), backup_claim(interval), backup_release(text), load_begin(), _volume_empty(),
    load_staged(boolean, text, uuid, text, text, integer, integer, bigint, bigint, bigint, bigint, boolean) FROM PUBLIC;

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
    repaired := 'usage and dir_stats';
    SELECT count(*) FILTER (WHERE c.repaired) INTO changed FROM check_quota(NULL, NULL, true) c;
    RETURN NEXT;
END
$$;

-- The slices some file uses (id and size), in id order after p_after, at
-- most p_limit: what `jfs fsck --check-objects` looks for in the object store.
CREATE FUNCTION live_slices(p_after bigint, p_limit integer) RETURNS TABLE (slice_id bigint, size integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT r.slice_id, r.size FROM slice_ref r WHERE r.slice_id > p_after AND r.refs > 0
     ORDER BY r.slice_id LIMIT p_limit
$$;


REVOKE EXECUTE ON FUNCTION fsck_repair(), live_slices(bigint, integer) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Freed objects kept for point-in-time restores (setting.retain_deleted).

-- Slices whose last reference went away at least p_min_age ago, and at
-- least the volume's retain_deleted, for a mount or `jfs gc --delete` to
-- delete their objects (then forget_delslices). Several mounts may get the
-- same rows; deleting an object twice is harmless.
CREATE OR REPLACE FUNCTION pending_delslices(p_min_age interval DEFAULT '0', p_limit integer DEFAULT 1000)
RETURNS TABLE (slice_id bigint, size integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT d.slice_id, d.size FROM delslice d
     WHERE d.queued_at <= now() - greatest(p_min_age, (SELECT s.retain_deleted FROM setting s))
     ORDER BY d.queued_at, d.slice_id
     LIMIT least(greatest(p_limit, 1), 100000)
$$;

-- How long freed slices' objects are kept (at the least) before mounts and
-- `jfs gc --delete` delete them: set it beyond the database's
-- point-in-time-recovery window (base backups + WAL archive), and restoring
-- the database to any moment in that window gives a file system whose
-- every block still exists (README, "Point-in-time restore"). Returns the
-- setting; NULL leaves it as it is.
CREATE FUNCTION set_retain_deleted(p_retain interval DEFAULT NULL) RETURNS interval
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_retain interval;
BEGIN
    IF p_retain < interval '0' THEN
        RAISE EXCEPTION 'jfs.set_retain_deleted: a duration >= 0, not %', p_retain
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET retain_deleted = coalesce(p_retain, s.retain_deleted) RETURNING s.retain_deleted INTO v_retain;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_retain_deleted: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_retain;
END
$$;


REVOKE EXECUTE ON FUNCTION set_retain_deleted(interval) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Monitoring (sql/metrics.sql): the volume's figures as (metric, key, value)
-- rows for a SQL exporter; grant_reader gives SELECT on it.
-- The volume's figures for monitoring, as rows (metric, key, value): one
-- query for a SQL exporter (postgres_exporter's queries file,
-- sql_exporter; with the README's postgres_exporter query each row is
-- jfs_volume_value{metric="...",key="..."}). What a mount does is in its
-- own metrics (`jfs mount --metrics`); what the volume holds is the same
-- for every mount, so it is here, once. `key` names the quota
-- ('dir:/projects/a', 'user:1000', 'group:100'), the tier ('1'), or is ''.
-- Reading it costs a scan of the files (tier_usage): scrape it every
-- minute or so, not every second.
CREATE VIEW metrics AS
SELECT f.metric, ''::text AS key, f.value
  FROM usage u
 CROSS JOIN LATERAL (VALUES ('capacity_bytes'::text, u.capacity::float8), ('used_bytes', u.used_space),
                            ('max_inodes', u.max_inodes), ('used_inodes', u.used_inodes)) f (metric, value)
UNION ALL
SELECT 'quota_' || f.metric, q.kind || ':' || coalesce(q.path, q.uid::text, q.gid::text, '?'), f.value
  FROM quotas q
 CROSS JOIN LATERAL (VALUES ('max_bytes', q.max_space::float8), ('used_bytes', q.used_space),
                            ('max_inodes', q.max_inodes), ('used_inodes', q.used_inodes)) f (metric, value)
 WHERE q.kind <> 'fs'
UNION ALL
SELECT f.metric, t.tier::text, f.value
  FROM tier_usage t
 CROSS JOIN LATERAL (VALUES ('tier_files', t.files::float8), ('tier_bytes', t.bytes)) f (metric, value)
UNION ALL
SELECT f.metric, '', f.value
  FROM (SELECT count(*) AS sessions, extract(epoch FROM now() - min(s.heartbeat)) AS oldest FROM session s) s
 CROSS JOIN LATERAL (VALUES ('sessions', s.sessions::float8),
                            ('oldest_heartbeat_seconds', coalesce(s.oldest, 0)::float8)) f (metric, value)
UNION ALL
SELECT 'trash_entries', '', count(*)
  FROM edge h JOIN edge e ON e.parent = h.inode
 WHERE h.parent = _trash_inode()
UNION ALL SELECT 'locks', '', count(*) FROM plock
UNION ALL
SELECT f.metric, '', f.value
  FROM (SELECT count(*) AS slices, coalesce(sum(d.size), 0) AS bytes FROM delslice d) d
 CROSS JOIN LATERAL (VALUES ('delete_queue_slices', d.slices::float8),
                            ('delete_queue_bytes', d.bytes::float8)) f (metric, value);
REVOKE ALL ON metrics FROM PUBLIC;
