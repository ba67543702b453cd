-- One definition of "make a regular file": jfs.mknod and the set-based path
-- of jfs.lease_commit (the files a lease's holder answered) make the same
-- node, access ACL and charges over a matrix of directories (plain, setgid
-- of another group, with a default ACL), umasks, modes (with set-id
-- bits), owners, squashed roles and a quota at its limit. Times are left
-- out (mknod's are the server's, lease_commit's those answered).
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
SELECT jfs.enable_acl();
-- what a directory's files are, by name: node, access ACL
CREATE FUNCTION pg_temp.files(p_dir bigint)
RETURNS TABLE (name text, type smallint, mode integer, uid bigint, gid bigint, nlink integer, length bigint,
               tier smallint, acl text)
LANGUAGE sql AS $$
    SELECT convert_from(e.name, 'UTF8'), n.type, n.mode, n.uid, n.gid, n.nlink, n.length, n.tier,
           (SELECT string_agg(a.tag || ':' || a.qualifier || ':' || a.perm, ',' ORDER BY a.tag, a.qualifier)
              FROM jfs.acl a WHERE a.inode = n.inode AND a.kind = 'a')
      FROM jfs.edge e JOIN jfs.node n ON n.inode = e.inode WHERE e.parent = p_dir
$$;
-- twin directories of each kind: m_KIND made into by mknod, l_KIND by lease_commit
CREATE TEMP TABLE twin (kind text, k integer, m bigint, l bigint);
INSERT INTO twin
SELECT kind, k, (jfs.mknod(1, convert_to('m_' || kind, 'UTF8'), 2, 493, 0, 0)).inode,
                (jfs.mknod(1, convert_to('l_' || kind, 'UTF8'), 2, 493, 0, 0)).inode
  FROM unnest(ARRAY['plain', 'setgid', 'acl']) WITH ORDINALITY AS x(kind, k);
SELECT count(*) AS setgid_dirs
  FROM twin, unnest(ARRAY[twin.m, twin.l]) d, jfs.setattr(d, 5, p_mode => 1533, p_gid => 4242) a
 WHERE kind = 'setgid' AND a.errno = 0;
SELECT count(*) AS acl_dirs FROM twin, unnest(ARRAY[twin.m, twin.l]) d
 WHERE kind = 'acl' AND jfs.set_acl(d, 'd', '{1,2,4,16,32}', '{-1,1000,-1,-1,-1}', '{7,6,5,5,0}') = 0;
-- the cases: umask x mode (0644, 0666, 04755, 02755, 06777) x owner
CREATE TEMP TABLE make_case AS
SELECT row_number() OVER (ORDER BY umask, mode, uid, gid) AS n, umask, mode, uid, gid
  FROM unnest(ARRAY[0, 18, 63]) umask,
       unnest(ARRAY[420, 438, 2541, 1517, 3583]) mode,
       (VALUES (0::bigint, 0::bigint), (1000, 1000), (1000, 4242)) o(uid, gid);
SELECT count(*) AS cases FROM make_case;
-- by mknod
SELECT count(*) FILTER (WHERE (jfs.mknod(t.m, convert_to('f' || c.n, 'UTF8'), 1, c.mode, c.uid, c.gid,
                                         p_umask => c.umask)).errno = 0) AS made_by_mknod
  FROM twin t CROSS JOIN make_case c;
-- by lease_commit: one batch per directory, under its lease
SELECT jfs.session_open('h1', 1, '{"version": "0.2.24"}', '1 minute') AS s \gset
SELECT set_config('application_name', 'jfs:' || :s, false) IS NOT NULL AS as_s;
SELECT jfs.alloc_ids('inode', 1000) AS i \gset
SELECT t.kind, l.errno AS take_errno FROM twin t, jfs.take_lease(:s, t.l) l ORDER BY t.k;
SELECT t.kind, (SELECT count(*) FROM unnest(r.errnos) e WHERE e = 0) AS made_by_lease_commit
  FROM twin t,
       LATERAL (SELECT array_agg(convert_to('f' || c.n, 'UTF8') ORDER BY c.n) AS names,
                       array_agg(:i + 100 * t.k + c.n ORDER BY c.n) AS inodes,
                       array_agg(c.mode ORDER BY c.n) AS modes, array_agg(c.umask ORDER BY c.n) AS umasks,
                       array_agg(c.uid ORDER BY c.n) AS uids, array_agg(c.gid ORDER BY c.n) AS gids,
                       array_agg(0::bigint ORDER BY c.n) AS times
                  FROM make_case c) b,
       LATERAL jfs.lease_commit(:s, t.l, '{}', '{}', '{}', b.names, b.inodes, b.modes, b.umasks, b.uids,
                                b.gids, b.times, false) r
 ORDER BY t.k;
RESET application_name;
-- side by side: every file compared, none differs
SELECT t.kind, count(*) AS compared,
       count(*) FILTER (WHERE (m.*) IS DISTINCT FROM (l.*)) AS differ
  FROM twin t, pg_temp.files(t.m) m FULL JOIN pg_temp.files(t.l) l ON l.name = m.name
 GROUP BY t.k, t.kind ORDER BY t.k;
SELECT t.kind, m.*, l.*
  FROM twin t, pg_temp.files(t.m) m FULL JOIN pg_temp.files(t.l) l ON l.name = m.name
 WHERE (m.*) IS DISTINCT FROM (l.*) ORDER BY t.k, m.name LIMIT 10;
-- (two of them: f1, 0644 by root with no umask; f42, 04755 by 1000:4242 with
-- umask 077)
SELECT t.kind, l.* FROM twin t, pg_temp.files(t.l) l WHERE l.name IN ('f1', 'f42') ORDER BY t.k, l.name;
-- charged alike
SELECT t.kind, um.inodes = ul.inodes AND um.space = ul.space AS same_usage
  FROM twin t JOIN jfs.dir_usage um ON um.inode = t.m JOIN jfs.dir_usage ul ON ul.inode = t.l ORDER BY t.k;
-- squashed roles: all squash to 1500:1501, root squash to 65534:65534
DROP ROLE IF EXISTS jfs_mf_all;
DROP ROLE IF EXISTS jfs_mf_root;
CREATE ROLE jfs_mf_all;
CREATE ROLE jfs_mf_root;
SELECT jfs.grant_client('jfs_mf_all', p_all_squash => '1500:1501');
SELECT jfs.grant_client('jfs_mf_root', p_root_squash => '65534:65534');
CREATE TEMP TABLE sq (role text, m bigint, l bigint);
INSERT INTO sq
SELECT r, (jfs.mknod(1, convert_to('sm_' || r, 'UTF8'), 2, 511, 0, 0)).inode,
          (jfs.mknod(1, convert_to('sl_' || r, 'UTF8'), 2, 511, 0, 0)).inode
  FROM unnest(ARRAY['jfs_mf_all', 'jfs_mf_root']) r;
GRANT SELECT ON sq TO jfs_mf_all, jfs_mf_root;
SET SESSION AUTHORIZATION jfs_mf_all;
SELECT m AS sqm, l AS sql_ FROM sq WHERE role = 'jfs_mf_all' \gset
SELECT (jfs.mknod(:sqm, 'a', 1, 420, 0, 0)).errno, (jfs.mknod(:sqm, 'b', 1, 3583, 1000, 1000, p_umask => 18)).errno;
SELECT jfs.session_open('h2', 2, '{"version": "0.2.24"}', '1 minute') AS s2 \gset
SELECT jfs.alloc_ids('inode', 2) AS si \gset
SELECT set_config('application_name', 'jfs:' || :s2, false) IS NOT NULL AS as_s2;
SELECT errno FROM jfs.take_lease(:s2, :sql_);
SELECT errnos FROM jfs.lease_commit(:s2, :sql_, '{}', '{}', '{}', ARRAY['a', 'b']::bytea[], ARRAY[:si, :si + 1],
                                    ARRAY[420, 3583], ARRAY[0, 18], ARRAY[0, 1000]::bigint[],
                                    ARRAY[0, 1000]::bigint[], ARRAY[0, 0]::bigint[], false);
SELECT jfs.session_close(:s2);
RESET application_name;
SET SESSION AUTHORIZATION jfs_mf_root;
SELECT m AS sqm, l AS sql_ FROM sq WHERE role = 'jfs_mf_root' \gset
SELECT (jfs.mknod(:sqm, 'a', 1, 420, 0, 0)).errno, (jfs.mknod(:sqm, 'b', 1, 3583, 1000, 1000, p_umask => 18)).errno;
SELECT jfs.session_open('h3', 3, '{"version": "0.2.24"}', '1 minute') AS s3 \gset
SELECT jfs.alloc_ids('inode', 2) AS si \gset
SELECT set_config('application_name', 'jfs:' || :s3, false) IS NOT NULL AS as_s3;
SELECT errno FROM jfs.take_lease(:s3, :sql_);
SELECT errnos FROM jfs.lease_commit(:s3, :sql_, '{}', '{}', '{}', ARRAY['a', 'b']::bytea[], ARRAY[:si, :si + 1],
                                    ARRAY[420, 3583], ARRAY[0, 18], ARRAY[0, 1000]::bigint[],
                                    ARRAY[0, 1000]::bigint[], ARRAY[0, 0]::bigint[], false);
SELECT jfs.session_close(:s3);
RESET application_name;
RESET SESSION AUTHORIZATION;
SELECT sq.role, count(*) AS compared, count(*) FILTER (WHERE (m.*) IS DISTINCT FROM (l.*)) AS differ,
       string_agg(m.name || ' ' || m.uid || ':' || m.gid || ' ' || m.mode, ', ' ORDER BY m.name) AS by_mknod
  FROM sq, pg_temp.files(sq.m) m FULL JOIN pg_temp.files(sq.l) l ON l.name = m.name
 GROUP BY sq.role ORDER BY sq.role;
-- a quota at its limit: the same creates refused, with the same errno
SELECT (jfs.mknod(1, 'qm', 2, 493, 0, 0)).inode AS qm, (jfs.mknod(1, 'ql', 2, 493, 0, 0)).inode AS ql \gset
SELECT count(*) FROM jfs.set_quota('/qm', 0, 3);
SELECT count(*) FROM jfs.set_quota('/ql', 0, 3);
SELECT string_agg((jfs.mknod(:qm, convert_to('q' || n, 'UTF8'), 1, 420, 0, 0)).errno::text, ',' ORDER BY n)
       AS by_mknod
  FROM generate_series(1, 4) n;
SELECT set_config('application_name', 'jfs:' || :s, false) IS NOT NULL AS as_s;
SELECT errnos AS by_lease_commit
  FROM jfs.lease_commit(:s, :ql, '{}', '{}', '{}', ARRAY['q1', 'q2', 'q3', 'q4']::bytea[],
                        ARRAY[:i + 901, :i + 902, :i + 903, :i + 904], ARRAY[420, 420, 420, 420], ARRAY[0, 0, 0, 0],
                        ARRAY[0, 0, 0, 0]::bigint[], ARRAY[0, 0, 0, 0]::bigint[], ARRAY[0, 0, 0, 0]::bigint[], false);
RESET application_name;
SELECT count(*) AS compared, count(*) FILTER (WHERE (m.*) IS DISTINCT FROM (l.*)) AS differ
  FROM pg_temp.files(:qm) m FULL JOIN pg_temp.files(:ql) l ON l.name = m.name;
SELECT um.inodes = ul.inodes AND um.space = ul.space AS same_usage
  FROM jfs.dir_usage um, jfs.dir_usage ul WHERE um.inode = :qm AND ul.inode = :ql;
SELECT jfs.session_close(:s);
DROP OWNED BY jfs_mf_all;
DROP OWNED BY jfs_mf_root;
DROP ROLE jfs_mf_all;
DROP ROLE jfs_mf_root;
DELETE FROM jfs.client_role;
SELECT * FROM jfs.fsck();
