-- Privileges. Nothing in schema jfs is usable by PUBLIC. A DBA grants:
--   SELECT jfs.grant_client('jfs_client');  -- a mount: EXECUTE on every procedure but administration
--   SELECT jfs.grant_admin('jfs_admin');    -- also administration: format, quotas, tiers
--   SELECT jfs.grant_reader('jfs_reader');  -- people: SELECT on tables (not jfs.secret) + read functions
--                                           (STABLE/IMMUTABLE ones, helpers that views call included)
-- Procedures are SECURITY DEFINER with a pinned search_path, so a client
-- role changes the file system only through them, never by writing tables.

REVOKE ALL ON ALL TABLES IN SCHEMA jfs FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA jfs FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA jfs FROM PUBLIC;

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
CREATE FUNCTION grant_client(p_role name) RETURNS void
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
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION grant_client(name), grant_admin(name), grant_reader(name),
    admin_procedures(), _grant_procedures(name, boolean) FROM PUBLIC;
