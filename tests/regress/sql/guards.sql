-- What the database refuses or repairs whatever a client sends: names reserved
-- in the root, ids a client did not get from alloc_ids (or that are being
-- freed), ACL rows of a directory replaced by rename, and the trash's hours
-- and long names whatever the session's time zone
\set VERBOSITY terse
\ir tests/regress/fresh_extension.sql
SELECT errno FROM jfs.format('regress', p_trash_days => 1);

-- /.trash and /.jfs.control are the volume's: nobody makes, links or renames
-- to them (EEXIST for a create, EPERM for a rename), elsewhere they are names
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 511, 1000, 1000) \gset
SELECT inode AS f FROM jfs.mknod(:d, 'f', 1, 420, 1000, 1000) \gset
SELECT errno FROM jfs.mknod(1, '.trash', 2, 511, 1000, 1000);
SELECT errno FROM jfs.mknod(1, '.jfs.control', 1, 438, 1000, 1000);
SELECT errno FROM jfs.symlink(1, '.trash', 'd', 1000, 1000);
SELECT errno FROM jfs.link(:f, 1, '.jfs.control');
SELECT errno FROM jfs.rename(:d, 'f', 1, '.trash');
SELECT errno FROM jfs.rename(1, 'd', 1, '.jfs.control', 2);
SELECT errno FROM jfs.mknod(:d, '.trash', 2, 511, 1000, 1000);
SELECT errno FROM jfs.rmdir(:d, '.trash');
-- the real trash is made by a removal, owned by root, 0700, and stays put
SELECT errno FROM jfs.unlink(:d, 'f');
SELECT uid, gid, mode, type FROM jfs.getattr(9223372032828243968);
SELECT errno FROM jfs.rename(1, '.trash', :d, 'mine');
SELECT errno FROM jfs.rmdir(1, '.trash');
SELECT errno FROM jfs.unlink(1, '.trash');
SELECT errno, done FROM jfs.rmr(1, '.trash');
-- nor can a client make it with the trash's inode under its own terms
SELECT errno FROM jfs.mknod(:d, 'x', 2, 511, 1000, 1000, p_inode => 9223372032828243968);

-- ids: an inode or slice id must be one alloc_ids handed out, not in use
SELECT jfs.alloc_ids('inode', 10) AS first_inode \gset
SELECT jfs.alloc_ids('slice', 10) AS first_slice \gset
SELECT errno FROM jfs.mknod(:d, 'neg', 1, 420, 0, 0, p_inode => -5);
SELECT errno FROM jfs.mknod(:d, 'one', 1, 420, 0, 0, p_inode => 1);
SELECT errno FROM jfs.mknod(:d, 'ahead', 1, 420, 0, 0, p_inode => :first_inode + 10);
SELECT errno FROM jfs.mknod(:d, 'taken', 1, 420, 0, 0, p_inode => :d);
SELECT errno FROM jfs.mknod(:d, 'given', 1, 420, 0, 0, p_inode => :first_inode);
-- the counter's next value was not taken by the refused create: others go on
SELECT errno FROM jfs.mknod(:d, 'counted', 1, 420, 0, 0);
SELECT inode AS g FROM jfs.lookup(:d, 'given') \gset
SELECT errno FROM jfs.write_slice(:g, 0, 0, :first_slice + 10, 4096, 0, 4096);
SELECT errno FROM jfs.write_slice(:g, 0, 0, 0, 4096, 0, 4096);
SELECT errno FROM jfs.write_slice(:g, 0, 0, :first_slice, 4096, 0, 4096);
-- a slice id already committed, or queued for deletion, is refused
SELECT errno FROM jfs.write_slice(:g, 0, 0, :first_slice, 4096, 0, 4096);
SELECT errno FROM jfs.setattr(:g, 8, p_length => 0);
SELECT slice_id - :first_slice AS queued FROM jfs.delslice;
SELECT errno FROM jfs.write_slice(:g, 0, 0, :first_slice, 4096, 0, 4096);
SELECT jfs.compact_chunk(:g, 0, 1, 0, :first_slice, 4096, 0);
SELECT count(*) AS refs FROM jfs.slice_ref;
SELECT * FROM jfs.fsck();

-- the trash's hours are UTC whatever the session's time zone: an hour 22
-- hours old is kept for a day (it was purged 9 hours early in Tokyo)
UPDATE jfs.edge SET name = convert_to(to_char(now() AT TIME ZONE 'UTC' - interval '22 hours', 'YYYY-MM-DD-HH24'), 'UTF8')
 WHERE parent = 9223372032828243968;
SET TimeZone = 'Asia/Tokyo';
SELECT jfs.trash_purge() AS purged_in_tokyo;
SET TimeZone = 'America/Los_Angeles';
SELECT jfs.trash_purge() AS purged_in_los_angeles;
RESET TimeZone;
SELECT count(*) AS hours FROM jfs.edge WHERE parent = 9223372032828243968;
-- a name of 255 bytes comes back from the trash whole
SELECT errno FROM jfs.mknod(:d, repeat('n', 255)::bytea, 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(:d, repeat('n', 254)::bytea, 1, 420, 0, 0);
SELECT errno FROM jfs.unlink(:d, repeat('n', 255)::bytea);
SELECT errno FROM jfs.unlink(:d, repeat('n', 254)::bytea);
SELECT length(name) AS trash_name_length FROM jfs.trash ORDER BY 1;
SELECT length(path) - length(jfs.path(:d)) - 1 AS restored_length, errno FROM jfs.restore() ORDER BY 1;
SELECT length(name) AS name_length FROM jfs.edge WHERE parent = :d AND name LIKE 'nnn%' ORDER BY 1;
SELECT * FROM jfs.fsck();

-- rename over an empty directory takes that directory's ACL rows with it
SELECT jfs.enable_acl();
SELECT inode AS old FROM jfs.mknod(:d, 'old', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:d, 'new', 2, 493, 0, 0);
SELECT jfs.set_acl(:old, 'd', '{1,2,4,16,32}', '{-1,1000,-1,-1,-1}', '{7,7,5,7,0}');
SELECT jfs.set_acl(:old, 'a', '{1,2,4,16,32}', '{-1,1000,-1,-1,-1}', '{7,7,5,7,0}');
SELECT count(*) AS acl_rows FROM jfs.acl WHERE inode = :old;
UPDATE jfs.setting SET trash_days = 0;
SELECT errno FROM jfs.rename(:d, 'new', :d, 'old');
SELECT count(*) AS acl_rows_left FROM jfs.acl WHERE inode = :old;
SELECT * FROM jfs.fsck();
