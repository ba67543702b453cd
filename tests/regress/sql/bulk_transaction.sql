-- Many creates and removals in ONE transaction, as a script using the
-- procedures from SQL makes them: every counter (the inode counter, the
-- quotas' stripes, dir_stats) is updated at the version this transaction
-- wrote last (_last_version, so n updates cost n, not n^2), and stays
-- exact: through creates refused by a quota, through subtransactions
-- rolled back (their versions and the settings naming them go together),
-- and through another path updating the same rows in between (a quota
-- reshare, a removal). bench/bulk_sql/run measures the time.
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 511, 0, 0) \gset
SELECT inode AS q FROM jfs.mknod(1, 'q', 2, 511, 0, 0) \gset
SELECT max_inodes FROM jfs.set_quota('/q', 0, 50);
SELECT count(*) AS quotas FROM jfs.set_user_quota(1000, 0, 1000000);

BEGIN;
-- 2,000 creates in d; every tenth undone by its subtransaction's rollback
DO $$
DECLARE
    v_d bigint := (SELECT inode FROM jfs.edge WHERE parent = 1 AND name = 'd');
BEGIN
    FOR i IN 1 .. 2000 LOOP
        IF i % 10 = 0 THEN
            BEGIN
                PERFORM jfs.mknod(v_d, convert_to('undone' || i, 'UTF8'), 1, 420, 1000, 1000);
                RAISE EXCEPTION 'undo';
            EXCEPTION WHEN raise_exception THEN
                NULL;
            END;
        ELSE
            PERFORM jfs.mknod(v_d, convert_to('f' || i, 'UTF8'), 1, 420, 1000, 1000);
        END IF;
    END LOOP;
END
$$;
-- 60 creates in q, whose quota takes 50: the last 10 refused
SELECT errno, count(*) FROM generate_series(1, 60) i
 CROSS JOIN LATERAL jfs.mknod(:q, convert_to('g' || i, 'UTF8'), 1, 420, 1000, 1000) m
 GROUP BY errno ORDER BY errno;
-- removals in between, then creates again
SELECT count(*) FILTER (WHERE errno = 0) AS removed FROM generate_series(1, 500) i
 CROSS JOIN LATERAL jfs.unlink(:d, convert_to('f' || i, 'UTF8')) u WHERE i % 10 <> 0;
SELECT count(*) FILTER (WHERE errno = 0) AS made FROM generate_series(1, 300) i
 CROSS JOIN LATERAL jfs.mknod(:d, convert_to('h' || i, 'UTF8'), 2, 493, 1000, 1000) m;
COMMIT;

SELECT count(*) AS entries_in_d FROM jfs.edge WHERE parent = :d;
SELECT sum(inodes) AS dir_stats_inodes FROM jfs.dir_stats WHERE inode = :d;
SELECT nlink FROM jfs.node WHERE inode = :d;
SELECT count(*) AS undone_left FROM jfs.edge WHERE convert_from(name, 'UTF8') LIKE 'undone%';
SELECT used_inodes FROM jfs.quotas WHERE path = '/q';
SELECT kind, ok FROM jfs.check_quota() ORDER BY kind, key;
SELECT (SELECT next FROM jfs.counter WHERE name = 'inode') > (SELECT max(inode) FROM jfs.node) AS counter_ahead;

-- jfs.create_many: one call, one transaction; each name refused alone;
-- quotas hold; a read-only role may not
SELECT inode AS m FROM jfs.mknod(1, 'many', 2, 511, 0, 0) \gset
SELECT max_inodes FROM jfs.set_quota('/many', 0, 1000);
SELECT errno, count(*), count(inode) AS with_inode
  FROM jfs.create_many(:m, (SELECT array_agg(convert_to('m' || i, 'UTF8')) FROM generate_series(1, 1010) i)
                           || ARRAY['.', 'a/b', 'm1']::bytea[], 1, 438, 1000, 1000, 18)
 GROUP BY errno ORDER BY errno;
SELECT mode, uid, count(*) FROM jfs.node n JOIN jfs.edge e ON e.inode = n.inode WHERE e.parent = :m
 GROUP BY mode, uid;
SELECT used_inodes FROM jfs.quotas WHERE path = '/many';
SELECT count(*) FROM jfs.create_many(:m, ARRAY['x']::bytea[], 3);
DROP ROLE IF EXISTS jfs_regress_bulk_ro;
CREATE ROLE jfs_regress_bulk_ro;
SELECT jfs.grant_client('jfs_regress_bulk_ro', p_read_only => true);
SET SESSION AUTHORIZATION jfs_regress_bulk_ro;
SELECT count(*) FROM jfs.create_many(:m, ARRAY['y']::bytea[]);
RESET SESSION AUTHORIZATION;
DROP OWNED BY jfs_regress_bulk_ro;
DROP ROLE jfs_regress_bulk_ro;
SELECT * FROM jfs.fsck();
