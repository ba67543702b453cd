-- jfs 0.2.11 -> 0.2.12.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.12 makes from sql/:
-- tests/upgrade/check.sh compares the two (initial privileges too).
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The initial privileges of jfs's objects are their owner's alone, as a
-- fresh install makes them.
--
-- 0.2.11's update made write_slices again (a new signature) and granted
-- EXECUTE on it to the roles that could call it before. A grant made
-- inside ALTER EXTENSION is recorded in pg_init_privs as the object's
-- initial privilege, and pg_dump prints only what differs from those: a
-- dump of the updated volume, restored, gave those roles no write_slices
-- (every mount failed at its start until jfs.grant_client ran again).
--
-- The grants stay (no mount loses a procedure); only their record as
-- initial privileges goes, so that pg_dump prints them. An owner's own
-- privileges are the ones it granted itself.
UPDATE pg_catalog.pg_init_privs i
   SET initprivs = ARRAY(SELECT item FROM pg_catalog.unnest(i.initprivs) AS item
                          WHERE (SELECT a.grantee = a.grantor
                                   FROM pg_catalog.aclexplode(ARRAY[item]) AS a LIMIT 1))
 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = i.classoid AND d.objid = i.objoid)
   AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(i.initprivs) AS a WHERE a.grantee <> a.grantor);

-- PostgreSQL 17 and later also record each role named in an initial
-- privilege in pg_shdepend (deptype 'i'), which keeps DROP ROLE from
-- dropping it: those of the roles taken out above go too.
DELETE FROM pg_catalog.pg_shdepend s
 WHERE pg_catalog.current_setting('server_version_num')::integer >= 170000
   AND s.deptype = 'i'
   AND s.dbid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = s.classid AND d.objid = s.objid)
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) AS a
                    WHERE i.classoid = s.classid AND i.objoid = s.objid AND i.objsubid = s.objsubid
                      AND a.grantee = s.refobjid);
