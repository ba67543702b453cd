-- Internal helpers shared by the procedures. They run with the caller's
-- rights (SECURITY INVOKER) and EXECUTE is revoked from PUBLIC, so calling one
-- directly gains nothing; the public procedures are SECURITY DEFINER.

-- errno values (Linux): EPERM 1, ENOENT 2, EIO 5, E2BIG 7, EEXIST 17, EXDEV 18,
-- ENOTDIR 20, EISDIR 21, EINVAL 22, EFBIG 27, ENOSPC 28, EMLINK 31, ERANGE 34,
-- ENAMETOOLONG 36, ENOTEMPTY 39, ELOOP 40, ENODATA 61, ENOTSUP 95, EDQUOT 122.

-- Size of a chunk: 64 MiB.
CREATE FUNCTION _chunk_size() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 67108864::bigint $$;

-- Transaction time in nanoseconds since the Unix epoch. The server's clock is
-- the one clock every mount shares.
CREATE FUNCTION _now() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT (extract(epoch FROM pg_catalog.now()) * 1000000)::bigint * 1000 $$;

-- 0 if p_name can be a directory entry, else the errno. '.' and '..' are
-- checked by the callers, which treat them differently.
CREATE FUNCTION _check_name(p_name bytea) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_name IS NULL OR length(p_name) = 0 THEN 22
        WHEN length(p_name) > 255 THEN 36
        WHEN position('\x2f'::bytea IN p_name) > 0 THEN 22
        WHEN position('\x00'::bytea IN p_name) > 0 THEN 22
        ELSE 0
    END
$$;

-- The trash directory's inode (JuiceFS's TrashInode): /.trash, see sql/trash.sql.
CREATE FUNCTION _trash_inode() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 9223372032828243968::bigint $$;

-- The shard of its volume this database is (sql/shard.sql; 0: the root).
CREATE FUNCTION _this_shard() RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT s.shard FROM setting s), 0);
END
$$;

-- Whether inode p_inode is of another shard of the volume than this
-- database (sql/shard.sql): its shard number (bits 48 to 62) is not this
-- one's. The trash's inode is every shard's.
CREATE FUNCTION _remote(p_inode bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT (p_inode >> 48) <> 32767 AND (p_inode >> 48) <> _this_shard()
$$;

-- Whether (p_parent, p_name) is a name the volume keeps for itself: /.trash
-- (the trash) and /.jfs.control (each mount's control file). Nobody makes,
-- links or renames an entry to them in the root; elsewhere they are names.
CREATE FUNCTION _reserved_name(p_parent bigint, p_name bytea) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_parent = 1 AND p_name IN ('\x2e7472617368'::bytea, '\x2e6a66732e636f6e74726f6c'::bytea)
$$;

CREATE FUNCTION _is_dot(p_name bytea) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT p_name = '\x2e'::bytea OR p_name = '\x2e2e'::bytea $$;

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

-- The check that opens every procedure on a file's data, given the node as
-- read (and locked, as the caller needs): 0 for a regular file, else errno
-- 2 (no such node: every field NULL), 21 (a directory) or 22 (any other type).
CREATE FUNCTION _file_errno(p_node node) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_node.inode IS NULL THEN 2 WHEN p_node.type = 2 THEN 21
                WHEN p_node.type <> 1 THEN 22 ELSE 0 END
$$;

-- The limits (jfs.grant_client) that bind the caller's login role: its
-- own and those of the roles it is a member of; none for a superuser.
CREATE FUNCTION _caller_limits() RETURNS SETOF client_role
LANGUAGE sql STABLE AS $$
    SELECT r.* FROM client_role r JOIN pg_catalog.pg_roles g ON g.rolname = r.role
     WHERE pg_catalog.pg_has_role(session_user, g.oid, 'MEMBER')
       AND NOT coalesce((SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = session_user), false)
$$;

-- Whether the caller's login role is read-only (jfs.grant_client).
CREATE FUNCTION _caller_read_only() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT bool_or(r.read_only) FROM _caller_limits() r), false);
END
$$;

-- The squash of owner ids the caller is under: kind 'none'; 'root', ids 0
-- become uid/gid; 'all', every id does (all before root, then by role).
CREATE FUNCTION _caller_squash(OUT kind text, OUT uid bigint, OUT gid bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT r.squash, r.squash_uid, r.squash_gid INTO kind, uid, gid FROM _caller_limits() r
     WHERE r.squash <> 'none'
     ORDER BY r.squash = 'all' DESC, r.role
     LIMIT 1;
    kind := coalesce(kind, 'none');
END
$$;

-- Whether some client role is squashed: what setting.squash_roles keeps
-- (schema-qualified: grant_client calls it with jfs off its search_path),
-- so that a create looks the caller's squash up only when one may apply.
CREATE FUNCTION _some_role_squashed() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM jfs.client_role r WHERE r.squash <> 'none');
END
$$;

-- Owner id p_id of a squashed call: p_to under 'all', and under 'root'
-- when p_id is 0.
CREATE FUNCTION _squashed(p_id bigint, p_kind text, p_to bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_kind = 'all' OR (p_kind = 'root' AND p_id = 0) THEN p_to ELSE p_id END
$$;

-- The volume's durability mode applied to this transaction. In 'fsync'
-- mode the commit does not wait for the WAL flush (atomic, durable within
-- the WAL writer delay); jfs.sync() waits for it. In 'always' mode every
-- commit is durable. Mutating procedures read the mode together with their
-- first row and call this.
CREATE FUNCTION _durability(p_mode text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_mode = 'fsync' THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
    END IF;
END
$$;

-- For procedures that need the settings row anyway: applies the durability
-- mode and returns the settings.
-- Refuses a change to a volume `jfs destroy` is removing (after
-- destroy_begin, which --force runs with mounts still attached). Every
-- procedure that changes the volume reads setting.destroying (through
-- _begin, or with its own read of the settings) and calls this when set.
CREATE FUNCTION _destroyed() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'jfs: the volume is being destroyed (jfs destroy): nothing changes in it any more'
        USING ERRCODE = 'object_not_in_prerequisite_state';
END
$$;

CREATE FUNCTION _begin() RETURNS setting
LANGUAGE plpgsql AS $$
DECLARE
    s setting;
BEGIN
    SELECT * INTO s FROM setting;
    IF s.destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    PERFORM _durability(s.meta_durability);
    RETURN s;
END
$$;

-- Whether a directory's mtime/ctime should move to p_now: not if both were
-- set within the last p_skip_ns (many creates in one directory then do not
-- all rewrite its row; JuiceFS's --skip-dir-mtime).
CREATE FUNCTION _dir_times_stale(p_mtime bigint, p_ctime bigint, p_now bigint, p_skip_ns bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT NOT (p_mtime BETWEEN p_now - coalesce(p_skip_ns, 0) AND p_now
                AND p_ctime BETWEEN p_now - coalesce(p_skip_ns, 0) AND p_now)
$$;

-- Helpers that run statements are PL/pgSQL, not SQL functions: PostgreSQL
-- plans a non-inlined SQL function's body again at every call, while
-- PL/pgSQL keeps its plans for the session. (Single-expression SQL
-- functions above are inlined into their callers' plans; one with a
-- subquery or a FROM is not. Until 0.2.16 _change_session, _handed_out,
-- _fresh_slice_id, _quota_roots, _range_size and _others_live were such
-- SQL functions, at 30-100 us a call: about a third of what a create or
-- an unlink cost in PostgreSQL.)

-- Sets a directory's mtime and ctime to p_now unless they are fresh (see
-- _dir_times_stale), for callers that did not read them.
CREATE FUNCTION _touch_dir(p_dir bigint, p_now bigint, p_skip_ns bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE node SET mtime = p_now, ctime = p_now
     WHERE inode = p_dir AND _dir_times_stale(mtime, ctime, p_now, p_skip_ns);
END
$$;

-- Whether p_id is an id of counter p_kind ('inode', 'slice') that alloc_ids
-- handed out to the caller's login role (or before 0.2.24, when ranges had
-- no owner), or the caller administers jfs: ids are never handed out
-- twice, and no client names ids reserved by another role.
CREATE FUNCTION _handed_out(p_kind text, p_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    g id_grant;
BEGIN
    IF p_id IS NULL OR p_id <= 0 OR p_id >= (SELECT c.next FROM counter c WHERE c.name = p_kind) THEN
        RETURN false;
    END IF;
    SELECT * INTO g FROM id_grant x WHERE x.kind = p_kind AND x.first <= p_id ORDER BY x.first DESC LIMIT 1;
    IF FOUND AND p_id <= g.last AND (g.role IS NULL OR g.role = session_user) THEN
        RETURN true;
    END IF;
    RETURN _is_admin();
END
$$;

-- Whether a client's slice id p_id can name a new slice: handed out, and
-- neither referenced already nor queued for deletion (its objects would be
-- deleted under the new reference).
CREATE FUNCTION _fresh_slice_id(p_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN _handed_out('slice', p_id)
       AND NOT EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = p_id)
       AND NOT EXISTS (SELECT 1 FROM delslice d WHERE d.slice_id = p_id);
END
$$;

-- Reserves the next p_count ids of a counter; returns the first. (The
-- version of the counter's row this transaction wrote last is updated
-- directly: see _last_version.)
CREATE FUNCTION _next_ids(p_name text, p_count bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_first bigint;
    v_last tid := _last_version('counter', p_name);
    v_ctid tid;
BEGIN
    IF v_last IS NOT NULL THEN
        UPDATE counter c SET next = c.next + p_count WHERE c.ctid = v_last AND c.name = p_name
        RETURNING c.next - p_count, c.ctid INTO v_first, v_ctid;
    END IF;
    IF v_first IS NULL THEN
        UPDATE counter c SET next = c.next + p_count WHERE c.name = p_name
        RETURNING c.next - p_count, c.ctid INTO v_first, v_ctid;
    END IF;
    IF v_ctid IS NOT NULL THEN
        PERFORM _note_version('counter', p_name, v_ctid);
    END IF;
    RETURN v_first;
END
$$;

-- Notes that ids p_first .. p_first + p_count - 1 of kind p_kind went to
-- the caller's login role (see _handed_out): the range just before grows
-- when it went to that role too (the counter's row lock, held by the
-- caller, orders the grants).
CREATE FUNCTION _grant_ids(p_kind text, p_first bigint, p_count bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE id_grant g SET last = p_first + p_count - 1
     WHERE g.kind = p_kind AND g.last = p_first - 1 AND g.role = session_user
       AND g.first = (SELECT max(x.first) FROM id_grant x WHERE x.kind = p_kind AND x.first < p_first);
    IF NOT FOUND THEN
        INSERT INTO id_grant (kind, first, last, role) VALUES (p_kind, p_first, p_first + p_count - 1, session_user);
    END IF;
END
$$;

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
CREATE FUNCTION _drop_slices(p_inodes bigint[], p_from_chunk integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _drop_chunks(p_inodes, p_from_chunk, 2147483647);
END
$$;

-- Removes nodes whose last link is gone and that no session holds open:
-- their data references, symlink targets, xattrs, their figures as
-- directories, and their usage (volume, owners), set-based. Their entries
-- are gone already (and were uncharged by whoever removed them).
CREATE FUNCTION _free_nodes(p_inodes bigint[]) RETURNS void
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

-- One node: see _free_nodes.
CREATE FUNCTION _free_node(p_inode bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _free_nodes(ARRAY[p_inode]);
END
$$;

-- Whether a node that just lost its last link stays: when the calling
-- session p_sid has it open (p_open_inodes lists the inodes the client has
-- open) it is kept with nlink 0 in sustained until released; a regular
-- file is also kept, in unlinked, while another session is live (it may
-- have the file open: see jfs.sustain and jfs.free_unlinked).
-- The caller has stored nlink 0 or frees the node when this says false.
CREATE FUNCTION _keep_open(p_inode bigint, p_sid bigint, p_open_inodes bigint[]) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_sid > 0 AND p_inode = ANY (p_open_inodes) AND coalesce(_may_act_for(p_sid), false) THEN
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

-- Whether the caller's login role administers jfs: a superuser, or a role
-- granted the procedures of administration (jfs.grant_admin).
CREATE FUNCTION _is_admin() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
        OR pg_catalog.has_function_privilege(session_user, 'jfs.set_retain_deleted(interval)', 'EXECUTE');
END
$$;

-- Whether the caller may act for session p_sid: its login role registered
-- it (or the session is from before sessions had roles), or it is an
-- administrator. NULL when there is no such session.
CREATE FUNCTION _may_act_for(p_sid bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.role IS NULL OR s.role = session_user OR _is_admin() FROM session s WHERE s.sid = p_sid);
END
$$;

-- Refuses a call about session p_sid made by another role than the one
-- that registered it (a client role cannot act as another mount).
CREATE FUNCTION _check_session(p_sid bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT coalesce(_may_act_for(p_sid), true) THEN
        RAISE EXCEPTION 'jfs: session % was registered by another role', p_sid
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- Directory leases (sql/lease.sql): what every procedure that reads a
-- directory's entries checks first.

-- Refuses: directory p_dir's lease is held by session p_holder.
CREATE FUNCTION _leased(p_dir bigint, p_holder bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'jfs: directory % is leased by session %', p_dir, p_holder
        USING ERRCODE = 'JL000', DETAIL = p_dir::text,
              HINT = 'Ask for the lease with jfs.want_lease(dir) and call again: its holder gives it up within 50 ms.';
END
$$;

-- Refuses when a session other than the caller's holds the lease of any
-- of directories p_dirs (the caller's session is worked out only then).
-- A read-only role reads past leases, as administration does: it sees
-- what the holder committed (at most a batch window, 50 ms, behind), and
-- so never makes a holder give a lease up (0.2.23).
-- (Almost every call finds no lease: one probe answers it. A loop over the
-- leases found, with the caller's session in it, made every create 0.02
-- ms slower. The caller's role is looked up last, when another session's
-- lease is found: a lease holder's own calls, the creates it commits, do
-- not pay for it; each probe has LIMIT 1, which keeps its plan cached.)
CREATE FUNCTION _unleased(p_dirs bigint[]) RETURNS void
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
    IF l.sid IS NOT DISTINCT FROM v_me THEN
        SELECT d.dir, d.sid INTO l FROM dir_lease d
         WHERE d.dir = ANY (p_dirs) AND d.sid IS DISTINCT FROM v_me LIMIT 1;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF NOT _caller_read_only() THEN
        PERFORM _leased(l.dir, l.sid);
    END IF;
END
$$;

-- Whether a session other than p_sid is live: one may have a file open
-- that p_sid's call removes the last name of.
CREATE FUNCTION _others_live(p_sid bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM session WHERE sid IS DISTINCT FROM p_sid);
END
$$;

-- The attr result of a node (errno 0), or errno 2 alone when p_inode is absent.
CREATE FUNCTION _attr(p_inode bigint) RETURNS attr
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

CREATE FUNCTION _err(p_errno integer) RETURNS attr
LANGUAGE sql IMMUTABLE AS
$$ SELECT ROW(p_errno, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::attr $$;

CREATE FUNCTION _to_attr(n node) RETURNS attr
LANGUAGE sql IMMUTABLE AS $$
    SELECT ROW(0, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
               n.nlink, n.length, n.rdev, n.parent, n.tier, n.used)::attr
$$;

-- Logs change p_op of node p_inode (p_name: the xattr's name), with its owner.
CREATE FUNCTION _log_node_change(p_op text, p_inode bigint, p_name bytea DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO change (op, inode, name, uid, gid)
    SELECT p_op, n.inode, p_name, n.uid, n.gid FROM node n WHERE n.inode = p_inode;
END
$$;
