-- jfs 0.2.11 -> 0.2.12.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.12 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- write_slices takes p_durable: its commit then waits for the WAL flush, as
-- jfs.sync() does, so that a close or fsync in the 'fsync' durability mode
-- is one round trip. Its signature changed, so it is made again; the roles
-- that could call it keep that right (no jfs.grant_* call needed).

DO $upgrade$
BEGIN
    PERFORM pg_catalog.set_config('jfs.upgrade_write_slices_grantees', coalesce((
        SELECT pg_catalog.string_agg(a.grantee::text, ',')
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid = 'write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer)'::pg_catalog.regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0), ''), true);
END
$upgrade$;

DROP FUNCTION write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer);

CREATE FUNCTION write_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint DEFAULT NULL,
    p_set integer DEFAULT 0, p_mode integer DEFAULT NULL, p_uid bigint DEFAULT NULL,
    p_gid bigint DEFAULT NULL, p_atime bigint DEFAULT NULL, p_set_mtime bigint DEFAULT NULL,
    p_base_mode integer DEFAULT NULL, p_durable boolean DEFAULT false)
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
    v_attr_errno integer;
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
        v_attr_errno := CASE WHEN v_done = v_n AND coalesce(p_set, 0) <> 0 THEN 0 END;
    ELSE
        v_set := setattr(p_inode, v_change, p_mode, p_uid, p_gid, p_atime, p_set_mtime);
        IF v_set.errno = 0 THEN
            v_attr := v_set;
        END IF;
        v_attr_errno := v_set.errno;
    END IF;
    -- (last: _durability turned it off for 'fsync' mode)
    IF p_durable AND current_setting('synchronous_commit') = 'off' THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    END IF;
    RETURN QUERY SELECT v_done, v_attr, v_attr_errno;
END
$$;

REVOKE EXECUTE ON FUNCTION write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, boolean) FROM PUBLIC;

DO $upgrade$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY pg_catalog.string_to_array(
        pg_catalog.current_setting('jfs.upgrade_write_slices_grantees'), ',') LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, integer, integer, bigint, bigint, bigint, bigint, integer, boolean) TO %s',
                                  r::oid::pg_catalog.regrole);
    END LOOP;
END
$upgrade$;
