-- Extended attributes: get, set (XATTR_CREATE = 1, XATTR_REPLACE = 2), list, remove.
-- Names up to 255 bytes (ERANGE beyond), values up to 64 KiB (E2BIG beyond).

CREATE FUNCTION getxattr(p_inode bigint, p_name bytea, OUT errno integer, OUT value bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    SELECT x.value INTO value FROM xattr x WHERE x.inode = p_inode AND x.name = p_name;
    IF FOUND THEN
        errno := 0;
    ELSIF NOT EXISTS (SELECT 1 FROM node WHERE inode = p_inode) THEN
        errno := 2;
    ELSIF p_name IS NULL OR length(p_name) = 0 THEN
        errno := 22;
    ELSIF length(p_name) > 255 THEN
        errno := 34;
    ELSE
        errno := 61;
    END IF;
END
$$;

CREATE FUNCTION setxattr(p_inode bigint, p_name bytea, p_value bytea, p_flags integer DEFAULT 0)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_flags integer := coalesce(p_flags, 0);
BEGIN
    IF p_name IS NULL OR length(p_name) = 0 OR position('\x00'::bytea IN p_name) > 0
       OR v_flags & ~3 <> 0 OR v_flags = 3 OR p_value IS NULL THEN
        RETURN 22;
    ELSIF length(p_name) > 255 THEN
        RETURN 34;
    ELSIF length(p_value) > 65536 THEN
        RETURN 7;
    END IF;
    PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    IF v_flags = 1 THEN
        INSERT INTO xattr (inode, name, value) VALUES (p_inode, p_name, p_value) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RETURN 17;
        END IF;
    ELSIF v_flags = 2 THEN
        UPDATE xattr SET value = p_value WHERE inode = p_inode AND name = p_name;
        IF NOT FOUND THEN
            RETURN 61;
        END IF;
    ELSE
        INSERT INTO xattr (inode, name, value) VALUES (p_inode, p_name, p_value)
            ON CONFLICT (inode, name) DO UPDATE SET value = EXCLUDED.value;
    END IF;
    UPDATE node SET ctime = _now() WHERE inode = p_inode;
    PERFORM _log_node_change('setxattr', p_inode, p_name);
    RETURN 0;
END
$$;

-- The names of a node's extended attributes, in byte order, with those of
-- its POSIX ACLs (sql/acl.sql) when it has any beyond its mode. (An ACL
-- stored as a plain xattr by 0.1.0 is not listed: it never took effect.)
CREATE FUNCTION listxattr(p_inode bigint, OUT errno integer, OUT names bytea[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM node WHERE inode = p_inode) THEN
        errno := 2; RETURN;
    END IF;
    SELECT coalesce(array_agg(e.name ORDER BY e.name), '{}') INTO names
      FROM (SELECT x.name FROM xattr x
             WHERE x.inode = p_inode
               AND x.name NOT IN ('system.posix_acl_access'::bytea, 'system.posix_acl_default'::bytea)
            UNION ALL
            SELECT DISTINCT convert_to(CASE a.kind WHEN 'a' THEN 'system.posix_acl_access'
                                                   ELSE 'system.posix_acl_default' END, 'UTF8')
              FROM acl a WHERE a.inode = p_inode) e;
    errno := 0;
END
$$;

CREATE FUNCTION removexattr(p_inode bigint, p_name bytea) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
BEGIN
    PERFORM 1 FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    END IF;
    DELETE FROM xattr WHERE inode = p_inode AND name = p_name;
    IF NOT FOUND THEN
        RETURN 61;
    END IF;
    UPDATE node SET ctime = _now() WHERE inode = p_inode;
    PERFORM _log_node_change('removexattr', p_inode, p_name);
    RETURN 0;
END
$$;
