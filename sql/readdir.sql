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

CREATE FUNCTION readdir(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
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

CREATE FUNCTION readdirplus(p_dir bigint, p_cookie bigint DEFAULT 0, p_limit integer DEFAULT 1000)
RETURNS TABLE (errno integer, cookie bigint, name bytea, inode bigint, type smallint, mode integer,
               uid bigint, gid bigint, atime bigint, mtime bigint, ctime bigint, nlink integer,
               length bigint, rdev bigint, parent bigint, tier smallint, used bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_errno integer;
BEGIN
    RETURN QUERY
        SELECT 0, e.cookie, e.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime,
               n.nlink, n.length, n.rdev, n.parent, n.tier, n.used
          FROM edge e JOIN node n ON n.inode = e.inode
         WHERE e.parent = p_dir AND e.cookie > coalesce(p_cookie, 0)
         ORDER BY e.cookie
         LIMIT least(greatest(coalesce(p_limit, 1000), 1), 100000);
    IF NOT FOUND THEN
        v_errno := _readdir_error(p_dir);
        IF v_errno <> 0 THEN
            RETURN QUERY SELECT v_errno, NULL::bigint, NULL::bytea, NULL::bigint, NULL::smallint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::integer,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::bigint;
        END IF;
    END IF;
END
$$;
