-- sessions belong to the role that registered them: a second client role
-- cannot heartbeat, close, lock, release or hold files for another mount's
-- session, end it while it is alive, make its changes pass for that
-- mount's own (which the mount would skip), or repair quotas
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
DROP ROLE IF EXISTS jfs_regress_mount_a;
DROP ROLE IF EXISTS jfs_regress_mount_b;
CREATE ROLE jfs_regress_mount_a;
CREATE ROLE jfs_regress_mount_b;
SELECT jfs.grant_client('jfs_regress_mount_a');
SELECT jfs.grant_client('jfs_regress_mount_b');
SELECT jfs.alloc_ids('inode', 100) AS first_inode \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0, 0, NULL, :first_inode) \gset
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0, 0, NULL, :first_inode + 1) \gset
-- mount A registers, says it may be silent for a minute, and locks f
SET SESSION AUTHORIZATION jfs_regress_mount_a;
SELECT jfs.session_open('host-a', 101, '{}', '1 minute') AS sa \gset
SELECT jfs.setlk(:f, :sa, 7, 1, 0, 99, 101);
RESET SESSION AUTHORIZATION;
SELECT host, role, session_timeout FROM jfs.session WHERE sid = :sa;
-- mount B, another role, is refused everything about A's session
SET SESSION AUTHORIZATION jfs_regress_mount_b;
SELECT jfs.session_open('host-b', 202, '{}', '1 minute') AS sb \gset
SELECT jfs.alloc_ids('inode', 1) AS b_inode \gset
SELECT jfs.session_heartbeat(:sa);
SELECT jfs.session_close(:sa);
SELECT jfs.setlk(:f, :sa, 8, 1, 200, 299, 202);
SELECT jfs.unlock_owner(:f, :sa, 7);
SELECT jfs.cancel_lock_wait(:f, :sa, 7);
SELECT jfs.sustain(:sa, ARRAY[:f]::bigint[]);
SELECT jfs.release(:sa, :f);
-- an unlink that names A's session does not make A hold the file
SELECT errno, nlink FROM jfs.unlink(1, 'g', :sa, ARRAY[:g]::bigint[]);
-- a cleanup with no timeout ends no live session: each keeps its own
SELECT jfs.session_cleanup('0');
-- its changes do not pass for A's, whatever its application_name says
SELECT set_config('application_name', 'jfs:' || :sa, false) IS NOT NULL AS named;
SELECT errno FROM jfs.mknod(1, 'by-b', 1, 420, 0, 0, 0, NULL, :b_inode);
RESET application_name;
-- and checking or repairing quotas is administration
SELECT count(*) FROM jfs.check_quota(NULL, NULL, true);
SELECT count(*) AS checked FROM jfs.check_quota();
RESET SESSION AUTHORIZATION;
-- nothing of A's changed: its session, its lock
SELECT count(*) AS sessions FROM jfs.session WHERE sid = :sa;
SELECT sid = :sa AS a_holds, owner, lstart, lend FROM jfs.plock;
SELECT count(*) AS sustained FROM jfs.sustained;
SELECT op, session IS NULL AS unattributed FROM jfs.change WHERE name = 'by-b';
-- A itself does all of it, and its own changes are attributed to it
SET SESSION AUTHORIZATION jfs_regress_mount_a;
SELECT jfs.session_heartbeat(:sa);
SELECT set_config('application_name', 'jfs:' || :sa, false) IS NOT NULL AS named;
SELECT jfs.alloc_ids('inode', 1) AS a_inode \gset
SELECT errno FROM jfs.mknod(1, 'by-a', 1, 420, 0, 0, 0, NULL, :a_inode);
RESET application_name;
SELECT jfs.unlock_owner(:f, :sa, 7);
SELECT jfs.session_close(:sa);
RESET SESSION AUTHORIZATION;
SELECT op, session = :sa AS attributed_to_a FROM jfs.change WHERE name = 'by-a';
-- an administrator acts for any session; a silent one is ended after its
-- own timeout, not before
SELECT jfs.session_heartbeat(:sb);
UPDATE jfs.session SET heartbeat = now() - interval '30 seconds' WHERE sid = :sb;
SELECT jfs.session_cleanup('10 seconds');
UPDATE jfs.session SET heartbeat = now() - interval '2 minutes' WHERE sid = :sb;
SELECT jfs.session_cleanup('10 seconds');
SELECT count(*) AS sessions FROM jfs.session;
-- sessions from before 0.2.4 (no role) stay usable by any role
SELECT jfs.session_register('old', 1) AS so \gset
UPDATE jfs.session SET role = NULL WHERE sid = :so;
SET SESSION AUTHORIZATION jfs_regress_mount_b;
SELECT jfs.session_heartbeat(:so);
RESET SESSION AUTHORIZATION;
SELECT jfs.session_close(:so);
SELECT errno FROM jfs.unlink(1, 'by-a');
SELECT errno FROM jfs.unlink(1, 'by-b');
SELECT errno FROM jfs.unlink(1, 'f');
SELECT * FROM jfs.fsck();
DROP OWNED BY jfs_regress_mount_a, jfs_regress_mount_b;
DROP ROLE jfs_regress_mount_a;
DROP ROLE jfs_regress_mount_b;
