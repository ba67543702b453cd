-- What a client role cannot take from others through SQL: ids reserved by
-- another role (a create or a write naming them is EINVAL, as an id never
-- handed out is), the volume-wide scans of administration (fsck,
-- check_quota: refused to client and read-only roles), and the lock that
-- orders directory moves (a row lock now: no role takes it outside a
-- procedure, as any role could take the advisory lock it was).
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
DROP ROLE IF EXISTS jfs_regress_ids_a;
DROP ROLE IF EXISTS jfs_regress_ids_b;
DROP ROLE IF EXISTS jfs_regress_ids_reader;
DROP ROLE IF EXISTS jfs_regress_ids_admin;
CREATE ROLE jfs_regress_ids_a;
CREATE ROLE jfs_regress_ids_b;
CREATE ROLE jfs_regress_ids_reader;
CREATE ROLE jfs_regress_ids_admin;
SELECT jfs.grant_client('jfs_regress_ids_a');
SELECT jfs.grant_client('jfs_regress_ids_b');
SELECT jfs.grant_reader('jfs_regress_ids_reader');
SELECT jfs.grant_admin('jfs_regress_ids_admin');
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 511, 0, 0) \gset

-- A reserves inodes and slices; B reserves right after (its own range)
SET SESSION AUTHORIZATION jfs_regress_ids_a;
SELECT jfs.alloc_ids('inode', 10) AS a_ino \gset
SELECT jfs.alloc_ids('inode', 10) - :a_ino AS a_next_is_adjacent;
SELECT jfs.alloc_ids('slice', 10) AS a_slice \gset
SELECT jfs.session_open('a', 1, '{}', '1 minute') AS sa \gset
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_ids_b;
SELECT jfs.alloc_ids('inode', 10) AS b_ino \gset
SELECT jfs.session_open('b', 2, '{}', '1 minute') AS sb \gset
-- B names A's ids: mknod, lease_commit (lease held) and a write are refused
SELECT errno FROM jfs.mknod(:d, 'b-takes-a', 1, 420, 0, 0, p_inode => :a_ino);
SELECT errno FROM jfs.take_lease(:sb, :d);
SELECT errnos FROM jfs.lease_commit(:sb, :d, '{}', '{}', '{}', ARRAY['b-lease-a']::bytea[],
                                    ARRAY[:a_ino + 1]::bigint[], '{420}', '{0}', '{0}', '{0}', '{0}', false);
SELECT inode AS bf FROM jfs.mknod(:d, 'b-own', 1, 420, 0, 0, p_inode => :b_ino) \gset
SELECT :bf = :b_ino AS b_uses_its_own;
SELECT errno FROM jfs.write_slice(:bf, 0, 0, :a_slice, 4096, 0, 4096);
RESET SESSION AUTHORIZATION;
-- A's own ids are A's to use, the adjacent range too (one grant row)
SET SESSION AUTHORIZATION jfs_regress_ids_a;
SELECT inode = :a_ino AS a_uses_its_own FROM jfs.mknod(:d, 'a-own', 1, 420, 0, 0, p_inode => :a_ino);
SELECT inode = :a_ino + 15 AS a_uses_adjacent FROM jfs.mknod(:d, 'a-own2', 1, 420, 0, 0, p_inode => :a_ino + 15);
SELECT errno FROM jfs.mknod(:d, 'a-takes-b', 1, 420, 0, 0, p_inode => :b_ino + 1);
RESET SESSION AUTHORIZATION;
SELECT kind, last - first + 1 AS ids, role FROM jfs.id_grant ORDER BY kind, first;

-- fsck and check_quota are administration
SET SESSION AUTHORIZATION jfs_regress_ids_a;
SELECT count(*) FROM jfs.fsck();
SELECT count(*) FROM jfs.check_quota();
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_ids_reader;
SELECT count(*) FROM jfs.fsck();
SELECT count(*) FROM jfs.check_quota();
SELECT count(*) > 0 AS reader_reads FROM jfs.node;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_ids_admin;
SELECT count(*) FROM jfs.fsck();
SELECT count(*) FROM jfs.check_quota() WHERE NOT ok;
-- an administrator may name any handed-out id (repairs, loads)
SELECT errno FROM jfs.mknod(:d, 'admin-takes-b', 1, 420, 0, 0, p_inode => :b_ino + 2);
RESET SESSION AUTHORIZATION;

-- the lock of directory moves: a row no role locks itself; a move holds it
SET SESSION AUTHORIZATION jfs_regress_ids_a;
SELECT * FROM jfs.tree_lock FOR UPDATE;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_ids_reader;
SELECT * FROM jfs.tree_lock FOR UPDATE;
RESET SESSION AUTHORIZATION;
SELECT inode AS e FROM jfs.mknod(1, 'e', 2, 511, 0, 0) \gset
SELECT errno FROM jfs.mknod(:d, 'sub', 2, 511, 0, 0);
BEGIN;
SELECT errno FROM jfs.rename(:d, 'sub', :e, 'sub');
-- (the old lock, advisory (1785095027, 1), which any role could take; the
-- stripe's advisory lock, 1785099008, is a try-lock no one waits for)
SELECT count(*) AS rename_advisory_locks FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND classid = 1785095027;
COMMIT;
-- end_stalling finds nothing to end here (e2e `stalls` ends real holders)
SET SESSION AUTHORIZATION jfs_regress_ids_a;
SELECT jfs.end_stalling();
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_ids_reader;
SELECT jfs.end_stalling();
RESET SESSION AUTHORIZATION;

SELECT jfs.session_close(:sa), jfs.session_close(:sb);
DROP OWNED BY jfs_regress_ids_a, jfs_regress_ids_b, jfs_regress_ids_reader, jfs_regress_ids_admin;
DROP ROLE jfs_regress_ids_a;
DROP ROLE jfs_regress_ids_b;
DROP ROLE jfs_regress_ids_reader;
DROP ROLE jfs_regress_ids_admin;
SELECT * FROM jfs.fsck();
