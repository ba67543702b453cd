-- Write-back creates (sql/lease.sql): lease_commit makes the regular files
-- a lease's holder answered as mknod makes them (mode, owner, setgid,
-- default ACL, squash, usage, the change log), refuses each bad entry
-- alone, says when the holder may go on answering creates, and is refused
-- to other sessions while the lease is held
\set VERBOSITY terse
\ir tests/regress/fresh_extension.sql
DROP ROLE IF EXISTS jfs_lc_all;
CREATE ROLE jfs_lc_all;
SELECT jfs.grant_client('jfs_lc_all', p_all_squash => '1500:1501');
SELECT errno FROM jfs.format('regress');
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 1000, 1000) \gset
SELECT errno FROM jfs.mknod(:d, 'old', 1, 420, 0, 0);
SELECT jfs.alloc_ids('inode', 20) AS i \gset
SELECT jfs.session_open('h1', 1, '{"version": "0.2.20"}', '1 minute') AS s1 \gset
SELECT jfs.session_open('h2', 2, '{"version": "0.2.20"}', '1 minute') AS s2 \gset
SELECT set_config('application_name', 'jfs:' || :s1, false) IS NOT NULL AS as_s1;
-- taken: creates may be answered (take_lease says so, as lease_commit does)
SELECT errno, creates FROM jfs.take_lease(:s1, :d);
-- nothing to commit: the lease kept, creates may be answered
SELECT unlink_errnos, errnos, kept, creates
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true);
-- a batch: made with the umask applied and the times given (none later
-- than now); a name taken, '.', a name too long or with a slash, an
-- inode not handed out, in use or given twice, a bad mode, a name given
-- twice (its first made): each refused alone
SELECT errnos, kept, creates
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}',
         ARRAY['a', 'old', '.', repeat('x', 256), 'b/c', 'e', 'f', 'g', 'h', 'a', 'b']::bytea[],
         ARRAY[:i, :i + 1, :i + 2, :i + 3, :i + 4, 999999999, :d, :i, :i + 5, :i + 6, :i + 7],
         ARRAY[33188, 420, 420, 420, 420, 420, 420, 420, 16877, 420, 511],
         ARRAY[18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
         ARRAY[1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1001]::bigint[],
         ARRAY[1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1002]::bigint[],
         ARRAY[1000000000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9000000000000000000]::bigint[], true);
SELECT convert_from(e.name, 'UTF8') AS name, n.inode - :i AS inode, n.type, n.mode, n.uid, n.gid,
       n.atime = 1000000000 AS time_given, n.mtime = n.ctime AND n.ctime = n.atime AS same_times, n.atime <= jfs._now() AS not_later,
       n.nlink, n.length, n.tier
  FROM jfs.edge e JOIN jfs.node n ON n.inode = e.inode WHERE e.parent = :d ORDER BY e.name;
SELECT op, inode - :i AS inode, parent = :d AS in_d, convert_from(name, 'UTF8') AS name, uid, gid
  FROM jfs.change WHERE op = 'create' AND parent = :d AND inode >= :i ORDER BY id;
-- charged as mknod charges: the directory's figures and the volume's
SELECT inodes, space FROM jfs.dir_usage WHERE inode = :d;
SELECT used_space, used_inodes FROM jfs.usage;
-- in a setgid directory the group is the directory's
SELECT errno FROM jfs.setattr(:d, 1, p_mode => 1517);
SELECT errnos FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', ARRAY['sg']::bytea[], ARRAY[:i + 8], ARRAY[420], ARRAY[0],
                                    ARRAY[7]::bigint[], ARRAY[7]::bigint[], ARRAY[0]::bigint[], true);
SELECT uid, gid, mode FROM jfs.node WHERE inode = :i + 8;
-- one commit: an unlink, then a create of the same name (a new node); a
-- batch sent again after its answer was lost finds its creates made
SELECT errnos FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', ARRAY['tmp']::bytea[], ARRAY[:i + 14], ARRAY[420],
                                    ARRAY[0], ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
-- (the directory's times old: the commit moves them, and tells them)
UPDATE jfs.node SET mtime = 1, ctime = 1 WHERE inode = :d;
SELECT unlink_errnos, errnos, kept, creates, dir_mtime, dir_ctime
  FROM jfs.lease_commit(:s1, :d, ARRAY['tmp', 'nothere']::bytea[], ARRAY[:i + 14, :i + 1], '{}',
                        ARRAY['tmp', 'tmp2']::bytea[], ARRAY[:i + 15, :i + 16], ARRAY[420, 420], ARRAY[0, 0],
                        ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[], true) \gset r_
SELECT :'r_unlink_errnos' AS unlink_errnos, :'r_errnos' AS errnos, :'r_kept' AS kept, :'r_creates' AS creates,
       :r_dir_mtime > 1 AND (:r_dir_mtime, :r_dir_ctime) = (SELECT mtime, ctime FROM jfs.node WHERE inode = :d)
         AS dir_times_told;
SELECT unlink_errnos, errnos
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}',
                        ARRAY['tmp', 'tmp2']::bytea[], ARRAY[:i + 15, :i + 16], ARRAY[420, 420], ARRAY[0, 0],
                        ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[], true);
SELECT convert_from(e.name, 'UTF8') AS name, e.inode - :i AS inode FROM jfs.edge e
 WHERE e.parent = :d AND e.name IN ('tmp', 'tmp2') ORDER BY e.name;
SELECT count(*) AS tmp_node_gone FROM jfs.node WHERE inode = :i + 14;
-- another session is refused the commit while the lease is held
SELECT set_config('application_name', 'jfs:' || :s2, false) IS NOT NULL AS as_s2;
SELECT errnos FROM jfs.lease_commit(:s2, :d, '{}', '{}', '{}', ARRAY['x']::bytea[], ARRAY[:i + 9], ARRAY[420], ARRAY[0],
                                    ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
SELECT set_config('application_name', 'jfs:' || :s1, false) IS NOT NULL AS as_s1;
-- the arrays must pair up
SELECT * FROM jfs.lease_commit(:s1, :d, ARRAY['x']::bytea[], '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
                               true);
SELECT * FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', ARRAY['x']::bytea[], '{}', ARRAY[420], ARRAY[0],
                               ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
-- a limit set: answered creates are made within it (checked against it,
-- as mknod checks), and the holder may answer no more
SELECT count(*) FROM jfs.set_quota('/d', 0, 5);
-- (take_lease says so too)
SELECT errno, creates FROM jfs.take_lease(:s1, :d);
SELECT errnos, kept, creates
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', ARRAY['q']::bytea[], ARRAY[:i + 9], ARRAY[420], ARRAY[0],
                        ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
SELECT count(*) FROM jfs.delete_quota('/d');
SELECT creates FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true);
-- a default ACL: it replaces the umask, the file gets its access ACL, and
-- the holder may answer no more
SELECT jfs.enable_acl();
SELECT jfs.set_acl(:d, 'd', '{1,2,4,16,32}', '{-1,1000,-1,-1,-1}', '{7,6,5,5,0}');
SELECT errno, creates FROM jfs.take_lease(:s1, :d);
SELECT errnos, kept, creates
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', ARRAY['acl']::bytea[], ARRAY[:i + 10], ARRAY[438], ARRAY[18],
                        ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
SELECT mode FROM jfs.node WHERE inode = :i + 10;
SELECT tag, qualifier, perm FROM jfs.acl WHERE inode = :i + 10 AND kind = 'a' ORDER BY tag, qualifier;
-- asked for by another session (0.2.22): a commit that holds the lease
-- keeps it and says it is wanted, and the holder's next commit gives it
-- up; without a hold (as clients before 0.2.22 commit) it ends at once. A
-- hold keeps a lease asked for less than a second ago only; one nobody
-- asked for, it keeps as any commit does
SELECT jfs.want_lease(:d) AS free;
SELECT kept, wanted, creates
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true, true);
SELECT kept, wanted FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true);
SELECT count(*) AS leases FROM jfs.dir_lease;
SELECT errno FROM jfs.take_lease(:s1, :d);
SELECT jfs.want_lease(:d) AS free;
UPDATE jfs.dir_lease SET wanted = now() - interval '2 seconds';
SELECT kept, wanted
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true, true);
SELECT count(*) AS leases FROM jfs.dir_lease;
SELECT errno FROM jfs.take_lease(:s1, :d);
SELECT kept, wanted
  FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', true, true);
-- given up when not to be kept
SELECT kept, creates FROM jfs.lease_commit(:s1, :d, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', false);
SELECT count(*) AS leases FROM jfs.dir_lease;
-- a squashed role's creates are squashed, and it may answer none itself
-- (in a directory of its own: no setgid, no default ACL)
RESET application_name;
SELECT inode AS sqd FROM jfs.mknod(1, 'sqd', 2, 511, 0, 0) \gset
SET SESSION AUTHORIZATION jfs_lc_all;
SELECT jfs.session_open('h3', 3, '{"version": "0.2.20"}', '1 minute') AS s3 \gset
SELECT jfs.alloc_ids('inode', 1) AS sqi \gset
SELECT set_config('application_name', 'jfs:' || :s3, false) IS NOT NULL AS as_s3;
SELECT errno, creates FROM jfs.take_lease(:s3, :sqd);
SELECT errnos, kept, creates
  FROM jfs.lease_commit(:s3, :sqd, '{}', '{}', '{}', ARRAY['sq']::bytea[], ARRAY[:sqi], ARRAY[420], ARRAY[0],
                        ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
SELECT jfs.session_close(:s3);
RESET SESSION AUTHORIZATION;
RESET application_name;
SELECT uid, gid FROM jfs.node WHERE inode = :sqi;
-- a directory missing: every entry 2, and no lease; a file: 20
SELECT set_config('application_name', 'jfs:' || :s1, false) IS NOT NULL AS as_s1;
SELECT errnos, kept, creates
  FROM jfs.lease_commit(:s1, 999999, '{}', '{}', '{}', ARRAY['a', 'b']::bytea[], ARRAY[:i + 12, :i + 13], ARRAY[420, 420],
                        ARRAY[0, 0], ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[], ARRAY[0, 0]::bigint[], true);
SELECT errnos FROM jfs.lease_commit(:s1, :i, '{}', '{}', '{}', ARRAY['a']::bytea[], ARRAY[:i + 12], ARRAY[420],
                                    ARRAY[0], ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], true);
RESET application_name;
DROP OWNED BY jfs_lc_all;
DROP ROLE jfs_lc_all;
DELETE FROM jfs.client_role;
SELECT * FROM jfs.fsck();
