-- jfs 0.2.2 -> 0.2.3.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.3 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- A flush of many small writes commits its slices in one call (sql/data.sql).

-- Commits slices of one file in order, in one transaction and one round
-- trip (a flush of many small writes): as write_slice for each
-- (p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i]), up
-- to the first that fails, whose errno comes back in `a` (those before it
-- stay committed). Returns how many were committed and the file's
-- attributes after the last of them. At most 10000 slices (EINVAL).
CREATE FUNCTION write_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint DEFAULT NULL)
RETURNS TABLE (committed integer, a attr)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_ids), 0);
    v_attr attr;
BEGIN
    IF v_n = 0 OR v_n > 10000 OR coalesce(cardinality(p_chunks), -1) <> v_n
       OR coalesce(cardinality(p_pos), -1) <> v_n OR coalesce(cardinality(p_sizes), -1) <> v_n
       OR coalesce(cardinality(p_offs), -1) <> v_n OR coalesce(cardinality(p_lens), -1) <> v_n THEN
        RETURN QUERY SELECT 0, _err(22);
        RETURN;
    END IF;
    FOR i IN 1..v_n LOOP
        v_attr := write_slice(p_inode, p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i], p_mtime);
        IF v_attr.errno <> 0 THEN
            RETURN QUERY SELECT i - 1, v_attr;
            RETURN;
        END IF;
    END LOOP;
    RETURN QUERY SELECT v_n, v_attr;
END
$$;

REVOKE EXECUTE ON FUNCTION write_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint)
    FROM PUBLIC;
