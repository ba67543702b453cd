-- jfs 0.2.13 -> 0.2.14.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.14 makes from sql/:
-- tests/upgrade/check.sh compares the two. Roles are granted the new
-- procedure by running jfs.grant_client (or grant_reader) again.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- A listing says which nodes have xattrs in readdirplus's own query
-- (readdirplus_xattrs, an EXISTS per row), no longer by a second call
-- over the page's inodes: xattr_holders goes.
DROP FUNCTION IF EXISTS xattr_holders(bigint[]);

-- A page of a directory as readdirplus gives it, and whether each node has
-- extended attributes (any name getxattr could find; POSIX ACLs are kept
-- apart, sql/acl.sql): a mount answers getxattr of the others without
-- asking. `ls -l` asks each file for security.selinux, and backup tools
-- ask for more.
CREATE OR REPLACE FUNCTION readdirplus_xattrs(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint, mode integer,
               uid bigint, gid bigint, atime bigint, mtime bigint, ctime bigint, nlink integer,
               length bigint, rdev bigint, parent bigint, tier smallint, used bigint, xattrs boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    RETURN QUERY
        SELECT 0, e.cookie, e.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
               n.nlink, n.length, n.rdev, n.parent, n.tier, n.used,
               EXISTS (SELECT 1 FROM xattr x WHERE x.inode = n.inode)
          FROM edge e JOIN node n ON n.inode = e.inode
         WHERE e.parent = p_dir AND e.cookie > coalesce(p_cookie, 0)
         ORDER BY e.cookie
         LIMIT least(greatest(coalesce(p_limit, 1000), 1), 100000);
    IF NOT FOUND THEN
        v_errno := _readdir_error(p_dir);
        IF v_errno <> 0 THEN
            RETURN QUERY SELECT v_errno, NULL::bigint, NULL::bytea, NULL::bigint, NULL::smallint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::bigint, NULL::boolean;
        END IF;
    END IF;
END
$$;

-- A page of a directory with attributes (readdirplus_xattrs without the
-- xattrs: what clients before 0.2.14 call), in its order.
CREATE OR REPLACE FUNCTION readdirplus(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint, mode integer,
               uid bigint, gid bigint, atime bigint, mtime bigint, ctime bigint, nlink integer,
               length bigint, rdev bigint, parent bigint, tier smallint, used bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN QUERY
        SELECT r.errno, r.cookie, r.name, r.inode, r.type, r.mode, r.uid, r.gid, r.atime, r.mtime, r.ctime,
               r.nlink, r.length, r.rdev, r.parent, r.tier, r.used
          FROM readdirplus_xattrs(p_dir, p_cookie, p_limit) WITH ORDINALITY AS r
         ORDER BY r.ordinality;
END
$$;

REVOKE EXECUTE ON FUNCTION readdirplus_xattrs(bigint, bigint, integer) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- A lookup reads the name's inode and type from edge's primary key alone
-- (an index-only scan): on a volume too big for memory, a cold lookup
-- makes three reads, not four. The index is built again: about 2 s per
-- 3 million entries, with the table locked (every access to the volume
-- waits, reads too).
ALTER TABLE edge DROP CONSTRAINT edge_pkey,
    ADD CONSTRAINT edge_pkey PRIMARY KEY (parent, name) INCLUDE (inode, type);
