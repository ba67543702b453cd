-- A file made under a lease with its data's first commit (sql/lease.sql):
-- mknod_with_slices makes the file as mknod makes it, then commits its
-- slices and the attribute change that goes with them, in one
-- transaction; sent again after a lost answer it finds the file made; a
-- refused create commits nothing; another session is refused while the
-- lease is held
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 1000, 1000) \gset
SELECT inode AS taken FROM jfs.mknod(:d, 'taken', 1, 420, 0, 0) \gset
SELECT jfs.alloc_ids('inode', 10) AS i \gset
SELECT jfs.alloc_ids('slice', 10) AS b \gset
SELECT jfs.session_open('h1', 1, '{"version": "0.2.21"}', '1 minute') AS s1 \gset
SELECT jfs.session_open('h2', 2, '{"version": "0.2.21"}', '1 minute') AS s2 \gset
SELECT set_config('application_name', 'jfs:' || :s1, false) IS NOT NULL AS as_s1;
SELECT errno FROM jfs.take_lease(:s1, :d);
-- made (mode less the umask, the owner given) and 100 bytes committed,
-- then cp -a's chmod and utimens, in one call
SELECT create_errno, committed, (a).errno, (a).length, (a).mode, (a).uid, (a).gid, (a).mtime, attr_errno
  FROM jfs.mknod_with_slices(:i, '{0}', '{0}', ARRAY[:b], '{100}', '{0}', '{100}', NULL,
                             1 | 16 | 32, 416, NULL, NULL, 5000, 7000, NULL,
                             :d, 'f', 438, 18, 1000, 1001);
SELECT convert_from(e.name, 'UTF8') AS name, n.inode - :i AS inode, n.type, n.mode, n.uid, n.gid, n.nlink,
       n.length, n.atime, n.mtime
  FROM jfs.edge e JOIN jfs.node n ON n.inode = e.inode WHERE e.parent = :d AND e.name = 'f';
SELECT op, inode - :i AS inode, convert_from(name, 'UTF8') AS name FROM jfs.change
 WHERE inode = :i ORDER BY id;
-- charged as mknod and write_slices charge
SELECT inodes, space FROM jfs.dir_usage WHERE inode = :d;
-- the same call sent again after its answer was lost (its slice found
-- committed, the rest sent): the file is found made
SELECT create_errno, committed, (a).errno, (a).length
  FROM jfs.mknod_with_slices(:i, '{0}', '{100}', ARRAY[:b + 1], '{50}', '{0}', '{50}', NULL,
                             0, NULL, NULL, NULL, NULL, NULL, NULL,
                             :d, 'f', 438, 18, 1000, 1001);
-- a name taken by another node (the lease was lost): nothing committed
SELECT create_errno, committed, (a).errno, attr_errno
  FROM jfs.mknod_with_slices(:i + 1, '{0}', '{0}', ARRAY[:b + 2], '{10}', '{0}', '{10}', NULL,
                             0, NULL, NULL, NULL, NULL, NULL, NULL,
                             :d, 'taken', 420, 0, 0, 0);
SELECT count(*) AS nothing_made FROM jfs.node WHERE inode = :i + 1;
SELECT state FROM jfs.slice_states(ARRAY[:b + 2]::bigint[]);
-- an inode not handed out, a bad mode
SELECT create_errno FROM jfs.mknod_with_slices(999999999, '{0}', '{0}', ARRAY[:b + 3], '{10}', '{0}', '{10}', NULL,
                                               0, NULL, NULL, NULL, NULL, NULL, NULL, :d, 'g', 420, 0, 0, 0);
SELECT create_errno FROM jfs.mknod_with_slices(:i + 2, '{0}', '{0}', ARRAY[:b + 3], '{10}', '{0}', '{10}', NULL,
                                               0, NULL, NULL, NULL, NULL, NULL, NULL, :d, 'g', 65535, 0, 0, 0);
-- another session is refused while the lease is held
SELECT set_config('application_name', 'jfs:' || :s2, false) IS NOT NULL AS as_s2;
SELECT create_errno FROM jfs.mknod_with_slices(:i + 3, '{0}', '{0}', ARRAY[:b + 4], '{10}', '{0}', '{10}', NULL,
                                               0, NULL, NULL, NULL, NULL, NULL, NULL, :d, 'h', 420, 0, 0, 0);
SELECT count(*) AS h_not_made FROM jfs.edge WHERE parent = :d AND name = 'h';
-- PUBLIC may not call it; a read-only client role is not granted it
SELECT has_function_privilege('public',
         'jfs.mknod_with_slices(bigint, integer[], integer[], bigint[], integer[], integer[], integer[], bigint, '
         'integer, integer, bigint, bigint, bigint, bigint, integer, bigint, bytea, integer, integer, bigint, bigint, bytea[])',
         'EXECUTE') AS public_may;
SELECT 'mknod_with_slices' = ANY (jfs.write_procedures()) AS a_write_procedure;
