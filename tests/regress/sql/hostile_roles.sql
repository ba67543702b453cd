-- Leases, sessions and keys as an attacker uses them from SQL, with the
-- grants a mount has (jfs.grant_client) and a read-only role's: a holder
-- cannot keep a directory others ask for, whatever it calls; lease_commit
-- makes no file past a quota, lease or no lease; what a session claims of
-- itself (an old client's version) changes nothing for the others; a
-- read-only role reads past leases and asks for none; no session declares
-- a timeout past an hour, and an administrator ends any session; a
-- read-only role gets no store keys that can delete blocks.
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
DROP ROLE IF EXISTS jfs_regress_lease_a;
DROP ROLE IF EXISTS jfs_regress_lease_b;
DROP ROLE IF EXISTS jfs_regress_lease_ro;
CREATE ROLE jfs_regress_lease_a;
CREATE ROLE jfs_regress_lease_b;
CREATE ROLE jfs_regress_lease_ro;
SELECT jfs.grant_client('jfs_regress_lease_a');
SELECT jfs.grant_client('jfs_regress_lease_b');
SELECT jfs.grant_client('jfs_regress_lease_ro', p_read_only => true);
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 511, 0, 0) \gset
SELECT errno FROM jfs.mknod(:d, 'f', 1, 420, 0, 0);

-- a read-only role's session claiming a client older than leases, and
-- one of B's claiming 0.1.0: leases are still taken
SET SESSION AUTHORIZATION jfs_regress_lease_ro;
SELECT jfs.session_open('ro', 1, '{"version": "0.1.0"}', '1 minute') AS sro \gset
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_lease_b;
SELECT jfs.session_open('b', 2, '{"version": "0.1.0"}', '1 minute') AS sb \gset
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT jfs.session_open('a', 3, '{"version": "0.2.23"}', '1 minute') AS sa \gset
SELECT set_config('application_name', 'jfs:' || :sa, false) IS NOT NULL AS as_a;
SELECT errno FROM jfs.take_lease(:sa, :d);
RESET SESSION AUTHORIZATION;

-- the read-only role reads past the lease, and may not ask for it
SET SESSION AUTHORIZATION jfs_regress_lease_ro;
SELECT set_config('application_name', 'jfs:' || :sro, false) IS NOT NULL AS as_ro;
SELECT errno FROM jfs.lookup(:d, 'f');
SELECT count(*) AS entries FROM jfs.readdir(:d);
SELECT jfs.want_lease(:d);
RESET SESSION AUTHORIZATION;
SELECT wanted IS NULL AS not_wanted FROM jfs.dir_lease WHERE dir = :d;

-- B is refused and asks; A keeps taking the lease again to keep it: a
-- take a second after the asking ends the lease instead
SET SESSION AUTHORIZATION jfs_regress_lease_b;
SELECT set_config('application_name', 'jfs:' || :sb, false) IS NOT NULL AS as_b;
SELECT errno FROM jfs.lookup(:d, 'f');
SELECT jfs.want_lease(:d) AS free;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT errno FROM jfs.take_lease(:sa, :d);
RESET SESSION AUTHORIZATION;
UPDATE jfs.dir_lease SET wanted = now() - interval '2 seconds' WHERE dir = :d;
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT errno FROM jfs.take_lease(:sa, :d);
RESET SESSION AUTHORIZATION;
SELECT count(*) AS leases FROM jfs.dir_lease;
-- nor does a commit keep one asked for more than a second ago, held or not
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT errno FROM jfs.take_lease(:sa, :d);
RESET SESSION AUTHORIZATION;
UPDATE jfs.dir_lease SET wanted = now() - interval '2 seconds' WHERE dir = :d;
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT kept, wanted FROM jfs.lease_commit(:sa, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
                                          true, true);
SELECT errno FROM jfs.take_lease(:sa, :d);
SELECT kept FROM jfs.lease_unlink(:sa, :d, '{}', '{}', '{}', true);
RESET SESSION AUTHORIZATION;
SELECT count(*) AS leases FROM jfs.dir_lease;
-- a holder that keeps it 5 s after it was asked for (taking it again, in
-- a client that does not give up) loses it to the next ask, however fresh
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT errno FROM jfs.take_lease(:sa, :d);
RESET SESSION AUTHORIZATION;
UPDATE jfs.dir_lease SET wanted = now() - interval '6 seconds', taken = now() WHERE dir = :d;
SET SESSION AUTHORIZATION jfs_regress_lease_b;
SELECT jfs.want_lease(:d) AS free;
RESET SESSION AUTHORIZATION;
SELECT count(*) AS leases FROM jfs.dir_lease;
-- a lease is renewed for a minute from its taking, no longer
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT errno FROM jfs.take_lease(:sa, :d);
SELECT kept FROM jfs.lease_unlink(:sa, :d, '{}', '{}', '{}', true);
RESET SESSION AUTHORIZATION;
UPDATE jfs.dir_lease SET granted = now() - interval '61 seconds' WHERE dir = :d;
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT kept FROM jfs.lease_commit(:sa, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true);
RESET SESSION AUTHORIZATION;
SELECT count(*) AS leases FROM jfs.dir_lease;

-- a quota of 5 inodes on d (f and 4 more): B, without the lease, and A,
-- with it, make no file past it through lease_commit
SELECT count(*) FROM jfs.set_quota('/d', 0, 5);
SET SESSION AUTHORIZATION jfs_regress_lease_b;
SELECT jfs.alloc_ids('inode', 100) AS ib \gset
SELECT errnos, kept
  FROM jfs.lease_commit(:sb, :d, '{}', '{}', '{}',
                        ARRAY(SELECT convert_to('b' || i, 'UTF8') FROM generate_series(1, 20) i),
                        ARRAY(SELECT :ib + i FROM generate_series(0, 19) i),
                        array_fill(420, ARRAY[20]), array_fill(0, ARRAY[20]),
                        array_fill(0::bigint, ARRAY[20]), array_fill(0::bigint, ARRAY[20]),
                        array_fill(0::bigint, ARRAY[20]), false);
RESET SESSION AUTHORIZATION;
SELECT count(*) AS entries FROM jfs.edge WHERE parent = :d;
SELECT used_inodes, max_inodes FROM jfs.quotas WHERE kind = 'dir';
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT set_config('application_name', 'jfs:' || :sa, false) IS NOT NULL AS as_a;
SELECT jfs.alloc_ids('inode', 100) AS ia \gset
SELECT errno, creates FROM jfs.take_lease(:sa, :d);
SELECT errnos, kept
  FROM jfs.lease_commit(:sa, :d, '{}', '{}', '{}', ARRAY['a1', 'a2']::bytea[], ARRAY[:ia, :ia + 1],
                        ARRAY[420, 420], ARRAY[0, 0], ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[],
                        ARRAY[0, 0]::bigint[], false);
RESET SESSION AUTHORIZATION;
SELECT count(*) AS entries FROM jfs.edge WHERE parent = :d;
SELECT used_inodes, max_inodes FROM jfs.quotas WHERE kind = 'dir';
SELECT count(*) FROM jfs.delete_quota('/d');

-- no session declares a timeout past an hour; an administrator ends any
SET SESSION AUTHORIZATION jfs_regress_lease_ro;
SELECT jfs.session_open('century', 4, '{}', '100 years') AS sc \gset
RESET SESSION AUTHORIZATION;
SELECT session_timeout FROM jfs.session WHERE sid = :sc;
UPDATE jfs.session SET heartbeat = now() - interval '61 minutes' WHERE sid = :sc;
SET SESSION AUTHORIZATION jfs_regress_lease_b;
SELECT jfs.session_cleanup('1 minute');
SELECT jfs.session_close(:sa);
RESET SESSION AUTHORIZATION;
SELECT jfs.session_close(:sa);
SELECT count(*) AS sessions FROM jfs.session WHERE sid IN (:sc, :sa);
SELECT jfs.session_close(:sb);
SELECT jfs.session_close(:sro);
RESET application_name;

-- the store's keys: a mount's role gets them; a read-only role none, then
-- the readers' pair once an administrator keeps one (which a client role
-- may not)
INSERT INTO jfs.secret (access_key, secret_key) VALUES ('AKWRITE', 'SKWRITE')
    ON CONFLICT (id) DO UPDATE SET access_key = 'AKWRITE', secret_key = 'SKWRITE';
SET SESSION AUTHORIZATION jfs_regress_lease_a;
SELECT * FROM jfs.volume_secrets();
SELECT jfs.set_reader_keys('AKMINE', 'SKMINE');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jfs_regress_lease_ro;
SELECT * FROM jfs.volume_secrets();
RESET SESSION AUTHORIZATION;
SELECT jfs.set_reader_keys('AKREAD', '');
SELECT jfs.set_reader_keys('AKREAD', 'SKREAD');
SET SESSION AUTHORIZATION jfs_regress_lease_ro;
SELECT * FROM jfs.volume_secrets();
RESET SESSION AUTHORIZATION;
SELECT * FROM jfs.volume_secrets();
SELECT * FROM jfs.fsck();
DROP OWNED BY jfs_regress_lease_a, jfs_regress_lease_b, jfs_regress_lease_ro;
DROP ROLE jfs_regress_lease_a;
DROP ROLE jfs_regress_lease_b;
DROP ROLE jfs_regress_lease_ro;
