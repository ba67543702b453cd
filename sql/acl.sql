-- POSIX ACLs, when the volume has them on (`jfs format --enable-acl` or
-- `jfs config --enable-acl`; like JuiceFS, they cannot be turned off again).
-- Rows of table acl, one per entry, tagged as in the kernel's xattr format
-- (1 user_obj, 2 user, 4 group_obj, 8 group, 16 mask, 32 other).
--
-- An access ACL shares the node's mode bits: the owner's entry is the
-- owner bits, the mask (or, without one, the owning group's entry) the
-- group bits, and other the other bits, so chmod changes them as POSIX
-- says with no ACL row to update. Its rows are what the mode cannot hold:
-- the owning group's entry and the named users and groups. A node without
-- rows has the minimal ACL its mode stands for. A default ACL (directories
-- only) keeps every entry as a row; new entries in the directory inherit it
-- (mknod: the umask is then ignored, the mode given is masked by the ACL).

-- Turns POSIX ACLs on for the volume. Returns whether they were off.
CREATE FUNCTION enable_acl() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    UPDATE setting SET enable_acl = true WHERE NOT enable_acl;
    RETURN FOUND;
END
$$;

-- The ACL of node p_inode of kind p_kind ('a' access, 'd' default) as
-- entries sorted by tag and qualifier (the xattr's order). errno 61
-- (ENODATA) when the node has none beyond its mode, 2 when it is gone,
-- 95 (EOPNOTSUPP) when the volume has ACLs off.
CREATE FUNCTION get_acl(p_inode bigint, p_kind "char", OUT errno integer,
                        OUT tags smallint[], OUT ids bigint[], OUT perms smallint[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_mode integer;
BEGIN
    IF NOT (SELECT s.enable_acl FROM setting s) THEN
        errno := 95; RETURN;
    END IF;
    SELECT n.mode INTO v_mode FROM node n WHERE n.inode = p_inode;
    IF NOT FOUND THEN
        errno := 2; RETURN;
    END IF;
    SELECT array_agg(e.tag ORDER BY e.tag, e.id), array_agg(e.id ORDER BY e.tag, e.id),
           array_agg(e.perm ORDER BY e.tag, e.id)
      INTO tags, ids, perms
      FROM (SELECT a.tag, a.qualifier AS id, a.perm FROM acl a WHERE a.inode = p_inode AND a.kind = p_kind
            UNION ALL
            -- an access ACL's owner, mask and other entries are the mode's bits
            SELECT t.tag, -1, t.perm
              FROM (VALUES (1::smallint, (v_mode >> 6 & 7)::smallint), (16, (v_mode >> 3 & 7)::smallint),
                           (32, (v_mode & 7)::smallint)) AS t(tag, perm)
             WHERE p_kind = 'a' AND EXISTS (SELECT 1 FROM acl a WHERE a.inode = p_inode AND a.kind = 'a')) e;
    errno := CASE WHEN tags IS NULL THEN 61 ELSE 0 END;
END
$$;

-- Sets (entries given) or removes (p_tags NULL) the ACL of kind p_kind of
-- node p_inode. An access ACL sets the mode's permission bits (see above);
-- one no richer than a mode leaves no rows. Returns errno: 0; 2 when the
-- node is gone; 13 (EACCES) for a default ACL of a non-directory; 22 for a
-- malformed ACL; 95 (EOPNOTSUPP) when the volume has ACLs off.
CREATE FUNCTION set_acl(p_inode bigint, p_kind "char", p_tags smallint[], p_ids bigint[],
                        p_perms smallint[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    n record;
    v_bits integer;
BEGIN
    IF NOT s.enable_acl THEN
        RETURN 95;
    ELSIF p_kind IS NULL OR p_kind NOT IN ('a', 'd')
          OR (p_tags IS NOT NULL AND NOT coalesce(_acl_valid(p_tags, p_ids, p_perms), false)) THEN
        RETURN 22;
    END IF;
    SELECT d.type, d.mode INTO n FROM node d WHERE d.inode = p_inode FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 2;
    ELSIF p_kind = 'd' AND n.type <> 2 THEN
        RETURN CASE WHEN p_tags IS NULL THEN 0 ELSE 13 END;
    END IF;
    DELETE FROM acl WHERE inode = p_inode AND kind = p_kind;
    PERFORM _log_node_change('setacl', p_inode);
    IF p_tags IS NULL THEN
        UPDATE node SET ctime = _now() WHERE inode = p_inode;
        RETURN 0;
    END IF;
    IF p_kind = 'd' THEN
        INSERT INTO acl (inode, kind, tag, qualifier, perm)
        SELECT p_inode, 'd', e.tag, CASE WHEN e.tag IN (2, 8) THEN e.id ELSE -1 END, e.perm
          FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm);
        UPDATE node SET ctime = _now() WHERE inode = p_inode;
        RETURN 0;
    END IF;
    SELECT (max(e.perm) FILTER (WHERE e.tag = 1) << 6)
           | (coalesce(max(e.perm) FILTER (WHERE e.tag = 16), max(e.perm) FILTER (WHERE e.tag = 4)) << 3)
           | max(e.perm) FILTER (WHERE e.tag = 32)
      INTO v_bits FROM unnest(p_tags, p_perms) AS e(tag, perm);
    IF p_tags && ARRAY[2, 8, 16]::smallint[] THEN
        INSERT INTO acl (inode, kind, tag, qualifier, perm)
        SELECT p_inode, 'a', e.tag, CASE WHEN e.tag IN (2, 8) THEN e.id ELSE -1 END, e.perm
          FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm) WHERE e.tag IN (2, 4, 8);
    END IF;
    UPDATE node SET mode = (n.mode & ~511) | v_bits, ctime = _now() WHERE inode = p_inode;
    RETURN 0;
END
$$;

-- For people: every ACL entry with its node's path, as getfacl shows it
-- (the access ACL's owner, mask and other entries come from the mode).
CREATE VIEW acls AS
SELECT a.inode, path(a.inode) AS path, CASE a.kind WHEN 'a' THEN 'access' ELSE 'default' END AS kind,
       CASE a.tag WHEN 1 THEN 'user' WHEN 2 THEN 'user' WHEN 4 THEN 'group' WHEN 8 THEN 'group'
                  WHEN 16 THEN 'mask' ELSE 'other' END AS tag,
       CASE WHEN a.tag IN (2, 8) THEN a.qualifier END AS id,
       (CASE WHEN a.perm & 4 <> 0 THEN 'r' ELSE '-' END) || (CASE WHEN a.perm & 2 <> 0 THEN 'w' ELSE '-' END)
       || (CASE WHEN a.perm & 1 <> 0 THEN 'x' ELSE '-' END) AS perm
  FROM acl a;
