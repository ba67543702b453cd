-- Byte ranges of a file as a whole: zeroing them (fallocate PUNCH_HOLE and
-- ZERO_RANGE), copying them from another file by sharing its slices
-- (copy_file_range) and finding where data is (lseek SEEK_DATA/SEEK_HOLE).

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
    v_errno := _file_errno(n);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF p_keep_size AND p_offset >= n.length THEN
        RETURN _to_attr(n);   -- nothing of the file in the range: nothing changes
    END IF;
    IF p_keep_size THEN
        v_end := p_offset + least(p_length, n.length - p_offset);
    ELSE
        v_end := p_offset + p_length;
    END IF;
    IF v_end > n.length THEN
        v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true, v_end - n.length);
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
    errno := _file_errno(n);
    IF errno <> 0 THEN
        RETURN;
    ELSIF p_hole IS NULL THEN
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
    -- (the first of 2, 21, 22 either file meets)
    errno := least(nullif(_file_errno(src), 0), nullif(_file_errno(dst), 0));
    IF errno IS NOT NULL THEN
        RETURN;
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
        v_errno := _charge_space(p_dst, dst.uid, dst.gid, _space(v_end) - _space(dst.length), true,
                                 v_end - dst.length);
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
