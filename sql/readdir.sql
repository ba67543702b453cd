-- readdir and readdirplus: one page of a directory per call, keyset-paged by
-- the per-directory cookie (index edge_readdir), so page N of a huge
-- directory costs what page 1 costs. Pass the last cookie seen to continue;
-- 0 starts at the beginning. "." and ".." are the client's to add.

-- The errno row a page returns when p_dir is not a readable directory, or
-- none (an empty page of an existing directory).
CREATE FUNCTION _readdir_error(p_dir bigint) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_type smallint;
BEGIN
    SELECT type INTO v_type FROM node WHERE inode = p_dir;
    RETURN CASE WHEN v_type IS NULL THEN 2 WHEN v_type <> 2 THEN 20 ELSE 0 END;
END
$$;

-- The newest cookie handed out so far, by any session: a listing asks
-- for it when it goes past its first page and shows no entry with a newer
-- one, so entries renamed away and back (each time with a new cookie)
-- cannot keep a listing going for ever (xfstests generic/736). Entries
-- made after it are left to the next listing, as POSIX allows.
CREATE FUNCTION listing_ceiling() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.last_value FROM edge_cookie s
$$;

CREATE FUNCTION readdir(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    PERFORM _unleased(ARRAY[p_dir]);
    RETURN QUERY
        SELECT 0, e.cookie, e.name, e.inode, e.type
          FROM edge e
         WHERE e.parent = p_dir AND e.cookie > coalesce(p_cookie, 0)
         ORDER BY e.cookie
         LIMIT least(greatest(coalesce(p_limit, 1000), 1), 100000);
    IF NOT FOUND THEN
        v_errno := _readdir_error(p_dir);
        IF v_errno <> 0 THEN
            RETURN QUERY SELECT v_errno, NULL::bigint, NULL::bytea, NULL::bigint, NULL::smallint;
        END IF;
    END IF;
END
$$;

-- A page of a directory as readdirplus gives it, and whether each node has
-- extended attributes (any name getxattr could find; POSIX ACLs are kept
-- apart, sql/acl.sql): a mount answers getxattr of the others without
-- asking. `ls -l` asks each file for security.selinux, and backup tools
-- ask for more. A shard root's row (a directory of another shard,
-- sql/shard.sql) has errno 18 (EXDEV), its cookie, name, inode and type,
-- and no attributes: they are its shard's to give.
CREATE FUNCTION readdirplus_xattrs(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint, mode integer,
               uid bigint, gid bigint, atime bigint, mtime bigint, ctime bigint, nlink integer,
               length bigint, rdev bigint, parent bigint, tier smallint, used bigint, xattrs boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    PERFORM _unleased(ARRAY[p_dir]);
    RETURN QUERY
        SELECT CASE WHEN n.inode IS NULL THEN 18 ELSE 0 END, e.cookie, e.name, e.inode, e.type, n.mode, n.uid,
               n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev, n.parent, n.tier, n.used,
               EXISTS (SELECT 1 FROM xattr x WHERE x.inode = n.inode)
          FROM edge e LEFT JOIN node n ON n.inode = e.inode
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
CREATE FUNCTION readdirplus(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
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

-- A lookup that reads ahead, for a mount whose callers stat a directory's
-- entries one by one (find, du, ls -l, rsync walk a listing and stat each
-- name): entry p_name of p_dir and, after it, up to p_limit entries in
-- listing order (by cookie: find, du) and up to p_limit in name order (ls
-- sorts), each with its attributes, so that the next names are answered
-- from the mount's cache instead of a round trip each. No row for a name
-- that is not there (the caller looks it up alone); at most 10000 each way.
CREATE FUNCTION lookup_ahead(p_dir bigint, p_name bytea, p_limit integer DEFAULT 1000)
RETURNS TABLE (name bytea, inode bigint, type smallint, mode integer, uid bigint, gid bigint, atime bigint,
               mtime bigint, ctime bigint, nlink integer, length bigint, rdev bigint, parent bigint,
               tier smallint, used bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _unleased(ARRAY[p_dir]);
    RETURN QUERY
    WITH here AS (
        SELECT e.cookie FROM edge e WHERE e.parent = p_dir AND e.name = p_name
    ), ahead AS (
        (SELECT e.name, e.inode FROM edge e, here h
          WHERE e.parent = p_dir AND e.cookie >= h.cookie
          ORDER BY e.cookie LIMIT least(greatest(coalesce(p_limit, 1000), 0), 10000) + 1)
        UNION
        (SELECT e.name, e.inode FROM edge e, here h
          WHERE e.parent = p_dir AND e.name >= p_name
          ORDER BY e.name LIMIT least(greatest(coalesce(p_limit, 1000), 0), 10000) + 1)
    )
    SELECT a.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
      FROM ahead a JOIN node n ON n.inode = a.inode;
END
$$;
