-- privileges: PUBLIC can do nothing; a client role calls procedures but cannot write tables;
-- a reader role reads tables and read-only functions but changes nothing
\ir tests/regress/fresh_volume.sql
DROP ROLE IF EXISTS jfs_regress_client;
DROP ROLE IF EXISTS jfs_regress_reader;
DROP ROLE IF EXISTS jfs_regress_nobody;
CREATE ROLE jfs_regress_client;
CREATE ROLE jfs_regress_reader;
CREATE ROLE jfs_regress_nobody;
SELECT jfs.grant_client('jfs_regress_client');
SELECT jfs.grant_reader('jfs_regress_reader');
-- every procedure is SECURITY DEFINER with a pinned search_path; internals are not
SELECT count(*) AS definer_without_search_path FROM pg_proc
 WHERE pronamespace = 'jfs'::regnamespace AND prosecdef
   AND NOT coalesce(proconfig, '{}') @> ARRAY['search_path=pg_catalog, jfs, pg_temp'];
SELECT count(*) AS public_executable FROM pg_proc
 WHERE pronamespace = 'jfs'::regnamespace AND has_function_privilege('public', oid, 'EXECUTE');
SELECT count(*) AS public_table_privileges FROM information_schema.role_table_grants
 WHERE table_schema = 'jfs' AND grantee = 'PUBLIC';
-- the client role works through procedures
SET ROLE jfs_regress_client;
SELECT errno FROM jfs.mknod(1, 'by-client', 1, 420, 0, 0);
SELECT errno FROM jfs.lookup(1, 'by-client');
-- and cannot touch the tables or the internals
UPDATE jfs.node SET mode = 511 WHERE inode = 1;
DELETE FROM jfs.edge;
INSERT INTO jfs.setting (name, uuid, storage, bucket, block_size) VALUES ('x', gen_random_uuid(), 'file', '', 65536);
SELECT count(*) FROM jfs.node;
SELECT jfs._free_node(1);
SELECT jfs.grant_client('jfs_regress_client');
RESET ROLE;
-- the reader reads tables and read-only functions, and cannot change anything
SET ROLE jfs_regress_reader;
SELECT count(*) AS nodes FROM jfs.node;
SELECT name FROM jfs.ls('/');
SELECT errno FROM jfs.getattr(1);
SELECT errno FROM jfs.mknod(1, 'by-reader', 1, 420, 0, 0);
UPDATE jfs.node SET mode = 511 WHERE inode = 1;
-- the object store's keys are not for readers
SELECT * FROM jfs.secret;
SELECT * FROM jfs.volume_secrets();
RESET ROLE;
-- a client gets them through volume_secrets()
SELECT errno FROM jfs.format('regress', p_access_key => 'AK', p_secret_key => 'SK', p_force => true);
SET ROLE jfs_regress_client;
SELECT * FROM jfs.volume_secrets();
RESET ROLE;
-- a role granted nothing sees nothing
SET ROLE jfs_regress_nobody;
SELECT errno FROM jfs.getattr(1);
SELECT count(*) FROM jfs.node;
RESET ROLE;
-- a hostile search_path of the caller does not reach into the procedures
CREATE SCHEMA evil;
CREATE FUNCTION evil._check_name(bytea) RETURNS integer LANGUAGE sql AS 'SELECT 0';
CREATE TABLE evil.edge (parent bigint, name bytea, inode bigint, type smallint, cookie bigint);
SET search_path = evil, jfs, public;
SELECT errno FROM jfs.mknod(1, 'a/b', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, 'safe', 1, 420, 0, 0);
SELECT count(*) AS evil_edges FROM evil.edge;
RESET search_path;
DROP SCHEMA evil CASCADE;
DROP OWNED BY jfs_regress_client;
DROP OWNED BY jfs_regress_reader;
DROP ROLE jfs_regress_client;
DROP ROLE jfs_regress_reader;
DROP ROLE jfs_regress_nobody;
SELECT name FROM jfs.ls('/');
SELECT * FROM jfs.fsck();
