-- readdir / readdirplus: keyset pages over 10,000 entries
\ir tests/regress/fresh_volume.sql
SELECT inode AS d FROM jfs.mknod(1, 'big', 2, 493, 0, 0) \gset
SELECT count(*) FILTER (WHERE m.errno = 0) AS created
  FROM generate_series(1, 10000) i, jfs.mknod(:d, convert_to('entry-' || i, 'UTF8'), 1, 420, 0, 0) m;
-- read it in pages of 1000, each page continuing from the last cookie of the one before
CREATE TEMP TABLE seen (page integer, cookie bigint, name bytea, inode bigint, type smallint);
DO $$
DECLARE
    v_dir bigint := jfs.resolve('/big');
    v_cookie bigint := 0;
    v_page integer := 0;
    v_rows integer;
BEGIN
    LOOP
        v_page := v_page + 1;
        INSERT INTO seen SELECT v_page, r.cookie, r.name, r.inode, r.type FROM jfs.readdir(v_dir, v_cookie, 1000) r;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        EXIT WHEN v_rows = 0;
        SELECT max(cookie) INTO v_cookie FROM seen WHERE page = v_page;
    END LOOP;
END
$$;
SELECT count(*) AS entries, count(DISTINCT name) AS distinct_names, max(page) AS pages,
       count(*) FILTER (WHERE type = 1) AS files FROM seen;
SELECT page, count(*) FROM seen GROUP BY page ORDER BY page LIMIT 3;
-- every created name was seen exactly once
SELECT count(*) AS missing FROM generate_series(1, 10000) i
 WHERE NOT EXISTS (SELECT 1 FROM seen WHERE name = convert_to('entry-' || i, 'UTF8'));
-- the page query walks the (parent, cookie) index, never an OFFSET
ANALYZE jfs.edge;
EXPLAIN (COSTS OFF)
SELECT e.cookie, e.name FROM jfs.edge e WHERE e.parent = 2 AND e.cookie > 5000 ORDER BY e.cookie LIMIT 1000;
-- readdirplus returns the attributes too
SELECT errno, convert_from(name, 'UTF8') AS name, type, mode, nlink, length
  FROM jfs.readdirplus(:d, 0, 3);
-- entries removed between two pages do not disturb paging
SELECT max(cookie) AS c FROM (SELECT cookie FROM jfs.readdir(:d, 0, 10)) x \gset
SELECT count(*) FILTER (WHERE u.errno = 0) AS removed
  FROM generate_series(11, 20) i, jfs.unlink(:d, convert_to('entry-' || i, 'UTF8')) u;
SELECT count(*) AS next_page, min(convert_from(name, 'UTF8')) AS first FROM jfs.readdir(:d, :c, 5);
-- an empty directory gives no rows; a file or a missing inode gives one errno row
SELECT inode AS e FROM jfs.mknod(1, 'empty', 2, 493, 0, 0) \gset
SELECT * FROM jfs.readdir(:e);
SELECT errno, name FROM jfs.readdir(jfs.resolve('/big/entry-1'));
SELECT errno, name FROM jfs.readdirplus(99999999);
SELECT * FROM jfs.fsck();
