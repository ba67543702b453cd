-- Privileges. Nothing in schema jfs is usable by PUBLIC. A DBA grants:
--   SELECT jfs.grant_client('jfs_client');  -- a mount: EXECUTE on every procedure but administration
--   SELECT jfs.grant_client('jfs_guest', p_read_only => true, p_root_squash => '65534:65534');
--                                           -- a mount with limits the procedures enforce
--   SELECT jfs.grant_admin('jfs_admin');    -- also administration: format, quotas, tiers
--   SELECT jfs.grant_reader('jfs_reader');  -- people: SELECT on tables (not jfs.secret) + read functions
--                                           (STABLE/IMMUTABLE ones, helpers that views call included,
--                                           those of administration not: fsck, check_quota)
-- Procedures are SECURITY DEFINER with a pinned search_path, so a client
-- role changes the file system only through them, never by writing tables.

REVOKE ALL ON ALL TABLES IN SCHEMA jfs FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA jfs FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA jfs FROM PUBLIC;

-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, check and repair the volume (fsck, check_quota: full scans
-- no client need run), keep read-only roles' store keys, cap the bytes
-- waiting for deletion, make a database a shard and add it to the map, make
-- and check shard roots (removing one is an rmdir: write_procedures), set
-- how long a file may be and keep its bytes in the database.
CREATE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap',
             'shard_init', 'shard_add', 'shard_root_make', 'shard_root_link', 'shard_links',
             'shard_roots', 'set_dir_quota', 'delete_dir_quota', 'set_inline_max']::name[];

-- The procedures that change the file system (its names, attributes and
-- data, the trash, the change log, the queue of freed objects, backups,
-- other mounts' dead sessions), and asking for a directory's lease: not
-- granted to a read-only client role. Such a role reads (past leases),
-- keeps its own session, locks and files held open, and calls sync.
CREATE FUNCTION write_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['mknod', 'symlink', 'link', 'unlink', 'rmdir', 'rename', 'setattr', 'set_acl',
             'setxattr', 'removexattr', 'write_slice', 'write_slices', 'zero_range', 'copy_range',
             'batch_unlink', 'rmr', 'clone_node', 'clone', 'compact_chunk', 'restore', 'trash_purge',
             'changelog_prune', 'free_unlinked', 'forget_delslices', 'alloc_ids', 'backup_claim',
             'backup_release', 'session_cleanup', 'take_lease', 'lease_unlink', 'lease_commit',
             'mknod_with_slices', 'want_lease', 'touch_atime', 'create_many', 'shard_root_remove',
             'shard_root_unlink', 'gateway_dir_make', 'gateway_dir_link']::name[];

-- EXECUTE on every procedure (SECURITY DEFINER function) to p_role, those
-- of administration only when p_admin; when p_read_only, those that write
-- are revoked instead.
CREATE FUNCTION _grant_procedures(p_role name, p_admin boolean, p_read_only boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    FOR f IN SELECT p.oid::regprocedure AS proc, p.proname = ANY (jfs.write_procedures()) AS writes
               FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef
                AND (p_admin OR p.proname <> ALL (jfs.admin_procedures()))
              ORDER BY p.oid
    LOOP
        IF p_read_only AND f.writes THEN
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', f.proc, p_role);
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.proc, p_role);
        END IF;
    END LOOP;
END
$$;

-- A mount's role: every procedure but those of administration, and its
-- limits (jfs.client_role), which the procedures enforce whatever the
-- mount's own options: p_read_only, no procedure that writes
-- (write_procedures()); p_root_squash 'UID:GID', owner ids 0 of its calls
-- become UID:GID and it gives no node to uid or gid 0; p_all_squash
-- 'UID:GID', every owner id does and it gives no node away ('' ends a
-- squash). A limit not given stays as the role has it, so running this
-- again after ALTER EXTENSION jfs UPDATE keeps them.
CREATE FUNCTION grant_client(p_role name, p_read_only boolean DEFAULT NULL,
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

-- The limits the caller's login role is under (jfs.grant_client; those of
-- the roles it is a member of count too, a superuser has none), for a
-- mount to apply locally.
CREATE FUNCTION client_limits(OUT read_only boolean, OUT squash text, OUT squash_uid bigint, OUT squash_gid bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT _caller_read_only(), q.kind, q.uid, q.gid FROM _caller_squash() q
$$;

-- An administrator's role: every procedure, and no limits.
CREATE FUNCTION grant_admin(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jfs._grant_procedures(p_role, true, false);
    DELETE FROM jfs.client_role c WHERE c.role = p_role;
    UPDATE jfs.setting SET squash_roles = jfs._some_role_squashed();
END
$$;

CREATE FUNCTION grant_reader(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    EXECUTE pg_catalog.format('GRANT SELECT ON ALL TABLES IN SCHEMA jfs TO %I', p_role);
    EXECUTE pg_catalog.format('REVOKE SELECT ON jfs.secret FROM %I', p_role);
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.provolatile IN ('s', 'i')
                AND p.proname <> ALL (jfs.admin_procedures())
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION grant_client(name, boolean, text, text), grant_admin(name), grant_reader(name),
    admin_procedures(), write_procedures(), client_limits(), _grant_procedures(name, boolean, boolean) FROM PUBLIC;
