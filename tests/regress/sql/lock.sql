-- file locks shared by every mount: conflicts, split and merge, F_GETLK, deadlock, release, session end
\ir tests/regress/fresh_volume.sql
SELECT jfs.session_register('host-a', 101) AS sa \gset
SELECT jfs.session_register('host-b', 202) AS sb \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0) \gset
\set max 9223372036854775807
-- owner 1 of A locks 0..99 exclusively; B's owner 7 may not lock any byte of it, may lock past it
SELECT jfs.setlk(:f, :sa, 1, 1, 0, 99, 1001);
SELECT jfs.setlk(:f, :sb, 7, 0, 50, 50, 2002) AS overlapping_read, jfs.setlk(:f, :sb, 7, 1, 100, 199, 2002) AS past_it;
-- another owner of the same session conflicts too (two processes on one mount)
SELECT jfs.setlk(:f, :sa, 2, 0, 0, 0, 1002) AS other_owner_same_mount;
-- F_GETLK names the holder; the owner's own lock does not conflict with itself
SELECT * FROM jfs.getlk(:f, :sb, 7, 0, 10, 20);
SELECT * FROM jfs.getlk(:f, :sa, 1, 1, 0, :max);
SELECT ltype, lstart, lend FROM jfs.getlk(:f, :sb, 7, 1, 200, 300);
-- shared locks share
SELECT jfs.setlk(:g, :sa, 1, 0, 0, :max, 1001), jfs.setlk(:g, :sb, 7, 0, 0, :max, 2002);
SELECT jfs.setlk(:g, :sb, 7, 1, 0, :max, 2002) AS upgrade_while_shared;
-- split: unlocking the middle of A's 0..99 leaves two ranges; relocking it read-only makes three
SELECT jfs.setlk(:f, :sa, 1, 2, 40, 59, 1001);
SELECT ltype, lstart, lend FROM jfs.plock WHERE inode = :f AND sid = :sa ORDER BY lstart;
SELECT jfs.setlk(:f, :sb, 7, 1, 40, 59, 2002) AS the_hole_is_free;
SELECT jfs.setlk(:f, :sb, 7, 2, 40, 59, 2002);
SELECT jfs.setlk(:f, :sa, 1, 0, 40, 59, 1001);
SELECT ltype, lstart, lend FROM jfs.plock WHERE inode = :f AND sid = :sa ORDER BY lstart;
-- merge: the same type over touching ranges becomes one range
SELECT jfs.setlk(:f, :sa, 1, 1, 40, 59, 1001);
SELECT ltype, lstart, lend FROM jfs.plock WHERE inode = :f AND sid = :sa ORDER BY lstart;
-- the locks view, for people
SELECT path, host, pid, type, start, "end" FROM jfs.locks ORDER BY sid, start;
-- deadlock: A's owner 1 waits for B's 100..199 while B's owner 7 waits for A's 0..99
SELECT jfs.setlk(:f, :sa, 1, 1, 150, 150, 1001, true) AS a_waits;
SELECT sid = :sa AS a, lstart, lend FROM jfs.lock_wait;
SELECT jfs.setlk(:f, :sb, 7, 1, 0, 0, 2002, true) AS b_would_deadlock;
-- a wait nobody refreshed lately does not count, nor one cancelled (an interrupted F_SETLKW)
UPDATE jfs.lock_wait SET at = now() - interval '1 minute';
SELECT jfs.setlk(:f, :sb, 7, 1, 0, 0, 2002, true) AS b_waits;
SELECT jfs.setlk(:f, :sa, 1, 1, 150, 150, 1001, true) AS a_would_deadlock;
SELECT jfs.cancel_lock_wait(:f, :sb, 7);
SELECT jfs.setlk(:f, :sa, 1, 1, 150, 150, 1001, true) AS a_waits_again;
-- bad input
SELECT jfs.setlk(:f, :sa, 1, 3, 0, 0, 1), jfs.setlk(:f, :sa, 1, 1, 10, 5, 1), jfs.setlk(:f, :sa, 1, 1, -1, 5, 1),
       jfs.setlk(424242, :sa, 1, 1, 0, 0, 1), jfs.setlk(:f, 99999, 1, 1, 0, 0, 1);
-- a close by the owner drops its locks (and its waits): B now gets 0..0
SELECT jfs.unlock_owner(:f, :sa, 1);
SELECT jfs.setlk(:f, :sb, 7, 1, 0, 0, 2002);
SELECT count(*) AS waits FROM jfs.lock_wait;
-- a session that ends (or dies and is cleaned up) takes its locks along
SELECT jfs.session_close(:sb);
SELECT count(*) AS locks_left FROM jfs.plock WHERE sid = :sb;
SELECT jfs.setlk(:g, :sa, 1, 1, 0, :max, 1001) AS a_gets_g;
SELECT * FROM jfs.fsck();
