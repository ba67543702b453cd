-- File layout: committing a written slice and reading a chunk's slices.

-- Appends a slice to chunk p_chunk_index of file p_inode: bytes
-- [p_slice_off, p_slice_off + p_len) of stored slice p_slice_id (of size
-- p_slice_size) now appear at [p_pos, p_pos + p_len) of the chunk, over
-- whatever was there. Called after the slice's blocks are in object storage.
-- Extends the length, sets mtime (p_mtime, default now) and ctime. The
-- slice id must be one alloc_ids handed out, committed nowhere yet and not
-- queued for deletion (EINVAL): each write's slice is committed once. A
-- slice ending at or past 2^57 bytes, the largest file, is EFBIG.
-- With p_defer, growth within the file's last 4 KiB unit is not added to
-- dir_stats but returned in `deferred`, for the caller to add after every
-- quota row it charges (write_slices: the lock order of _charge).
-- With p_inline, the slice is kept here (inline_data) instead of in object
-- storage: p_inline is what its one block's object would hold. Only for
-- a whole slice in chunk 0 of a file that is no longer than the volume's
-- inline_max after it, shorter than a block (it is one block), the bytes
-- at most inline_max plus 4 KiB (what compression and sealing may add);
-- else errno 7 (E2BIG), nothing
-- changed: the caller stores the block as an object and sends it again.
CREATE FUNCTION _write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint, p_defer boolean, p_inline bytea,
    OUT a attr, OUT deferred bigint)
LANGUAGE plpgsql AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    v_had bigint;
    n node;
BEGIN
    deferred := 0;
    IF p_chunk_index IS NULL OR p_chunk_index < 0 OR p_pos IS NULL OR p_pos < 0 OR p_len IS NULL OR p_len <= 0
       OR p_pos::bigint + p_len > _chunk_size() OR p_slice_id IS NULL OR p_slice_id <= 0
       OR p_slice_off IS NULL OR p_slice_off < 0 OR p_slice_size IS NULL
       OR p_slice_off::bigint + p_len > p_slice_size THEN
        a := _err(22);
        RETURN;
    ELSIF p_chunk_index::bigint * _chunk_size() + p_pos + p_len >= 144115188075855872 THEN
        -- (a file ends before 2^57, as setattr keeps it: the chunk index
        -- of its length must fit an integer)
        a := _err(27);
        RETURN;
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    v_errno := _file_errno(n);
    IF v_errno = 0 AND NOT _fresh_slice_id(p_slice_id) THEN
        v_errno := 22;
    END IF;
    IF v_errno <> 0 THEN
        a := _err(v_errno);
        RETURN;
    END IF;
    v_end := greatest(n.length, p_chunk_index::bigint * _chunk_size() + p_pos + p_len);
    IF p_inline IS NOT NULL AND (v_end > s.inline_max OR p_slice_off <> 0 OR p_len <> p_slice_size
                                 OR p_len >= s.block_size OR octet_length(p_inline) > s.inline_max + 4096) THEN
        a := _err(7);
        RETURN;
    END IF;
    IF p_defer AND _space(v_end) = _space(n.length) THEN
        deferred := v_end - n.length;
    ELSE
        -- a longer file must fit the quotas: refused before anything changes
        v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true, v_end - n.length);
        IF v_errno <> 0 THEN
            a := _err(v_errno);
            RETURN;
        END IF;
    END IF;
    -- (a concurrent commit of the same id makes this fail: the id is used once)
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    IF p_inline IS NOT NULL THEN
        INSERT INTO inline_data (slice_id, data) VALUES (p_slice_id, p_inline);
    END IF;
    -- the bytes that showed data under the new slice (none for an append)
    v_had := _range_size(_chunk_data(p_inode, p_chunk_index, p_pos, p_pos + p_len));
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, p_slice_off, p_len, p_pos);
    n.length := v_end; n.mtime := coalesce(p_mtime, v_now); n.ctime := v_now;
    n.used := n.used + p_len - v_had;
    UPDATE node SET length = v_end, mtime = n.mtime, ctime = v_now, used = n.used
     WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    a := _to_attr(n);
END
$$;

-- _write_slice of one slice (see there).
CREATE FUNCTION write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    w record;
BEGIN
    w := _write_slice(p_inode, p_chunk_index, p_pos, p_slice_id, p_slice_size, p_slice_off, p_len, p_mtime, false,
                      NULL);
    RETURN w.a;
END
$$;

-- Commits slices of one file in order, in one transaction and one round
-- trip (a flush of many small writes): as write_slice for each
-- (p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i]), up
-- to the first that fails, whose errno comes back in `a` (those before it
-- stay committed). Returns how many were committed and the file's
-- attributes after the last of them. At most 10000 slices (EINVAL).
--
-- When every slice is committed and p_set is not 0, setattr's change
-- (p_set, p_mode, p_uid, p_gid, p_atime, p_set_mtime; no size) follows in
-- the same transaction: a mount sends the chmod, chown and utimens it
-- answered while the file's writes were pending with their commit (cp -a's
-- sequence in one round trip). A mode is set only if the file's mode is
-- still p_base_mode (when given), the one the mount showed before its
-- chmod: a chmod made meanwhile by someone else came later and stands.
-- Its errno comes back in attr_errno (0: set, and `a` shows it; NULL: not
-- tried); a refused change leaves the slices committed.
--
-- p_inline[i], when p_inline is given and it is not NULL, keeps slice i in
-- the database instead of object storage (_write_slice says when it may:
-- errno 7 when not, for the caller to store it and send it again).
CREATE FUNCTION write_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint DEFAULT NULL,
    p_set integer DEFAULT 0, p_mode integer DEFAULT NULL, p_uid bigint DEFAULT NULL,
    p_gid bigint DEFAULT NULL, p_atime bigint DEFAULT NULL, p_set_mtime bigint DEFAULT NULL,
    p_base_mode integer DEFAULT NULL, p_inline bytea[] DEFAULT NULL)
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
       OR coalesce(cardinality(p_inline), v_n) <> v_n OR coalesce(p_set, 0) & 8 <> 0 THEN
        RETURN QUERY SELECT 0, _err(22), NULL::integer;
        RETURN;
    END IF;
    FOR i IN 1..v_n LOOP
        w := _write_slice(p_inode, p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i], p_mtime, true,
                          p_inline[i]);
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

-- The slices of one chunk in commit order: later rows shadow earlier ones
-- where they overlap. slice_id 0 is a hole (zeros). `inline` is the stored
-- block of a slice kept in the database (inline_data; NULL for one in
-- object storage), so a small file's bytes come with its slices. An error
-- row (errno <> 0) comes back alone when the inode does not exist or is
-- not a file.
CREATE FUNCTION read_chunk(p_inode bigint, p_chunk_index integer)
RETURNS TABLE (errno integer, pos integer, slice_id bigint, slice_size integer, slice_off integer, len integer,
               inline bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_type smallint;
BEGIN
    RETURN QUERY
        SELECT 0, s.pos, s.slice_id, s.slice_size, s.slice_off, s.len, i.data
          FROM slice s LEFT JOIN inline_data i ON i.slice_id = s.slice_id AND s.slice_id <> 0
         WHERE s.inode = p_inode AND s.chunk_index = p_chunk_index
         ORDER BY s.seq;
    IF NOT FOUND THEN
        SELECT n.type INTO v_type FROM node n WHERE n.inode = p_inode;
        IF v_type IS NULL OR v_type <> 1 THEN
            RETURN QUERY SELECT CASE WHEN v_type IS NULL THEN 2 WHEN v_type = 2 THEN 21 ELSE 22 END,
                                NULL::integer, NULL::bigint, NULL::integer, NULL::integer, NULL::integer,
                                NULL::bytea;
        END IF;
    END IF;
END
$$;

-- The slices kept in the database (inline_data), their sizes and stored blocks,
-- in id order after p_after, at most p_limit: what `jfs dump` writes as
-- objects, so that a dump names only blocks that exist.
CREATE FUNCTION inline_blocks(p_after bigint, p_limit integer)
RETURNS TABLE (slice_id bigint, size integer, data bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT i.slice_id, r.size, i.data FROM inline_data i JOIN slice_ref r ON r.slice_id = i.slice_id
     WHERE i.slice_id > p_after ORDER BY i.slice_id LIMIT p_limit
$$;

-- How much the database keeps of files' bytes (inline_data): slices,
-- stored bytes, and the files that use them; and the volume's inline_max.
CREATE FUNCTION inline_usage(OUT slices bigint, OUT bytes bigint, OUT files bigint, OUT inline_max integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT (SELECT count(*) FROM inline_data), (SELECT coalesce(sum(octet_length(data)), 0) FROM inline_data),
           (SELECT count(DISTINCT s.inode) FROM slice s JOIN inline_data i ON i.slice_id = s.slice_id),
           (SELECT s.inline_max FROM setting s)
$$;

-- Sets the length up to which files keep their bytes in the database
-- (administration; 0: none; at most 131072; NULL leaves it). Applies to
-- writes from then on: what was kept stays until rewritten. Returns the
-- setting.
CREATE FUNCTION set_inline_max(p_bytes integer DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_max integer;
BEGIN
    IF p_bytes < 0 OR p_bytes > 131072 THEN
        RAISE EXCEPTION 'jfs.set_inline_max: bytes from 0 (off) to 131072, not %', p_bytes
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET inline_max = coalesce(p_bytes, s.inline_max) RETURNING s.inline_max INTO v_max;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_inline_max: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_max;
END
$$;

-- Counts slices queued for deletion, or no longer, in delete_usage (the
-- row of the caller's stripe: any stripe's row may go below 0, their sum
-- is exact), from a statement's transition table: statement triggers on
-- delslice, so no writer of it can forget (a restore of a dump neither). (The version this transaction
-- wrote last of the row is updated directly: see _last_version.)
CREATE FUNCTION _count_delete_queue() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sign integer := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
    v_slices bigint;
    v_bytes bigint;
    v_stripe smallint;
    v_row text;
    v_last tid;
    v_ctid tid;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT count(*), coalesce(sum(q.size), 0) INTO v_slices, v_bytes FROM queued q;
    ELSE
        SELECT count(*), coalesce(sum(q.size), 0) INTO v_slices, v_bytes FROM unqueued q;
    END IF;
    IF v_slices = 0 THEN
        RETURN NULL;
    END IF;
    v_stripe := _stripe();
    v_row := v_stripe::text;
    v_last := _last_version('delete_usage', v_row);
    IF v_last IS NOT NULL THEN
        UPDATE delete_usage u SET slices = u.slices + v_sign * v_slices, bytes = u.bytes + v_sign * v_bytes
         WHERE u.ctid = v_last AND u.stripe = v_stripe
        RETURNING u.ctid INTO v_ctid;
    END IF;
    IF v_ctid IS NULL THEN
        INSERT INTO delete_usage AS u (stripe, slices, bytes) VALUES (v_stripe, v_sign * v_slices, v_sign * v_bytes)
            ON CONFLICT (stripe) DO UPDATE SET slices = u.slices + excluded.slices, bytes = u.bytes + excluded.bytes
        RETURNING u.ctid INTO v_ctid;
    END IF;
    PERFORM _note_version('delete_usage', v_row, v_ctid);
    RETURN NULL;
END
$$;

CREATE TRIGGER delslice_queued AFTER INSERT ON delslice REFERENCING NEW TABLE AS queued
    FOR EACH STATEMENT EXECUTE FUNCTION _count_delete_queue();
CREATE TRIGGER delslice_unqueued AFTER DELETE ON delslice REFERENCING OLD TABLE AS unqueued
    FOR EACH STATEMENT EXECUTE FUNCTION _count_delete_queue();

-- Whether more bytes wait for deletion than the volume's cap allows
-- (setting.delete_queue_cap; never with no cap).
CREATE FUNCTION _delete_queue_over_cap() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.delete_queue_cap > 0
                   AND (SELECT coalesce(sum(u.bytes), 0) FROM delete_usage u) > s.delete_queue_cap
              FROM setting s);
END
$$;

-- Slices whose last reference went away at least p_min_age ago, and at
-- least the volume's retain_deleted, for a mount or `jfs gc --delete` to
-- delete their objects (then forget_delslices); p_min_age counts for
-- nothing while more bytes wait than the volume's delete_queue_cap (the
-- oldest go first; a mount deletes them once their freeing commits are
-- durable). Several mounts may get the same rows; deleting an object
-- twice is harmless.
CREATE FUNCTION pending_delslices(p_min_age interval DEFAULT '0', p_limit integer DEFAULT 1000)
RETURNS TABLE (slice_id bigint, size integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT d.slice_id, d.size FROM delslice d
     WHERE d.queued_at <= now() - greatest(CASE WHEN _delete_queue_over_cap() THEN interval '0' ELSE p_min_age END,
                                           (SELECT s.retain_deleted FROM setting s))
     ORDER BY d.queued_at, d.slice_id
     LIMIT least(greatest(p_limit, 1), 100000)
$$;

-- What waits for deletion: slices and bytes (the store still holds them:
-- statfs counts them as used), since when the oldest waits, and the
-- volume's cap (0: none) and retain_deleted. For jfs status.
CREATE FUNCTION delete_queue(OUT slices bigint, OUT bytes bigint, OUT oldest timestamptz, OUT cap bigint,
                             OUT retain interval)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT coalesce(sum(u.slices), 0)::bigint, coalesce(sum(u.bytes), 0)::bigint,
           (SELECT min(d.queued_at) FROM delslice d), s.delete_queue_cap, s.retain_deleted
      FROM setting s LEFT JOIN delete_usage u ON true
     GROUP BY s.delete_queue_cap, s.retain_deleted
$$;

-- Sets the cap on the bytes waiting for deletion (administration; 0: no
-- cap; NULL leaves it). Returns the setting.
CREATE FUNCTION set_delete_queue_cap(p_bytes bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_cap bigint;
BEGIN
    IF p_bytes < 0 THEN
        RAISE EXCEPTION 'jfs.set_delete_queue_cap: bytes >= 0 (0: no cap), not %', p_bytes
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET delete_queue_cap = coalesce(p_bytes, s.delete_queue_cap) RETURNING s.delete_queue_cap INTO v_cap;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_delete_queue_cap: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_cap;
END
$$;

-- How long freed slices' objects are kept (at the least) before mounts and
-- `jfs gc --delete` delete them: set it beyond the database's
-- point-in-time-recovery window (base backups + WAL archive), and restoring
-- the database to any moment in that window gives a file system whose
-- every block still exists (README, "Point-in-time restore"). Returns the
-- setting; NULL leaves it as it is.
CREATE FUNCTION set_retain_deleted(p_retain interval DEFAULT NULL) RETURNS interval
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_retain interval;
BEGIN
    IF p_retain < interval '0' THEN
        RAISE EXCEPTION 'jfs.set_retain_deleted: a duration >= 0, not %', p_retain
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET retain_deleted = coalesce(p_retain, s.retain_deleted) RETURNING s.retain_deleted INTO v_retain;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_retain_deleted: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_retain;
END
$$;

-- How many freed slices wait in the queue (jfs gc; pending_delslices
-- gives them in pages).
CREATE FUNCTION delslice_count() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT count(*) FROM delslice
$$;

-- The objects of these slices are deleted: drop them from the queue. Only
-- slices kept as long as the volume retains freed objects are dropped (those
-- pending_delslices gives): no caller can make the queue forget a slice
-- before its objects may go.
CREATE FUNCTION forget_delslices(p_slice_ids bigint[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM _begin();
    DELETE FROM delslice d
     WHERE d.slice_id = ANY (p_slice_ids)
       AND d.queued_at <= now() - (SELECT s.retain_deleted FROM setting s);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- For `jfs gc`: what the database says of each slice id found in object
-- storage: 'referenced' (slice rows use it), 'pending' (freed, queued in
-- delslice), or 'unreferenced' (no row knows it: a client stored blocks and
-- died before committing them, or the slice was forgotten after deletion).
CREATE FUNCTION slice_states(p_slice_ids bigint[])
RETURNS TABLE (slice_id bigint, state text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT u.id,
           CASE WHEN EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = u.id) THEN 'referenced'
                WHEN EXISTS (SELECT 1 FROM delslice d WHERE d.slice_id = u.id) THEN 'pending'
                ELSE 'unreferenced' END
      FROM unnest(p_slice_ids) u(id)
$$;
