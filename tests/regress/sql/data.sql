-- write_slice / read_chunk: slices appended per chunk, length and mtime, refcounts
\ir tests/regress/fresh_volume.sql
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT mtime AS m0 FROM jfs.getattr(:f) \gset
SELECT jfs.alloc_ids('slice', 10) AS s \gset
-- a first write, then an overwrite in the middle, then an append in the next chunk
SELECT errno, length, mtime >= :m0 AS mtime_moved FROM jfs.write_slice(:f, 0, 0, :s, 1048576, 0, 1048576);
SELECT errno, length FROM jfs.write_slice(:f, 0, 4096, :s + 1, 8192, 0, 8192);
SELECT errno, length FROM jfs.write_slice(:f, 1, 0, :s + 2, 65536, 0, 65536);
SELECT errno, length FROM jfs.write_slice(:f, 0, 0, :s + 3, 4096, 0, 100);
SELECT pos, slice_id - :s AS slice, slice_size, slice_off, len FROM jfs.read_chunk(:f, 0);
SELECT pos, slice_id - :s AS slice, len FROM jfs.read_chunk(:f, 1);
SELECT count(*) AS rows FROM jfs.read_chunk(:f, 5);
-- an explicit mtime (a client flushing a write that happened earlier)
SELECT errno, mtime FROM jfs.write_slice(:f, 0, 0, :s + 4, 4096, 0, 4096, 1700000000000000001);
-- a slice id is committed once: another range of it is EINVAL (a client could
-- otherwise show any file's slice in its own), one reference stays
SELECT errno FROM jfs.write_slice(:f, 2, 0, :s + 5, 8192, 0, 4096);
SELECT errno FROM jfs.write_slice(:f, 2, 4096, :s + 5, 8192, 4096, 4096);
SELECT slice_id - :s AS slice, size, refs FROM jfs.slice_ref WHERE slice_id = :s + 5;
-- bad slices are EINVAL: past the chunk, past the slice, empty, id 0
SELECT errno FROM jfs.write_slice(:f, 0, 67108860, :s + 6, 8, 0, 8);
SELECT errno FROM jfs.write_slice(:f, 0, 0, :s + 6, 8, 4, 8);
SELECT errno FROM jfs.write_slice(:f, 0, 0, :s + 6, 8, 0, 0);
SELECT errno FROM jfs.write_slice(:f, 0, 0, 0, 8, 0, 8);
SELECT errno FROM jfs.write_slice(:f, -1, 0, :s + 6, 8, 0, 8);
-- only regular files hold data
SELECT errno FROM jfs.write_slice(1, 0, 0, :s + 6, 8, 0, 8);
SELECT inode AS p FROM jfs.mknod(1, 'p', 4, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:p, 0, 0, :s + 6, 8, 0, 8);
SELECT errno FROM jfs.write_slice(999, 0, 0, :s + 6, 8, 0, 8);
SELECT errno FROM jfs.read_chunk(1, 0);
SELECT errno FROM jfs.read_chunk(999, 0);
-- usage follows the length, in 4 KiB units
SELECT length, (SELECT sum(space) FROM jfs.quota_usage) AS used_space FROM jfs.getattr(:f);
-- deleting the file releases every reference once and queues each slice once
SELECT errno, nlink FROM jfs.unlink(1, 'f');
SELECT slice_id - :s AS slice, size FROM jfs.delslice ORDER BY slice_id;
SELECT count(*) AS refs, (SELECT count(*) FROM jfs.slice) AS slices FROM jfs.slice_ref;
SELECT * FROM jfs.fsck();
-- the queue of objects to delete, as a mount drains it
SELECT count(*) AS pending FROM jfs.pending_delslices();
SELECT count(*) AS not_yet FROM jfs.pending_delslices('1 hour');
SELECT slice_id - :s AS slice, size FROM jfs.pending_delslices(p_limit => 2);
SELECT jfs.forget_delslices(ARRAY[:s, :s + 1, 999999]);
SELECT count(*) AS pending FROM jfs.pending_delslices();
-- the queue's size is counted whole (pending_delslices pages at most 100,000)
INSERT INTO jfs.delslice (slice_id, size) SELECT 10000000 + g, 1 FROM generate_series(1, 100005) g;
SELECT count(*) AS one_page FROM jfs.pending_delslices('0', 2147483647);
SELECT jfs.delslice_count() AS queued;
DELETE FROM jfs.delslice WHERE slice_id > 10000000;
SELECT name, storage, block_size, meta_durability FROM jfs.volume();
SELECT * FROM jfs.fsck();
-- write_slices: a flush's slices in one call, in order, up to the first that
-- fails (the ones before it stay committed)
SELECT jfs.alloc_ids('slice', 10) AS b \gset
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0) \gset
SELECT committed, (a).errno, (a).length FROM jfs.write_slices(:g, '{0,0,1}', '{0,100,0}',
    ARRAY[:b, :b + 1, :b + 2], '{4096,50,10}', '{0,0,0}', '{4096,50,10}');
SELECT chunk_index, pos, slice_id - :b AS slice, len FROM jfs.slice WHERE inode = :g ORDER BY seq;
SELECT committed, (a).errno, (a).length FROM jfs.write_slices(:g, '{0,0,0}', '{0,0,0}',
    ARRAY[:b + 3, :b + 1, :b + 4], '{10,10,10}', '{0,0,0}', '{10,10,10}');
SELECT count(*) AS slices, (SELECT length FROM jfs.node WHERE inode = :g) FROM jfs.slice WHERE inode = :g;
-- arrays of different lengths, none, or too many: EINVAL
SELECT committed, (a).errno FROM jfs.write_slices(:g, '{0}', '{0,0}', ARRAY[:b + 5], '{1}', '{0}', '{1}');
SELECT committed, (a).errno FROM jfs.write_slices(:g, '{}', '{}', '{}', '{}', '{}', '{}');
SELECT committed, (a).errno FROM jfs.write_slices(:g, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT committed, (a).errno FROM jfs.write_slices(:g, array_fill(0, '{10001}'), array_fill(0, '{10001}'),
    array_fill(:b + 5, '{10001}'), array_fill(1, '{10001}'), array_fill(0, '{10001}'), array_fill(1, '{10001}'));
SELECT * FROM jfs.fsck();
-- slices kept in the database (0.2.32): only whole, in chunk 0, of a file
-- no longer than inline_max after them, shorter than a block, the bytes at
-- most inline_max + 4096; else errno 7 (E2BIG) and nothing changes
SELECT inline_max FROM jfs.volume();
SELECT jfs.set_inline_max(4096) AS inline_max;
SELECT jfs.set_inline_max(-1);
SELECT jfs.set_inline_max(131073);
SELECT jfs.alloc_ids('slice', 20) AS k \gset
SELECT inode AS h FROM jfs.mknod(1, 'h', 1, 420, 0, 0) \gset
SELECT committed, (a).errno, (a).length FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[:k], '{5}', '{0}', '{5}',
    p_inline => ARRAY['\x68656c6c6f'::bytea]);
SELECT pos, slice_id - :k AS slice, len, inline FROM jfs.read_chunk(:h, 0);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{4000}', ARRAY[:k + 1], '{200}', '{0}', '{200}',
    p_inline => ARRAY[decode(repeat('00', 200), 'hex')]);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{1}', '{0}', ARRAY[:k + 1], '{5}', '{0}', '{5}',
    p_inline => ARRAY['\x00'::bytea]);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[:k + 1], '{10}', '{5}', '{5}',
    p_inline => ARRAY['\x00'::bytea]);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[:k + 1], '{5}', '{0}', '{5}',
    p_inline => ARRAY[decode(repeat('00', 8193), 'hex')]);
-- more bytes than slices, or fewer; ids not handed out: EINVAL
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[:k + 1], '{5}', '{0}', '{5}',
    p_inline => ARRAY['\x00'::bytea, '\x00'::bytea]);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[9223372036854775807], '{1}', '{0}', '{1}',
    p_inline => ARRAY['\x00'::bytea]);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[-1], '{1}', '{0}', '{1}',
    p_inline => ARRAY['\x00'::bytea]);
-- an object slice and a kept one in one call; a file past the limit keeps nothing new
SELECT committed, (a).errno, (a).length FROM jfs.write_slices(:h, '{0,0}', '{5,0}', ARRAY[:k + 2, :k + 3],
    '{10,2}', '{0,0}', '{10,2}', p_inline => ARRAY[NULL, '\x6869'::bytea]);
SELECT errno, length FROM jfs.write_slice(:h, 0, 0, :k + 4, 8192, 0, 8192);
SELECT committed, (a).errno FROM jfs.write_slices(:h, '{0}', '{0}', ARRAY[:k + 5], '{1}', '{0}', '{1}',
    p_inline => ARRAY['\x00'::bytea]);
SELECT slice_id - :k AS slice, size FROM jfs.inline_blocks(0, 10);
SELECT slice_id - :k AS slice FROM jfs.inline_blocks(:k, 1);
SELECT slices, bytes, files, inline_max FROM jfs.inline_usage();
SELECT count(*) AS live_objects_to_check FROM jfs.live_slices(:k - 1, 100) WHERE slice_id >= :k;
-- the file goes: its kept slices with it
SELECT errno FROM jfs.unlink(1, 'h');
SELECT jfs.free_unlinked(10000, '0 seconds') >= 0 AS freed;
SELECT count(*) AS kept FROM jfs.inline_data WHERE slice_id >= :k;
SELECT jfs.set_inline_max(0) AS inline_max;
SELECT * FROM jfs.fsck();
