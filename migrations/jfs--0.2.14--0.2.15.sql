-- jfs 0.2.14 -> 0.2.15.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.15 makes from sql/:
-- tests/upgrade/check.sh compares the two (initial privileges too), and
-- also takes the withdrawn 0.2.12 below through it.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The version name 0.2.12 was used twice. A first 0.2.12 (commit 9ce8943,
-- withdrawn before it landed, so only a development cluster can hold it)
-- made write_slices again with a last parameter, p_durable, and granted it
-- to the roles that could call the old one. The 0.2.12 that was released
-- keeps 0.2.11's write_slices and only repairs initial privileges, so a
-- volume of the first one went on reporting 0.2.12, 0.2.13 and 0.2.14
-- with a schema that differs from a fresh install of each.
--
-- On such a volume write_slices takes its released signature again: the
-- roles that could call the withdrawn one may call it, as before.
DO $upgrade$
DECLARE
    v_withdrawn pg_catalog.regprocedure := pg_catalog.to_regprocedure(
        'write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, boolean)');
BEGIN
    PERFORM pg_catalog.set_config('jfs.upgrade_write_slices_grantees', '', true);
    IF v_withdrawn IS NOT NULL THEN
        PERFORM pg_catalog.set_config('jfs.upgrade_write_slices_grantees', coalesce((
            SELECT pg_catalog.string_agg(a.grantee::text, ',')
              FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
             WHERE p.oid = v_withdrawn AND a.privilege_type = 'EXECUTE'
               AND a.grantee <> p.proowner AND a.grantee <> 0), ''), true);
        EXECUTE pg_catalog.format('DROP FUNCTION %s', v_withdrawn);
    END IF;
END
$upgrade$;

CREATE OR REPLACE FUNCTION write_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint DEFAULT NULL,
    p_set integer DEFAULT 0, p_mode integer DEFAULT NULL, p_uid bigint DEFAULT NULL,
    p_gid bigint DEFAULT NULL, p_atime bigint DEFAULT NULL, p_set_mtime bigint DEFAULT NULL,
    p_base_mode integer DEFAULT NULL)
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
       OR coalesce(p_set, 0) & 8 <> 0 THEN
        RETURN QUERY SELECT 0, _err(22), NULL::integer;
        RETURN;
    END IF;
    FOR i IN 1..v_n LOOP
        w := _write_slice(p_inode, p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i], p_mtime, true);
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

DO $upgrade$
DECLARE
    v_grantees text := pg_catalog.current_setting('jfs.upgrade_write_slices_grantees');
    r text;
BEGIN
    -- made again above (a released volume's own is only replaced, its
    -- privileges untouched)
    IF pg_catalog.has_function_privilege('public', 'write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer)', 'EXECUTE') THEN
        REVOKE EXECUTE ON FUNCTION write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer) FROM PUBLIC;
    END IF;
    FOREACH r IN ARRAY pg_catalog.string_to_array(v_grantees, ',') LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer) TO %s',
                                  r::oid::pg_catalog.regrole);
    END LOOP;
END
$upgrade$;

-- ---------------------------------------------------------------------------
-- The initial privileges of jfs's objects are their owner's alone, as a
-- fresh install makes them: 0.2.12's repair, again, for the grants the
-- withdrawn 0.2.12 (and the block above) made inside ALTER EXTENSION,
-- which pg_dump would leave out of a dump. It changes nothing where
-- nothing needs it.
UPDATE pg_catalog.pg_init_privs i
   SET initprivs = ARRAY(SELECT item FROM pg_catalog.unnest(i.initprivs) AS item
                          WHERE (SELECT a.grantee = a.grantor
                                   FROM pg_catalog.aclexplode(ARRAY[item]) AS a LIMIT 1))
 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = i.classoid AND d.objid = i.objoid)
   AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(i.initprivs) AS a WHERE a.grantee <> a.grantor);

-- PostgreSQL 17 and later also record each role named in an initial
-- privilege in pg_shdepend (deptype 'i'), which keeps DROP ROLE from
-- dropping it: those of the roles taken out above go too.
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
