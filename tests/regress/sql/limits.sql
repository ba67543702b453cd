-- The limits of docs/limits.md as SQL called directly meets them: the
-- largest file (2^57 - 1 bytes) for a length, a zeroed or copied range and a
-- slice's chunk; names, symlink targets and xattrs past their sizes; and
-- df on a volume without a capacity, which no sparse file fills.
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0) \gset
-- a length: up to 2^57 - 1 bytes; 2^57 and past it (2^62, 2^63 - 1) EFBIG
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 144115188075855871);
SELECT errno FROM jfs.setattr(:f, 8, p_length => 144115188075855872);
SELECT errno FROM jfs.setattr(:f, 8, p_length => 4611686018427387904);
SELECT errno FROM jfs.setattr(:f, 8, p_length => 9223372036854775807);
SELECT errno FROM jfs.setattr(:f, 8, p_length => -1);
-- df: a file of 2^57 - 1 bytes on a volume without capacity leaves it
-- less than 80% used (the size shown grows with what is charged)
SELECT used_space > 0 AS charged, avail_space > 0 AS room, used_space * 10 <= total_space * 8 AS below_80
  FROM (SELECT s.total_space, s.avail_space, s.total_space - s.avail_space AS used_space FROM jfs.statfs() s) x;
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 0);
-- a zeroed range (fallocate) past the largest file, and one ending at it
SELECT errno FROM jfs.zero_range(:f, 144115188075855872, 4096, false);
SELECT errno FROM jfs.zero_range(:f, 144115188075855871, 2, false);
SELECT errno FROM jfs.zero_range(:f, 9223372036854775000, 700, false);
SELECT errno, length FROM jfs.zero_range(:f, 0, 10, false);
-- a copy to 2^58, or to 2^63 - 10
SELECT errno, copied FROM jfs.copy_range(:f, 0, :g, 288230376151711744, 10);
SELECT errno, copied FROM jfs.copy_range(:f, 0, :g, 9223372036854775797, 10);
-- a slice at a negative chunk index, crossing its chunk's end, or ending
-- at 2^57 (EFBIG: a file ends before), and the last byte a file holds
SELECT jfs.alloc_ids('slice', 10) AS s \gset
SELECT committed, (a).errno FROM jfs.write_slices(:f, ARRAY[-1], ARRAY[0], ARRAY[:s::bigint], ARRAY[1],
                                                  ARRAY[0], ARRAY[1]);
SELECT committed, (a).errno FROM jfs.write_slices(:f, ARRAY[0], ARRAY[67108863], ARRAY[:s::bigint], ARRAY[2],
                                                  ARRAY[0], ARRAY[2]);
SELECT committed, (a).errno FROM jfs.write_slices(:f, ARRAY[2147483647], ARRAY[67108863],
                                                  ARRAY[:s::bigint], ARRAY[1], ARRAY[0], ARRAY[1]);
SELECT committed, (a).errno, (a).length FROM jfs.write_slices(:f, ARRAY[2147483647], ARRAY[67108862],
                                                              ARRAY[:s::bigint], ARRAY[1], ARRAY[0], ARRAY[1]);
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 0);
-- names: 255 bytes, not 256; no '/' or NUL; not empty
SELECT errno FROM jfs.mknod(1, convert_to(repeat('n', 255), 'UTF8'), 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, convert_to(repeat('n', 256), 'UTF8'), 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, 'a/b', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, '\x6100'::bytea, 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, '', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, '..', 1, 420, 0, 0);
-- symlink targets: 4096 bytes, not 4097; not empty, no NUL
SELECT errno FROM jfs.symlink(1, 'l1', convert_to(repeat('t', 4096), 'UTF8'), 0, 0);
SELECT errno FROM jfs.symlink(1, 'l2', convert_to(repeat('t', 4097), 'UTF8'), 0, 0);
SELECT errno FROM jfs.symlink(1, 'l3', '', 0, 0);
SELECT errno FROM jfs.symlink(1, 'l4', '\x6100'::bytea, 0, 0);
-- xattrs: names of 255 bytes (256: ERANGE), values of 64 KiB (more: E2BIG)
SELECT jfs.setxattr(:f, convert_to('user.' || repeat('x', 250), 'UTF8'), 'v');
SELECT jfs.setxattr(:f, convert_to('user.' || repeat('x', 251), 'UTF8'), 'v');
SELECT jfs.setxattr(:f, 'user.big', convert_to(repeat('v', 65536), 'UTF8'));
SELECT jfs.setxattr(:f, 'user.bigger', convert_to(repeat('v', 65537), 'UTF8'));
SELECT count(*) AS xattrs FROM jfs.xattr WHERE inode = :f;
SELECT errno FROM jfs.unlink(1, convert_to(repeat('n', 255), 'UTF8'));
SELECT errno FROM jfs.unlink(1, 'l1');
SELECT * FROM jfs.fsck();
