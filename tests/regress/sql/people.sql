-- SQL for people: jfs.resolve(path), jfs.path(inode), jfs.ls(path)
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS home FROM jfs.mknod(1, 'home', 2, 493, 0, 0) \gset
SELECT inode AS alice FROM jfs.mknod(:home, 'alice', 2, 448, 1000, 1000) \gset
SELECT inode AS notes FROM jfs.mknod(:alice, 'notes.txt', 1, 420, 1000, 1000) \gset
SELECT errno FROM jfs.write_slice(:notes, 0, 0, 1, 12, 0, 12);
SELECT errno FROM jfs.symlink(:alice, 'latest', 'notes.txt', 1000, 1000);
SELECT errno FROM jfs.mknod(:alice, 'pipe', 4, 4516, 1000, 1000);
SELECT errno FROM jfs.mknod(:alice, 'sticky', 2, 1023, 1000, 1000);
SELECT errno FROM jfs.mknod(:alice, convert_to('café ☕', 'UTF8'), 1, 420, 1000, 1000);
SELECT errno FROM jfs.mknod(:alice, '\x6261646e616d65ff'::bytea, 1, 420, 1000, 1000);
SELECT errno FROM jfs.link(:notes, :home, 'notes-link');
UPDATE jfs.node SET mtime = 1700000000123456789 WHERE inode = :notes;
-- resolve: absolute paths, repeated and trailing slashes, . and ..
SELECT jfs.resolve('/') AS root, jfs.resolve('/home/alice') = :alice AS alice,
       jfs.resolve('//home///alice/') = :alice AS slashes, jfs.resolve('/home/./alice/../alice/notes.txt') = :notes AS dots,
       jfs.resolve('/home/bob') AS missing, jfs.resolve('/home/alice/notes.txt/x') AS under_file,
       jfs.resolve('/..') AS above_root;
-- path: the way back up
SELECT jfs.path(1) AS root, jfs.path(:alice) AS alice, jfs.path(:notes) AS notes_first_link,
       jfs.path(jfs.resolve('/home/alice/café ☕')) AS utf8, jfs.path(999) AS missing;
SELECT jfs.path(inode) FROM jfs.edge WHERE name = '\x6261646e616d65ff'::bytea;
-- ls of a directory, sorted by name, and of one file
SELECT name, type, size, mode, uid, gid, nlink, inode - :alice AS rel_inode, tier,
       mtime = '2023-11-14 22:13:20.123457+00' AS notes_mtime FROM jfs.ls('/home/alice');
SELECT name, type, size, mode, mtime FROM jfs.ls('/home/alice/notes.txt');
SELECT name, type, nlink FROM jfs.ls('/home');
SELECT name, type FROM jfs.ls();
SELECT * FROM jfs.ls('/nope');
SELECT count(*) FROM jfs.ls(NULL);
-- a read-only role granted with jfs.grant_reader can use them
DROP ROLE IF EXISTS jfs_regress_reader;
CREATE ROLE jfs_regress_reader;
SELECT jfs.grant_reader('jfs_regress_reader');
SET ROLE jfs_regress_reader;
SELECT name, size FROM jfs.ls('/home/alice') WHERE type = 'file' ORDER BY name;
SELECT jfs.path(jfs.resolve('/home/alice/latest'));
SELECT count(*) AS nodes FROM jfs.node;
RESET ROLE;
DROP OWNED BY jfs_regress_reader;
DROP ROLE jfs_regress_reader;
SELECT * FROM jfs.fsck();
