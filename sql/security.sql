-- Privileges. Nothing in schema jfs is usable by PUBLIC. A DBA grants:
--   SELECT jfs.grant_client('jfs_client');  -- a mount: EXECUTE on every procedure
--   SELECT jfs.grant_reader('jfs_reader');  -- people: SELECT on tables (not jfs.secret) + read functions
-- Procedures are SECURITY DEFINER with a pinned search_path, so a client
-- role changes the file system only through them, never by writing tables.

REVOKE ALL ON ALL TABLES IN SCHEMA jfs FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA jfs FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA jfs FROM PUBLIC;

CREATE FUNCTION grant_client(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
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
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef AND p.provolatile IN ('s', 'i')
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION grant_client(name), grant_reader(name) FROM PUBLIC;
