-- Directory leases (sql/lease.sql): take_lease's answers, lease_unlink's
-- removals by name and inode (with and without a trash), want_lease, and
-- the refusals a lease makes for other sessions
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 0, 0) \gset
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT count(*) FROM generate_series(1, 5) i, jfs.mknod(:d, convert_to('f' || i, 'UTF8'), 1, 420, 0, 0) m
 WHERE m.errno = 0;
SELECT errno FROM jfs.link(:f, :d, 'hard');
SELECT errno FROM jfs.mknod(:d, 'sub', 2, 493, 0, 0);
SELECT jfs.session_open('h1', 1, '{"version": "0.2.17"}', '1 minute') AS s1 \gset
SELECT jfs.session_open('h2', 2, '{"version": "0.2.17"}', '1 minute') AS s2 \gset
-- no lease: an unregistered session, a missing node, a file, a directory
-- too big for the limit
SELECT errno FROM jfs.take_lease(999, :d);
SELECT errno FROM jfs.take_lease(:s1, 999999);
SELECT errno FROM jfs.take_lease(:s1, :f);
SELECT errno FROM jfs.take_lease(:s1, :d, 3);
-- (the calls below are the holder's: its connection names its session)
SELECT set_config('application_name', 'jfs:' || :s1, false) IS NOT NULL AS as_s1;
-- taken: every entry, in name order, with types and link counts
SELECT errno, array_to_string(ARRAY(SELECT convert_from(n, 'UTF8') FROM unnest(names) n), ',') AS names,
       types, nlinks, creates
  FROM jfs.take_lease(:s1, :d);
SELECT dir = :d AS dir, sid = :s1 AS holder, wanted FROM jfs.dir_lease;
-- another session is refused it, and asks (marks it wanted)
SELECT errno FROM jfs.take_lease(:s2, :d);
SELECT wanted IS NOT NULL AS wanted FROM jfs.dir_lease;
SELECT jfs.want_lease(:d) AS free;
-- another session's reads and changes of the directory are refused
SELECT set_config('application_name', 'jfs:' || :s2, false) IS NOT NULL AS as_s2;
SELECT errno FROM jfs.lookup(:d, 'f1');
SELECT count(*) FROM jfs.readdir(:d);
SELECT errno FROM jfs.mknod(:d, 'new', 1, 420, 0, 0);
SELECT errno FROM jfs.unlink(:d, 'f1');
SELECT errno FROM jfs.rmdir(1, 'd');
SELECT errno FROM jfs.rename(:d, 'f1', 1, 'moved');
SELECT name FROM jfs.batch_unlink(:d, ARRAY['f1']::bytea[]);
-- ...and so is every other statement that changes them (the triggers on
-- edge, a statement's removed and added rows): the removal of a tree that
-- holds it, a clone into it, an administrator's UPDATE moving an entry out
-- of it and one moving an entry in
SELECT * FROM jfs.rmr(1, 'd');
SELECT inode > 0 AS cloned FROM jfs.clone('/f', '/d/copy');
UPDATE jfs.edge SET parent = 1, name = 'out' WHERE parent = :d AND name = 'f1';
UPDATE jfs.edge SET parent = :d, name = 'in' WHERE parent = 1 AND name = 'f';
-- ...but not the holder's
SELECT set_config('application_name', 'jfs:' || :s1, false) IS NOT NULL AS as_s1;
SELECT errno FROM jfs.lookup(:d, 'f1');
-- the holder's commit: names removed while they name the node given
SELECT errnos, kept
  FROM jfs.lease_unlink(:s1, :d, ARRAY['f1', 'f2', 'f3', 'missing']::bytea[],
                        ARRAY[jfs.resolve('/d/f1'), jfs.resolve('/d/f2'),
                              :f, 12345], '{}', true);
SELECT count(*) AS leases FROM jfs.dir_lease;
SELECT string_agg(convert_from(name, 'UTF8'), ',' ORDER BY name) FROM jfs.edge WHERE parent = :d;
-- names and inodes must pair up
SELECT * FROM jfs.lease_unlink(:s1, :d, ARRAY['f3']::bytea[], '{}', '{}', false);
-- kept while nobody asks, given up when not to be kept
SELECT errno FROM jfs.take_lease(:s1, :d);
SELECT errnos, kept FROM jfs.lease_unlink(:s1, :d, '{}', '{}', '{}', true);
SELECT errnos, kept FROM jfs.lease_unlink(:s1, :d, '{}', '{}', '{}', false);
SELECT count(*) AS leases FROM jfs.dir_lease;
-- a holder silent for 5 s loses the lease to the first session that asks
SELECT errno FROM jfs.take_lease(:s1, :d);
UPDATE jfs.dir_lease SET taken = now() - interval '6 seconds';
SELECT jfs.want_lease(:d) AS free;
SELECT count(*) AS leases FROM jfs.dir_lease;
-- and a late commit of its own leaves what was made again meanwhile
SELECT errno FROM jfs.unlink(:d, 'f3');
SELECT errno FROM jfs.mknod(:d, 'f3', 1, 420, 0, 0);
SELECT errnos, kept FROM jfs.lease_unlink(:s1, :d, ARRAY['f3']::bytea[], ARRAY[:f], '{}', true);
SELECT count(*) AS f3 FROM jfs.edge WHERE parent = :d AND name = 'f3';
-- a session that ends gives its leases up
SELECT errno FROM jfs.take_lease(:s1, :d);
SELECT jfs.session_close(:s1);
SELECT count(*) AS leases FROM jfs.dir_lease;
-- with a trash, the commit moves the names that name their node there
UPDATE jfs.setting SET trash_days = 1;
SELECT jfs.session_open('h3', 4, '{"version": "0.2.17"}', '1 minute') AS s3 \gset
SELECT set_config('application_name', 'jfs:' || :s3, false) IS NOT NULL AS as_s3;
SELECT errno FROM jfs.take_lease(:s3, :d);
SELECT errnos, kept
  FROM jfs.lease_unlink(:s3, :d, ARRAY['f4', 'f5']::bytea[],
                        ARRAY[jfs.resolve('/d/f4'), :f], '{}', false);
SELECT string_agg(convert_from(name, 'UTF8'), ',' ORDER BY name) FROM jfs.edge WHERE parent = :d;
-- a call about two directories, one leased by the caller and one by
-- another session, is refused whichever of the two it looks at first
SELECT inode AS e FROM jfs.mknod(1, 'e', 2, 493, 0, 0) \gset
SELECT jfs.session_open('h4', 5, '{"version": "0.2.17"}', '1 minute') AS s4 \gset
SELECT errno FROM jfs.take_lease(:s4, :e);
SELECT errno FROM jfs.rename(:d, 'nothing', :e, 'moved');
SELECT errno FROM jfs.rename(:e, 'nothing', :d, 'moved');
-- ...and one about the caller's own leased directory alone is answered
SELECT errno FROM jfs.rename(:d, 'nothing', :d, 'moved');
SELECT jfs.session_close(:s4);
RESET application_name;
SELECT * FROM jfs.fsck();
