-- jfs 0.2.12 -> 0.2.13.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.13 makes from sql/:
-- tests/upgrade/check.sh compares the two. Roles are granted the new
-- procedure by running jfs.grant_client (or grant_reader) again.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Which of p_inodes have extended attributes (any name getxattr could
-- find; POSIX ACLs are kept apart, sql/acl.sql): a mount that listed a
-- directory answers getxattr of the others without asking. `ls -l` asks
-- each file for security.selinux, and backup tools ask for more.
CREATE FUNCTION xattr_holders(p_inodes bigint[]) RETURNS bigint[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT coalesce(array_agg(DISTINCT x.inode ORDER BY x.inode), '{}')
      FROM xattr x
     WHERE x.inode = ANY (p_inodes)
$$;

REVOKE EXECUTE ON FUNCTION xattr_holders(bigint[]) FROM PUBLIC;
