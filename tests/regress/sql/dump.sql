-- pg_dump / pg_restore carry the whole file system: tables, sequences, counters
\ir tests/regress/fresh_extension.sql
SELECT errno FROM jfs.format('dumped', 'file', '/var/tmp/jfs-dump', p_uuid => '00000000-0000-0000-0000-0000000000d1');
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS d FROM jfs.mknod(1, 'dir', 2, 493, 1000, 1000) \gset
SELECT inode AS f FROM jfs.mknod(:d, 'file', 1, 420, 1000, 1000) \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, 77, 65536, 0, 65536);
SELECT errno FROM jfs.link(:f, 1, 'hardlink');
SELECT errno FROM jfs.symlink(:d, 'sym', '../hardlink', 0, 0);
SELECT jfs.setxattr(:f, 'user.k', 'v');
SELECT jfs.session_register('h', 1) AS sid \gset
SELECT errno FROM jfs.mknod(1, 'open-unlinked', 1, 420, 0, 0);
SELECT errno FROM jfs.unlink(1, 'open-unlinked', :sid, ARRAY[(SELECT inode FROM jfs.lookup(1, 'open-unlinked'))]);
SELECT errno FROM jfs.write_slice(:f, 1, 0, 78, 4096, 0, 4096);
SELECT errno FROM jfs.setattr(:f, 8, p_length => 100);
SELECT jfs.alloc_ids('inode', 10) AS next_inode_before \gset
DROP DATABASE IF EXISTS jfs_regress_copy;
CREATE DATABASE jfs_regress_copy;
\! pg_dump -Fc -d jfs_regress -f "$PGDUMPFILE" && pg_restore -d jfs_regress_copy "$PGDUMPFILE" && echo restored
\c jfs_regress_copy
SET client_min_messages = warning;
SELECT name, uuid, bucket FROM jfs.setting;
SELECT name, type, size, mode, uid, gid, nlink FROM jfs.ls('/');
SELECT name, type, size, mode, uid, gid, nlink FROM jfs.ls('/dir');
SELECT convert_from(target, 'UTF8') FROM jfs.readlink(jfs.resolve('/dir/sym'));
SELECT convert_from(value, 'UTF8') FROM jfs.getxattr(jfs.resolve('/dir/file'), 'user.k');
SELECT pos, slice_id, len FROM jfs.read_chunk(jfs.resolve('/dir/file'), 0);
SELECT slice_id FROM jfs.delslice;
SELECT count(*) AS sessions, (SELECT count(*) FROM jfs.sustained) AS sustained FROM jfs.session;
-- counters and sequences continue where they were: no id is handed out twice
SELECT jfs.alloc_ids('inode', 1) = :next_inode_before + 10 AS inode_counter_kept;
SELECT errno, inode = :next_inode_before + 11 AS next_id FROM jfs.mknod(1, 'after-restore', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(jfs.resolve('/dir'), 'new', 1, 420, 0, 0);
SELECT count(DISTINCT cookie) = count(*) AS cookies_unique FROM jfs.edge WHERE parent = jfs.resolve('/dir');
SELECT * FROM jfs.fsck();
\c jfs_regress
DROP DATABASE jfs_regress_copy;
SELECT * FROM jfs.fsck();
