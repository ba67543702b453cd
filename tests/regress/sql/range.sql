-- byte ranges: zero_range (fallocate PUNCH_HOLE / ZERO_RANGE), seek_data (SEEK_DATA / SEEK_HOLE), copy_range (copy_file_range sharing slices)
\ir tests/regress/fresh_volume.sql
\set chunk 67108864
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT jfs.alloc_ids('slice', 10) AS s \gset
-- f: 1 MiB of data at 0 (slice 0), 64 KiB at the start of chunk 1 (slice 1)
SELECT errno FROM jfs.write_slice(:f, 0, 0, :s, 1048576, 0, 1048576);
SELECT errno, length - :chunk AS past_chunk_0 FROM jfs.write_slice(:f, 1, 0, :s + 1, 65536, 0, 65536);
-- used (st_blocks) counts the bytes slices show: 1 MiB + 64 KiB of a 64 MiB + 64 KiB file
SELECT used FROM jfs.getattr(:f);
-- where the data is
SELECT errno, found_at FROM jfs.seek_data(:f, 0, false);
SELECT errno, found_at FROM jfs.seek_data(:f, 0, true) AS first_hole;
SELECT errno, found_at - :chunk AS in_chunk_1 FROM jfs.seek_data(:f, 1048576, false);
SELECT errno, found_at - :chunk AS end_of_file FROM jfs.seek_data(:f, :chunk, true);
SELECT errno, found_at FROM jfs.seek_data(:f, :chunk + 65536, false) AS at_the_end;
SELECT errno, found_at FROM jfs.seek_data(:f, -1, false) AS negative;
-- punch a hole in the middle of slice 0: a hole row, the length stays
SELECT errno, length - :chunk AS past_chunk_0 FROM jfs.zero_range(:f, 4096, 8192, true);
SELECT pos, slice_id - :s AS slice, slice_off, len FROM jfs.read_chunk(:f, 0);
SELECT used AS used_less_8192 FROM jfs.getattr(:f);
SELECT errno, found_at FROM jfs.seek_data(:f, 0, true) AS hole_at;
SELECT errno, found_at FROM jfs.seek_data(:f, 4096, false) AS data_again_at;
SELECT errno, found_at FROM jfs.seek_data(:f, 5000, true) AS inside_the_hole;
-- punching all of slice 0's range drops it (and the hole row): its reference goes, it is queued for deletion
SELECT errno FROM jfs.zero_range(:f, 0, 2097152, true);
SELECT count(*) AS chunk_0_rows FROM jfs.read_chunk(:f, 0);
SELECT used AS only_chunk_1 FROM jfs.getattr(:f);
SELECT slice_id - :s AS queued FROM jfs.delslice;
SELECT errno, found_at - :chunk AS first_data FROM jfs.seek_data(:f, 0, false);
SELECT errno, found_at FROM jfs.seek_data(:f, 0, true) AS hole_at_0;
-- KEEP_SIZE stops at the end; ZERO_RANGE without it makes the file longer (zeros)
SELECT errno, length - :chunk AS past_chunk_0 FROM jfs.zero_range(:f, :chunk + 65526, 100, true);
SELECT pos, slice_id - :s AS slice, len FROM jfs.read_chunk(:f, 1);
SELECT errno, found_at - :chunk AS hole_at FROM jfs.seek_data(:f, :chunk, true);
SELECT errno, length - :chunk AS past_chunk_0 FROM jfs.zero_range(:f, :chunk + 65000, 4096, false);
SELECT errno, found_at - :chunk AS hole_at FROM jfs.seek_data(:f, :chunk, true);
SELECT length - :chunk AS past_chunk_0, (SELECT sum(space) FROM jfs.quota_usage) - 4096 - :chunk AS space_past_chunk_0 FROM jfs.getattr(:f);
-- a whole chunk inside the range: its rows go without a hole row
SELECT errno FROM jfs.write_slice(:f, 2, 0, :s + 2, 4096, 0, 4096);
SELECT errno FROM jfs.zero_range(:f, :chunk * 2, :chunk, true);
SELECT count(*) AS chunk_2_rows FROM jfs.read_chunk(:f, 2);
SELECT errno, found_at - 2 * :chunk AS hole_to_end FROM jfs.seek_data(:f, :chunk * 2, true);
SELECT used, (SELECT used FROM jfs.lookup(1, 'f')) AS by_lookup FROM jfs.getattr(:f);
-- bad input: no such file, a directory, a fifo, bad ranges, past the largest file
SELECT inode AS p FROM jfs.mknod(1, 'p', 4, 420, 0, 0) \gset
SELECT (jfs.zero_range(999, 0, 1, true)).errno AS missing, (jfs.zero_range(1, 0, 1, true)).errno AS dir,
       (jfs.zero_range(:p, 0, 1, true)).errno AS fifo, (jfs.zero_range(:f, -1, 1, true)).errno AS negative,
       (jfs.zero_range(:f, 0, 0, true)).errno AS empty, (jfs.zero_range(:f, 144115188075855870, 10, false)).errno AS too_far;
SELECT (jfs.seek_data(999, 0, true)).errno AS missing, (jfs.seek_data(1, 0, true)).errno AS dir,
       (jfs.seek_data(:p, 0, true)).errno AS fifo;
-- KEEP_SIZE past the end changes nothing (not even times); any length may be asked
SELECT mtime AS m_before FROM jfs.getattr(:f) \gset
SELECT errno, mtime = :m_before AS unchanged FROM jfs.zero_range(:f, 144115188075855000, 100, true);
SELECT errno, length - :chunk * 2 AS past_chunk_1 FROM jfs.zero_range(:f, :chunk * 2 + 10, 9223372036854775000, true);
-- the last chunk (index 2^31 - 1): a file may reach into it and be cut inside it
SELECT inode AS big FROM jfs.mknod(1, 'big', 1, 420, 0, 0) \gset
SELECT errno, length FROM jfs.setattr(:big, 8, p_length => 144115188075855800);
SELECT errno FROM jfs.write_slice(:big, 2147483647, 67108000, :s + 4, 100, 0, 100);
SELECT errno, length FROM jfs.setattr(:big, 8, p_length => 144115188075855700);
SELECT chunk_index, pos, slice_id - :s AS slice, len FROM jfs.slice WHERE inode = :big ORDER BY seq;
SELECT errno, used FROM jfs.zero_range(:big, 144115188075855000, 10, false);
SELECT errno, length FROM jfs.setattr(:big, 8, p_length => 0);
SELECT * FROM jfs.fsck();
-- copy_range: g gets f's slices at offset 100 (rows cut at g's chunk ends), no bytes move
DELETE FROM jfs.delslice;
SELECT errno FROM jfs.write_slice(:f, 0, 0, :s + 3, 67108864, 0, 67108864);
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0) \gset
SELECT length AS f_length FROM jfs.getattr(:f) \gset
SELECT errno, copied = :f_length AS all_of_f, length = :f_length + 100 AS g_length
  FROM jfs.copy_range(:f, 0, :g, 100, 1000000000);
SELECT chunk_index, pos, slice_id - :s AS slice, slice_off, len FROM jfs.slice WHERE inode = :g ORDER BY seq;
SELECT slice_id - :s AS slice, refs FROM jfs.slice_ref ORDER BY slice_id;
SELECT (SELECT used FROM jfs.getattr(:f)) AS f_used, (SELECT used FROM jfs.getattr(:g)) AS g_used, (SELECT used FROM jfs.readdirplus(1) WHERE name = 'g') AS listed;
-- the same bytes through either file
SELECT (SELECT string_agg(pos || ':' || len, ',') FROM jfs.read_chunk(:g, 1)) AS g_chunk_1;
-- a range past the source's end copies nothing; a part of it copies that part
SELECT errno, copied, length = :f_length + 100 AS unchanged FROM jfs.copy_range(:f, :f_length, :g, 0, 10);
SELECT errno, copied FROM jfs.copy_range(:f, :f_length - 10, :g, 0, 1000);
-- f's last 10 bytes are in a chunk with no slices (zeros): g's 0..10 had no data and gets no row
SELECT chunk_index, pos, slice_id - :s AS slice, slice_off, len FROM jfs.slice WHERE inode = :g AND chunk_index = 0 ORDER BY seq;
-- within one file: overlapping ranges are EINVAL, apart they share
SELECT errno, copied FROM jfs.copy_range(:g, 0, :g, 50, 100) AS overlapping;
SELECT errno, copied, length FROM jfs.copy_range(:g, 0, :g, 10000, 100);
-- bad input
SELECT (jfs.copy_range(999, 0, :g, 0, 1)).errno AS missing, (jfs.copy_range(:f, 0, 1, 0, 1)).errno AS dir,
       (jfs.copy_range(:p, 0, :g, 0, 1)).errno AS fifo, (jfs.copy_range(:f, -1, :g, 0, 1)).errno AS negative,
       (jfs.copy_range(:f, 0, :g, 144115188075855870, 10)).errno AS too_far;
-- usage (the volume's, the owner's) follows g's new length: fsck checks every figure
SELECT * FROM jfs.fsck();
-- f goes: g keeps every slice it shares, nothing is queued
SELECT errno FROM jfs.unlink(1, 'f');
SELECT count(*) AS queued FROM jfs.delslice;
SELECT slice_id - :s AS slice, refs FROM jfs.slice_ref ORDER BY slice_id;
SELECT * FROM jfs.fsck();
