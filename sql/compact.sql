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
-- file is gone; 22 for bad arguments (a slice id not fresh: see write_slice).
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
    ELSIF NOT _fresh_slice_id(p_slice_id) THEN
        RETURN 22;
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
