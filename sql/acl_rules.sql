-- The rules of POSIX ACLs that creating a node needs before ACLs
-- themselves (acl.sql): what a well-formed ACL is, the mode a default ACL
-- gives a new node, and the ACLs it passes on.

-- Whether an ACL (its entries' tags, qualifiers and permissions) is well
-- formed: one owner, owning group and other entry, a mask when a named user
-- or group is present, at most one mask, named entries with valid and
-- distinct ids, permissions 0..7.
CREATE FUNCTION _acl_valid(p_tags smallint[], p_ids bigint[], p_perms smallint[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT cardinality(p_tags) = cardinality(p_ids) AND cardinality(p_tags) = cardinality(p_perms)
       AND count(*) FILTER (WHERE e.tag = 1) = 1
       AND count(*) FILTER (WHERE e.tag = 4) = 1
       AND count(*) FILTER (WHERE e.tag = 32) = 1
       AND count(*) FILTER (WHERE e.tag = 16) <= 1
       AND (count(*) FILTER (WHERE e.tag IN (2, 8)) = 0 OR count(*) FILTER (WHERE e.tag = 16) = 1)
       AND bool_and(e.tag IN (1, 2, 4, 8, 16, 32) AND e.perm BETWEEN 0 AND 7)
       AND bool_and(CASE WHEN e.tag IN (2, 8) THEN _id_ok(e.id) ELSE true END)
       AND count(DISTINCT (e.tag, CASE WHEN e.tag IN (2, 8) THEN e.id ELSE -1 END)) = count(*)
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
$$;

-- The mode of a new node made with p_mode under a directory whose default
-- ACL is given: the special bits kept, the permission bits masked by the
-- ACL's owner, mask (or owning group) and other entries.
CREATE FUNCTION _acl_create_mode(p_mode integer, p_tags smallint[], p_perms smallint[]) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT (p_mode & 3584)
           | (((max(e.perm) FILTER (WHERE e.tag = 1)) & (p_mode >> 6) & 7) << 6)
           | ((coalesce(max(e.perm) FILTER (WHERE e.tag = 16), max(e.perm) FILTER (WHERE e.tag = 4))
               & (p_mode >> 3) & 7) << 3)
           | ((max(e.perm) FILTER (WHERE e.tag = 32)) & p_mode & 7)
      FROM unnest(p_tags, p_perms) AS e(tag, perm)
$$;

-- Gives the new node p_inode the ACLs its parent's default ACL (tags, ids,
-- perms) passes on: an access ACL when the default one is more than a
-- mode (its mask and owner bits are in the mode already), and, to a
-- directory, the default ACL itself.
CREATE FUNCTION _acl_inherit(p_inode bigint, p_is_dir boolean, p_tags smallint[], p_ids bigint[],
                             p_perms smallint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT p_inode, 'a', e.tag, e.id, e.perm
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
     WHERE e.tag IN (2, 4, 8) AND p_tags && ARRAY[2, 8, 16]::smallint[];
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT p_inode, 'd', e.tag, e.id, e.perm
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
     WHERE p_is_dir;
END
$$;
