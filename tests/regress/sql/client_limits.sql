-- a client role's limits (jfs.grant_client), enforced by the procedures
-- whatever the caller sends: read-only, root squash, all squash
\ir tests/regress/fresh_extension.sql
DROP ROLE IF EXISTS jfs_lim_ro;
DROP ROLE IF EXISTS jfs_lim_member;
DROP ROLE IF EXISTS jfs_lim_root;
DROP ROLE IF EXISTS jfs_lim_all;
CREATE ROLE jfs_lim_ro;
CREATE ROLE jfs_lim_root;
CREATE ROLE jfs_lim_member IN ROLE jfs_lim_root;
CREATE ROLE jfs_lim_all;
SELECT jfs.grant_client('jfs_lim_ro', p_read_only => true);
SELECT jfs.grant_client('jfs_lim_root', p_root_squash => '65534:65533');
SELECT jfs.grant_client('jfs_lim_all', p_all_squash => '1500:1501');
-- a volume formatted after the grants knows a role is squashed (creates
-- look the caller's squash up only then)
SELECT errno FROM jfs.format('regress', p_trash_days => 1);
SELECT squash_roles FROM jfs.setting;
-- a squash is one of the two, UID:GID, each a valid id
SELECT jfs.grant_client('jfs_lim_all', p_root_squash => '1:1', p_all_squash => '2:2');
SELECT jfs.grant_client('jfs_lim_all', p_all_squash => 'nobody');
SELECT jfs.grant_client('jfs_lim_all', p_all_squash => '4294967295:0');
SELECT * FROM jfs.client_role ORDER BY role;
-- every procedure is classified: a read-only role keeps these (a new one
-- shows here until it is put in write_procedures() or left as a read)
SELECT p.proname FROM pg_proc p
 WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef
   AND p.proname <> ALL (jfs.admin_procedures()) AND p.proname <> ALL (jfs.write_procedures())
 ORDER BY 1;
SELECT w AS unknown_write_procedure FROM unnest(jfs.write_procedures()) w
 WHERE NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = w AND p.pronamespace = 'jfs'::regnamespace AND p.prosecdef);
-- a directory of uid 1000 holding a file of root
SELECT errno FROM jfs.mknod(1, 'd', 2, 511, 1000, 1000);
SELECT inode AS d FROM jfs.lookup(1, 'd') \gset
SELECT errno FROM jfs.mknod(:d, 'rootfile', 1, 420, 0, 0);
SELECT inode AS rf FROM jfs.lookup(:d, 'rootfile') \gset

-- read-only: reads, keeps its own session; every write is refused by the server
SET SESSION AUTHORIZATION jfs_lim_ro;
SELECT * FROM jfs.client_limits();
SELECT errno, uid FROM jfs.lookup(:d, 'rootfile');
SELECT jfs.mknod(:d, 'x', 1, 420, 1000, 1000);
SELECT jfs.setattr(:rf, 1, 511);
SELECT jfs.unlink(:d, 'rootfile');
SELECT jfs.write_slice(:rf, 0, 0, 1, 10, 0, 10);
SELECT jfs.rmr(:d, 'rootfile');
SELECT count(*) AS writes_it_may_call FROM unnest(jfs.write_procedures()) w
  JOIN pg_proc p ON p.proname = w AND p.pronamespace = 'jfs'::regnamespace
 WHERE has_function_privilege(p.oid, 'EXECUTE');
SELECT jfs.session_open('ro-host', 1, '{}', '1 minute') AS sid \gset
SELECT jfs.session_heartbeat(:sid) AS heartbeat;
SELECT jfs.session_close(:sid) AS closed;
RESET SESSION AUTHORIZATION;

-- root squash: ids 0 become 65534:65533; nothing is given to uid or gid 0
SET SESSION AUTHORIZATION jfs_lim_root;
SELECT * FROM jfs.client_limits();
SELECT errno, uid, gid FROM jfs.mknod(:d, 'by-root', 1, 420, 0, 0);
SELECT errno, uid, gid FROM jfs.mknod(:d, 'by-alice', 1, 420, 1000, 0);
SELECT inode AS alice FROM jfs.lookup(:d, 'by-alice') \gset
SELECT errno, uid, gid FROM jfs.symlink(:d, 'link', 'target', 0, 0);
SELECT errno FROM jfs.setattr(:alice, 2, p_uid => 0);
SELECT errno FROM jfs.setattr(:alice, 4, p_gid => 0);
SELECT errno, uid, gid FROM jfs.setattr(:alice, 2, p_uid => 1001);
SELECT errno, uid, gid FROM jfs.setattr(:rf, 6, p_uid => 0, p_gid => 0);
SELECT errno FROM jfs.clone_node(:rf, :d, 'rootclone');
SELECT errno, uid, gid FROM jfs.lookup(:d, 'rootclone');
-- the trash's own directories stay root's
SELECT errno FROM jfs.unlink(:d, 'by-root');
SELECT a.uid, a.gid, a.mode FROM jfs.readdirplus(jfs.resolve('/.trash')) e, jfs.getattr(e.inode) a
 WHERE e.name NOT IN ('.', '..');
RESET SESSION AUTHORIZATION;
-- a member of a squashed role is squashed
SET SESSION AUTHORIZATION jfs_lim_member;
SELECT errno, uid, gid FROM jfs.mknod(:d, 'by-member', 1, 420, 0, 0);
RESET SESSION AUTHORIZATION;

-- all squash: every id becomes 1500:1501; it gives no node away, and only
-- its own to its own group
SELECT errno FROM jfs.mknod(:d, 'theirs', 1, 420, 1500, 1000);
SELECT inode AS theirs FROM jfs.lookup(:d, 'theirs') \gset
SET SESSION AUTHORIZATION jfs_lim_all;
SELECT errno, uid, gid FROM jfs.mknod(:d, 'by-all', 1, 420, 1000, 1000);
SELECT inode AS mine FROM jfs.lookup(:d, 'by-all') \gset
SELECT errno FROM jfs.setattr(:mine, 2, p_uid => 1000);
SELECT errno FROM jfs.setattr(:rf, 4, p_gid => 1501);
SELECT errno, uid, gid FROM jfs.setattr(:theirs, 4, p_gid => 1501);
SELECT errno FROM jfs.setattr(:theirs, 4, p_gid => 1000);
SELECT errno FROM jfs.clone_node(:rf, :d, 'allclone', 0, 0);
SELECT errno, uid, gid FROM jfs.lookup(:d, 'allclone');
RESET SESSION AUTHORIZATION;

-- a superuser is never squashed
SELECT errno, uid, gid FROM jfs.mknod(:d, 'by-superuser', 1, 420, 0, 0);
-- a symlink target holds no NUL byte; clone owner ids are ids
SELECT errno FROM jfs.symlink(:d, 'nul', '\x610062'::bytea, 0, 0);
SELECT errno FROM jfs.clone_node(:rf, :d, 'bad-uid', 4294967295, 0);
SELECT errno FROM jfs.clone_node(:rf, :d, 'bad-gid', 0, -1);
-- the queue of freed objects forgets a slice only once it may go
SELECT jfs.set_retain_deleted('1 hour');
INSERT INTO jfs.delslice (slice_id, size) VALUES (424242, 10);
SELECT jfs.forget_delslices('{424242}') AS forgotten_early;
SELECT jfs.set_retain_deleted('0');
SELECT jfs.forget_delslices('{424242}') AS forgotten;

-- granting again keeps the limits; they change only when given
SELECT jfs.grant_client('jfs_lim_ro');
SELECT jfs.grant_client('jfs_lim_root', p_read_only => false);
SELECT role, read_only, squash FROM jfs.client_role ORDER BY role;
SELECT has_function_privilege('jfs_lim_ro', 'jfs.unlink(bigint, bytea, bigint, bigint[])', 'EXECUTE') AS ro_unlinks;
SELECT jfs.grant_client('jfs_lim_ro', p_read_only => false);
SELECT jfs.grant_client('jfs_lim_root', p_root_squash => '');
SELECT role, read_only, squash FROM jfs.client_role ORDER BY role;
SELECT has_function_privilege('jfs_lim_ro', 'jfs.unlink(bigint, bytea, bigint, bigint[])', 'EXECUTE') AS ro_unlinks;
-- an administrator has no limits
SELECT jfs.grant_admin('jfs_lim_all');
SELECT role FROM jfs.client_role ORDER BY role;
-- no role is squashed any more
SELECT squash_roles FROM jfs.setting;

DROP OWNED BY jfs_lim_ro;
DROP OWNED BY jfs_lim_member;
DROP OWNED BY jfs_lim_root;
DROP OWNED BY jfs_lim_all;
DROP ROLE jfs_lim_ro;
DROP ROLE jfs_lim_member;
DROP ROLE jfs_lim_root;
DROP ROLE jfs_lim_all;
DELETE FROM jfs.client_role;
SELECT * FROM jfs.fsck();
