-- What a file's chunks show: the byte ranges of data that its slices leave
-- in each chunk (a hole slice, id 0, takes its range away), for the space a
-- file uses (st_blocks), SEEK_DATA/SEEK_HOLE and compaction.

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
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT coalesce(sum(upper(r) - lower(r)), 0)::bigint FROM unnest(p_ranges) r);
END
$$;

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
