-- sessions and open-unlinked files: sustained until released or the session dies
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT jfs.session_register('host-a', 101, '{"mountpoint": "/mnt/a"}') AS sa \gset
SELECT jfs.session_register('host-b', 202) AS sb \gset
SELECT host, pid, info FROM jfs.session ORDER BY sid;
SELECT jfs.session_heartbeat(:sa), jfs.session_heartbeat(99999);
-- session A has f (among others) open and unlinks it: the node stays, unnamed, until A releases it
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, 5, 4096, 0, 4096);
SELECT errno, nlink FROM jfs.unlink(1, 'f', :sa, ARRAY[7, :f, 9]);
SELECT errno, nlink, length FROM jfs.getattr(:f);
SELECT count(*) AS slices FROM jfs.read_chunk(:f, 0);
SELECT sid = :sa AS held_by_a FROM jfs.sustained;
SELECT count(*) AS queued FROM jfs.delslice;
SELECT * FROM jfs.fsck();
-- releasing it (last close) frees the node and queues its data
SELECT jfs.release(:sa, :f);
SELECT errno FROM jfs.getattr(:f);
SELECT slice_id FROM jfs.delslice;
SELECT jfs.release(:sa, :f);
-- a hint naming another inode, or another session's id, does not keep a
-- file for the caller; while another session is live, it is kept in
-- unlinked (that session may have it open) and freed after a grace
SELECT inode AS g FROM jfs.mknod(1, 'g', 1, 420, 0, 0) \gset
SELECT errno, nlink FROM jfs.unlink(1, 'g', :sa, ARRAY[12345]);
SELECT errno, nlink FROM jfs.getattr(:g);
SELECT inode AS h FROM jfs.mknod(1, 'h', 1, 420, 0, 0) \gset
SELECT errno, nlink FROM jfs.unlink(1, 'h', 99999, ARRAY[:h]);
SELECT count(*) AS kept FROM jfs.unlinked;
SELECT count(*) AS held FROM jfs.sustained WHERE inode IN (:g, :h);
SELECT * FROM jfs.fsck();
-- session B has h open (and a named file) and reads the removal: it holds h
SELECT inode AS named FROM jfs.mknod(1, 'named', 1, 420, 0, 0) \gset
SELECT jfs.sustain(:sb, ARRAY[:h, :named]) = ARRAY[:h]::bigint[] AS b_holds_h;
SELECT jfs.sustain(99999, ARRAY[:g]) AS no_session;
SELECT jfs.free_unlinked() AS freed_within_the_grace;
UPDATE jfs.unlinked SET at = now() - interval '1 minute';
SELECT jfs.free_unlinked() AS freed_after_it;
SELECT errno FROM jfs.getattr(:g);
SELECT errno, nlink FROM jfs.getattr(:h);
SELECT count(*) AS kept FROM jfs.unlinked;
SELECT * FROM jfs.fsck();
SELECT jfs.release(:sb, :h);
SELECT errno FROM jfs.getattr(:h);
-- rename over a file the caller has open keeps it as well
SELECT inode AS k FROM jfs.mknod(1, 'k', 1, 420, 0, 0) \gset
SELECT inode AS k2 FROM jfs.mknod(1, 'k2', 1, 420, 0, 0) \gset
SELECT errno, replaced = :k AS replaced_k, replaced_nlink FROM jfs.rename(1, 'k2', 1, 'k', 0, :sb, ARRAY[:k]);
SELECT errno, nlink FROM jfs.getattr(:k);
-- a session that stops heartbeating is cleaned up by anyone: its open files go
UPDATE jfs.session SET heartbeat = now() - interval '1 hour' WHERE sid = :sb;
SELECT jfs.session_cleanup('5 minutes');
SELECT errno FROM jfs.getattr(:k);
SELECT count(*) AS sessions FROM jfs.session;
SELECT jfs.session_heartbeat(:sb) AS dead_session_heartbeat;
-- alone, a session's removal frees at once
SELECT inode AS n FROM jfs.mknod(1, 'n', 1, 420, 0, 0) \gset
SELECT errno, nlink FROM jfs.unlink(1, 'n', :sa, ARRAY[]::bigint[]);
SELECT errno FROM jfs.getattr(:n);
SELECT count(*) AS kept FROM jfs.unlinked;
-- a clean close does the same
SELECT inode AS m FROM jfs.mknod(1, 'm', 1, 420, 0, 0) \gset
SELECT errno, nlink FROM jfs.unlink(1, 'm', :sa, ARRAY[:m]);
SELECT jfs.session_close(:sa), jfs.session_close(:sa);
SELECT errno FROM jfs.getattr(:m);
SELECT count(*) AS sessions, (SELECT count(*) FROM jfs.sustained) AS sustained FROM jfs.session;
SELECT * FROM jfs.fsck();
