-- The change log: each change a procedure makes is a row of jfs.change,
-- written in its transaction; jfs.changes shows the rows with paths,
-- jfs.changes_since(id) gives them after a bookmark; retention and pruning.
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
-- a mount's connections are named jfs:SID: its changes carry the session
-- (one its role opened: here session 42, the superuser's)
INSERT INTO jfs.session (sid, host) VALUES (42, 'regress');
SET application_name = 'jfs:42';
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 1000, 100) \gset
SELECT inode AS f FROM jfs.mknod(:d, 'f', 1, 420, 1000, 100) \gset
SELECT errno FROM jfs.symlink(:d, 'ln', 'f', 1000, 100);
SELECT errno FROM jfs.mknod(:d, 'fifo', 4, 420, 1000, 100);
SELECT errno FROM jfs.link(:f, 1, 'hard');
SELECT errno FROM jfs.write_slice(:f, 0, 0, 7, 100, 0, 100);
SELECT errno FROM jfs.setattr(:f, 1, 384);
SELECT errno FROM jfs.setattr(:f, 8, p_length => 10);
-- the same length again changes nothing and logs nothing
SELECT errno FROM jfs.setattr(:f, 8, p_length => 10);
SELECT jfs.setxattr(:f, 'user.a', 'v');
SELECT jfs.removexattr(:f, 'user.a');
SELECT errno FROM jfs.rename(:d, 'f', 1, 'g');
RESET application_name;
-- people's SQL has no session
SELECT errno FROM jfs.unlink(1, 'hard');
SELECT errno FROM jfs.mknod(1, 'x', 1, 420, 0, 0);
SELECT errno FROM jfs.rename(1, 'x', 1, 'g', 2);
SELECT errno FROM jfs.unlink(:d, 'ln');
SELECT name, errno FROM jfs.batch_unlink(:d, ARRAY['fifo', 'nothing']::bytea[]);
SELECT errno FROM jfs.rmdir(1, 'd');
SELECT inode AS c FROM jfs.clone('/g', '/g2') \gset
SELECT jfs.set_tier('/g2', 1);
SELECT errno FROM jfs.mknod(1, 'tree', 2, 493, 0, 0);
SELECT errno FROM jfs.mknod(jfs.resolve('/tree'), 'leaf', 1, 420, 0, 0);
SELECT jfs.rmr('/tree');
-- what fails logs nothing
SELECT errno FROM jfs.mknod(1, 'g', 1, 420, 0, 0);
SELECT errno FROM jfs.unlink(1, 'nothing');
SELECT errno FROM jfs.rename(1, 'nothing', 1, 'else');
SELECT id, op, path, path2, xattr, inode, inode2, uid, gid, session FROM jfs.changes ORDER BY id;
-- the feed: everything committed, in order, each once after a bookmark
SELECT count(*) = (SELECT count(*) FROM jfs.change) AS all_given FROM jfs.changes_since(0);
SELECT id, op, path FROM jfs.changes_since(5, 3);
SELECT count(*) FROM jfs.changes_since((SELECT max(id) FROM jfs.change));
-- retention: at least a minute and 1000 rows; administration only
SELECT * FROM jfs.set_changelog_retention('10 seconds');
SELECT * FROM jfs.set_changelog_retention(p_max_rows => 10);
SELECT * FROM jfs.set_changelog_retention('2 hours', 1000);
SELECT 'set_changelog_retention' = ANY (jfs.admin_procedures()) AS admin_only;
-- more rows than kept: pruning keeps the newest 1000
SELECT count(*) FROM generate_series(1, 1100) i, jfs.mknod(1, convert_to('n' || i, 'UTF8'), 1, 420, 0, 0) m
 WHERE m.errno = 0;
SELECT jfs.changelog_prune();
SELECT count(*), max(id) - min(id) < 1000 AS within FROM jfs.change;
SELECT jfs.changelog_prune();
-- older than the age: pruned, oldest first, at most p_limit per call
UPDATE jfs.change SET at = now() - interval '3 hours' WHERE id < (SELECT min(id) + 10 FROM jfs.change);
SELECT jfs.changelog_prune(4), jfs.changelog_prune(100);
SELECT count(*) FROM jfs.change;
-- a bookmark that was pruned is an error: changes after it are lost to it
SELECT * FROM jfs.changes_since(3);
SELECT * FROM jfs.fsck();
