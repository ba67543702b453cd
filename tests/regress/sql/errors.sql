-- bad input: every procedure answers with the right errno and changes nothing
\ir tests/regress/fresh_volume.sql
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 0, 0) \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
CREATE TEMP TABLE names (label text, name bytea);
INSERT INTO names VALUES
    ('empty', ''),
    ('slash', 'a/b'),
    ('nul', '\x610062'::bytea),
    ('256 bytes', convert_to(repeat('x', 256), 'UTF8')),
    ('dot', '.'),
    ('dotdot', '..');
-- names: create, link, symlink, rename (both ends), unlink, rmdir, lookup
SELECT label,
       (jfs.mknod(:d, name, 1, 420, 0, 0)).errno AS mknod,
       (jfs.mknod(:d, name, 2, 493, 0, 0)).errno AS mkdir,
       (jfs.symlink(:d, name, 'x', 0, 0)).errno AS symlink,
       (jfs.link(:f, :d, name)).errno AS link,
       (SELECT errno FROM jfs.rename(1, 'f', :d, name)) AS rename_to,
       (SELECT errno FROM jfs.rename(:d, name, 1, 'g')) AS rename_from,
       (jfs.unlink(:d, name)).errno AS unlink,
       (jfs.rmdir(:d, name)).errno AS rmdir,
       (jfs.lookup(:d, name)).errno AS lookup
  FROM names ORDER BY label;
-- a name of exactly 255 bytes is fine; UTF-8 and arbitrary bytes too
SELECT errno FROM jfs.mknod(:d, convert_to(repeat('y', 255), 'UTF8'), 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(:d, convert_to('naïve ☃', 'UTF8'), 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(:d, '\xfffe'::bytea, 1, 420, 0, 0);
-- unknown inodes
SELECT (jfs.getattr(999)).errno AS getattr, (jfs.lookup(999, 'x')).errno AS lookup,
       (jfs.mknod(999, 'x', 1, 420, 0, 0)).errno AS mknod, (jfs.link(999, :d, 'x')).errno AS link,
       (jfs.link(:f, 999, 'x')).errno AS link_dir, (jfs.unlink(999, 'x')).errno AS unlink,
       (jfs.rmdir(999, 'x')).errno AS rmdir, (SELECT errno FROM jfs.rename(999, 'x', :d, 'y')) AS rename,
       (jfs.setattr(999, 1, 420)).errno AS setattr, (SELECT errno FROM jfs.readlink(999)) AS readlink,
       jfs.setxattr(999, 'a', 'b') AS setxattr;
-- wrong types: a file where a directory is needed and the other way round
SELECT (jfs.mknod(:f, 'x', 1, 420, 0, 0)).errno AS mknod_in_file, (jfs.lookup(:f, 'x')).errno AS lookup_in_file,
       (jfs.unlink(:f, 'x')).errno AS unlink_in_file, (jfs.unlink(1, 'd')).errno AS unlink_dir,
       (jfs.rmdir(1, 'f')).errno AS rmdir_file, (jfs.link(:d, 1, 'x')).errno AS link_dir,
       (SELECT errno FROM jfs.rename(1, 'f', :f, 'x')) AS rename_into_file;
-- invalid node types and modes
SELECT (jfs.mknod(:d, 'x', 0, 420, 0, 0)).errno AS type0, (jfs.mknod(:d, 'x', 8, 420, 0, 0)).errno AS type8,
       (jfs.mknod(:d, 'x', 1, NULL, 0, 0)).errno AS no_mode, (jfs.mknod(:d, 'x', 3, 511, 0, 0)).errno AS no_target,
       (jfs.mknod(:d, 'x', 3, 511, 0, 0, 0, convert_to(repeat('t', 4097), 'UTF8'))).errno AS long_target;
-- modes are permission bits, with the node type's S_IF* bits or none; ids 0 .. 2^32 - 2
SELECT (jfs.mknod(:d, 'x', 1, -1, 0, 0)).errno AS mode_minus_1,
       (jfs.mknod(:d, 'x', 1, 65535, 0, 0)).errno AS mode_all_bits,
       (jfs.mknod(:d, 'x', 1, 16877, 0, 0)).errno AS dir_bits_on_a_file,
       (jfs.mknod(:d, 'x', 1, 420, -5, 0)).errno AS uid_minus_5,
       (jfs.mknod(:d, 'x', 1, 420, 0, 4294967295)).errno AS gid_2_32_minus_1,
       (jfs.setattr(:f, 1, -1)).errno AS chmod_minus_1,
       (jfs.setattr(:f, 1, 16877)).errno AS chmod_dir_bits,
       (jfs.setattr(:f, 2, p_uid => -5)).errno AS chown_minus_5,
       (jfs.setattr(:f, 4, p_gid => 4294967295)).errno AS chgrp_2_32_minus_1;
-- with the type's bits, as stat(2) shows a mode, they are fine
SELECT errno, mode, uid, gid FROM jfs.mknod(:d, 'typed', 1, 33188, 4294967294, 0);
SELECT errno, mode FROM jfs.setattr(:f, 1, 33261);
SELECT errno FROM jfs.unlink(:d, 'typed');
-- fsck reports owners the checks would have refused (the table checks modes itself)
BEGIN;
UPDATE jfs.node SET uid = -5, gid = 4294967295 WHERE inode = :f;
SELECT problem, detail FROM jfs.fsck();
ROLLBACK;
-- nothing above changed the namespace
SELECT count(*) AS entries_in_d FROM jfs.edge WHERE parent = :d;
SELECT errno, nlink FROM jfs.getattr(:f);
SELECT * FROM jfs.fsck();
