-- summary: a tree's sizes and counts from dir_stats, equal to a walk of
-- its entries after every kind of change; destroy: a volume emptied so
-- that format makes a new one
\set VERBOSITY terse
\ir tests/regress/fresh_extension.sql
SELECT uuid AS vol FROM jfs.format('regress') \gset
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
-- what summary must say, by walking every entry (du --apparent-size and
-- find | wc -l, counting each name)
CREATE FUNCTION pg_temp.walked(p_path text)
RETURNS TABLE (dirs bigint, files bigint, length bigint, space bigint)
LANGUAGE sql SET search_path = jfs, pg_catalog AS $$
    WITH RECURSIVE t(inode, type) AS (
        SELECT n.inode, n.type FROM jfs.node n WHERE n.inode = jfs.resolve(p_path)
        UNION ALL
        SELECT e.inode, e.type FROM t JOIN jfs.edge e ON e.parent = t.inode AND t.type = 2
    )
    SELECT count(*) FILTER (WHERE t.type = 2), count(*) FILTER (WHERE t.type <> 2),
           sum(CASE WHEN t.type = 2 THEN 4096 ELSE n.length END)::bigint,
           sum(jfs._node_space(n.type, n.length))::bigint
      FROM t JOIN jfs.node n ON n.inode = t.inode
$$;
CREATE FUNCTION pg_temp.agrees(p_path text) RETURNS boolean LANGUAGE sql AS $$
    SELECT (s.dirs, s.files, s.length, s.space) = (w.dirs, w.files, w.length, w.space)
      FROM jfs.summary(p_path) s, pg_temp.walked(p_path) w
$$;

-- /t/{a/{f (100 bytes), g (3 chunks' worth, sparse), s -> f}, b/{h (link of f), c/}}
SELECT inode AS t FROM jfs.mknod(1, 't', 2, 493, 0, 0) \gset
SELECT inode AS a FROM jfs.mknod(:t, 'a', 2, 493, 0, 0) \gset
SELECT inode AS b FROM jfs.mknod(:t, 'b', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:b, 'c', 2, 493, 0, 0);
SELECT inode AS f FROM jfs.mknod(:a, 'f', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, :first_slice, 100, 0, 100);
SELECT inode AS g FROM jfs.mknod(:a, 'g', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:g, 2, 10, :first_slice + 1, 5000, 0, 5000);
SELECT errno FROM jfs.symlink(:a, 's', 'f', 0, 0);
SELECT errno FROM jfs.link(:f, :b, 'h');
SELECT * FROM jfs.summary('/t');
SELECT pg_temp.agrees('/t') AS agrees, pg_temp.agrees('/') AS root_agrees;
-- two levels: /t, then a and b (largest first), then c
SELECT path, depth, dirs, files, length FROM jfs.summary('/t', 2);
SELECT path, dirs, files, length FROM jfs.summary('/t/a/f');
SELECT * FROM jfs.summary('/t/none');

-- growth within a 4 KiB unit, truncation, fallocate, copy_file_range
SELECT errno FROM jfs.write_slice(:f, 0, 100, :first_slice + 2, 50, 0, 50);
SELECT errno FROM jfs.setattr(:g, 8, p_length => 7);
SELECT errno FROM jfs.zero_range(:f, 0, 10000, false);
SELECT inode AS k FROM jfs.mknod(:b, 'k', 1, 420, 0, 0) \gset
SELECT errno, copied FROM jfs.copy_range(:f, 0, :k, 3, 10000);
SELECT pg_temp.agrees('/t') AS agrees, (SELECT length FROM jfs.summary('/t/b')) AS b_length;
-- rename across directories, over a file, and a directory
SELECT errno FROM jfs.rename(:a, 'f', :b, 'k');
SELECT errno FROM jfs.rename(:b, 'c', :a, 'c');
SELECT pg_temp.agrees('/t') AS agrees, pg_temp.agrees('/t/a') AS a_agrees, pg_temp.agrees('/t/b') AS b_agrees;
-- a clone, batched unlinks, an unlink, rmr
SELECT nodes FROM jfs.clone('/t/b', '/t/b2');
SELECT pg_temp.agrees('/t') AS agrees, pg_temp.agrees('/t/b2') AS clone_agrees;
SELECT count(*) FILTER (WHERE errno = 0) AS removed FROM jfs.batch_unlink(:b, ARRAY['h', 'k']::bytea[]);
SELECT errno FROM jfs.unlink(:a, 's');
SELECT pg_temp.agrees('/t') AS agrees;
SELECT * FROM jfs.rmr('/t/b2');
SELECT pg_temp.agrees('/t') AS agrees, pg_temp.agrees('/') AS root_agrees;
SELECT * FROM jfs.fsck();

-- destroy: the uuid must be the volume's; live sessions refuse it unless forced
SELECT jfs.session_open('h', 1, '{}', '1 minute') AS sid \gset
SELECT errno, message ~ '^the volume here is regress \(uuid .*\), not .*: give its uuid' AS says_why
  FROM jfs.destroy_begin(gen_random_uuid());
SELECT * FROM jfs.destroy_begin(:'vol');
SELECT errno FROM jfs.destroy_finish(:'vol');
SELECT setting.destroying IS NULL AS not_marked FROM jfs.setting;
SELECT * FROM jfs.destroy_begin(:'vol', true);
SELECT count(*) AS sessions FROM jfs.session;
-- no session opens from then on; running it again is allowed
SELECT jfs.session_open('h', 2, '{}', '1 minute');
SELECT jfs.session_register('h', 2);
SELECT * FROM jfs.destroy_begin(:'vol');
SELECT * FROM jfs.destroy_finish(:'vol');
SELECT (SELECT count(*) FROM jfs.setting) AS settings, (SELECT count(*) FROM jfs.node) AS nodes,
       (SELECT count(*) FROM jfs.edge) AS edges, (SELECT count(*) FROM jfs.dir_stats) AS dir_stats;
SELECT * FROM jfs.destroy_finish(:'vol');
-- a new volume where it was
SELECT errno FROM jfs.format('again');
SELECT name FROM jfs.volume();
SELECT path, dirs, files FROM jfs.summary('/');
SELECT * FROM jfs.fsck();
