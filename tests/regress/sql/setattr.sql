-- setattr: mode, owner, times with nanoseconds, size (truncate); bits: 1 mode, 2 uid, 4 gid,
-- 8 size, 16 atime, 32 mtime, 64 ctime, 128 atime=now, 256 mtime=now
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 1000, 1000) \gset
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 1000, 1000) \gset
SELECT ctime AS c0 FROM jfs.getattr(:f) \gset
-- chmod keeps only the 07777 bits; chown; both move ctime
SELECT errno, mode, uid, gid FROM jfs.setattr(:f, 1, p_mode => 33261);
SELECT errno, mode, uid, gid FROM jfs.setattr(:f, 2 | 4, p_uid => 4294967294, p_gid => 7);
SELECT ctime >= :c0 AS ctime_moved FROM jfs.getattr(:f);
-- explicit times keep their nanoseconds
SELECT errno, atime, mtime FROM jfs.setattr(:f, 16 | 32, p_atime => 1234567890123456789, p_mtime => 987654321987654321);
SELECT atime, mtime FROM jfs.getattr(:f);
-- times before 1970 are fine
SELECT errno, mtime FROM jfs.setattr(:f, 32, p_mtime => -1000000001);
-- "now" flags use the server's clock
SELECT errno, atime > 1700000000000000000 AS atime_now, mtime > 1700000000000000000 AS mtime_now
  FROM jfs.setattr(:f, 128 | 256);
-- an explicit ctime (macOS sends it)
SELECT errno, ctime FROM jfs.setattr(:f, 64, p_ctime => 42);
-- a flag without its value is EINVAL; unknown inode ENOENT
SELECT errno FROM jfs.setattr(:f, 1);
SELECT errno FROM jfs.setattr(:f, 8, p_length => -1);
SELECT errno FROM jfs.setattr(999, 1, p_mode => 420);
-- directories take mode/owner/times, not a size
SELECT errno, mode FROM jfs.setattr(:d, 1, p_mode => 448);
SELECT errno FROM jfs.setattr(:d, 8, p_length => 0);
SELECT inode AS l FROM jfs.symlink(1, 'l', 'f', 0, 0) \gset
SELECT errno FROM jfs.setattr(:l, 8, p_length => 0);
SELECT errno FROM jfs.setattr(:f, 8, p_length => 144115188075855872);
-- truncate up: sparse, nothing stored
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 200000000);
SELECT count(*) AS slices FROM jfs.slice WHERE inode = :f;
SELECT * FROM jfs.statfs();
-- truncate down: whole chunks past the end lose their slices, the boundary chunk gets a hole
SELECT errno FROM jfs.write_slice(:f, 0, 0, 101, 4194304, 0, 4194304);
SELECT errno FROM jfs.write_slice(:f, 1, 0, 102, 4194304, 0, 4194304);
SELECT errno FROM jfs.write_slice(:f, 2, 1000, 103, 4096, 0, 4096);
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 67108864 + 100);
SELECT chunk_index, pos, slice_id, slice_off, len FROM jfs.slice WHERE inode = :f ORDER BY chunk_index, seq;
SELECT slice_id, size FROM jfs.delslice ORDER BY slice_id;
-- and growing again reads zeros there: the hole shadows the old bytes
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 67108864 * 2);
SELECT * FROM jfs.read_chunk(:f, 1);
-- truncate to a chunk boundary drops the whole chunk after it
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 67108864);
SELECT chunk_index, slice_id FROM jfs.slice WHERE inode = :f ORDER BY chunk_index, seq;
-- truncate to zero frees everything
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 0);
SELECT count(*) AS slices FROM jfs.slice WHERE inode = :f;
SELECT slice_id FROM jfs.delslice ORDER BY slice_id;
SELECT count(*) AS refs FROM jfs.slice_ref;
-- size and mode together in one call
SELECT errno, length, mode FROM jfs.setattr(:f, 8 | 1, p_mode => 384, p_length => 10);
SELECT * FROM jfs.statfs();
SELECT * FROM jfs.fsck();
