-- jfs.touch_atime, which a mount with --atime-mode relatime or
-- strictatime calls after a read: relatime moves an atime not after the
-- mtime or ctime, or a day old; strictatime any atime a second old; the
-- ctime stays; a read-only role may not call it.
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
DROP ROLE IF EXISTS jfs_regress_atime_ro;
CREATE ROLE jfs_regress_atime_ro;
SELECT jfs.grant_client('jfs_regress_atime_ro', p_read_only => true);
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT (extract(epoch FROM now()) * 1e9)::bigint AS now_ns \gset
-- read after a change: moves (relatime); the ctime stays
UPDATE jfs.node SET atime = :now_ns - 10e9, mtime = :now_ns - 5e9, ctime = :now_ns - 20e9 WHERE inode = :f;
SELECT jfs.touch_atime(:f) >= :now_ns AS moved_to_now;
SELECT ctime = :now_ns - 20e9 AS ctime_stays FROM jfs.node WHERE inode = :f;
-- read again, nothing changed since: stays (relatime), moves (strictatime)
UPDATE jfs.node SET atime = :now_ns - 10e9, mtime = :now_ns - 20e9, ctime = :now_ns - 20e9 WHERE inode = :f;
SELECT jfs.touch_atime(:f) = :now_ns - 10e9 AS relatime_stays;
SELECT jfs.touch_atime(:f, true) >= :now_ns AS strictatime_moves;
-- a day old: moves; less than a second old: stays, even strictly
UPDATE jfs.node SET atime = :now_ns - 86400e9, mtime = :now_ns - 90000e9, ctime = :now_ns - 90000e9 WHERE inode = :f;
SELECT jfs.touch_atime(:f) >= :now_ns AS day_old_moves;
UPDATE jfs.node SET atime = :now_ns - 5e8 WHERE inode = :f;
SELECT jfs.touch_atime(:f, true) = :now_ns - 5e8 AS second_stays;
-- no such node; a read-only role
SELECT jfs.touch_atime(999999) IS NULL AS none;
SET SESSION AUTHORIZATION jfs_regress_atime_ro;
SELECT jfs.touch_atime(:f);
RESET SESSION AUTHORIZATION;
DROP OWNED BY jfs_regress_atime_ro;
DROP ROLE jfs_regress_atime_ro;
SELECT * FROM jfs.fsck();
