-- jfs 0.2.26 -> 0.2.27.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.27 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- Shard roots checked from both sides and removed (`jfs shard fsck`, `jfs
-- shard rmdir`): shard_links, shard_roots, shard_root_unlink and
-- shard_root_remove, all of administration (granted by jfs.grant_admin
-- when it runs again). admin_procedures lists them; its signature stays.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, check and repair the volume (fsck, check_quota: full scans
-- no client need run), keep read-only roles' store keys, cap the bytes
-- waiting for deletion, make a database a shard and add it to the map, make,
-- check and remove shard roots.
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap',
             'shard_init', 'shard_add', 'shard_root_make', 'shard_root_link', 'shard_links', 'shard_roots',
             'shard_root_unlink', 'shard_root_remove']::name[];

-- The entries of this database that name a node of another shard (shard
-- roots seen from their parents' side), for `jfs shard fsck` and `jfs
-- shard rmdir` (administration).
CREATE FUNCTION shard_links() RETURNS TABLE (parent bigint, name bytea, inode bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT e.parent, e.name, e.inode FROM edge e
     WHERE e.type = 2 AND _remote(e.inode) AND NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = e.inode)
$$;

-- The directories of this database whose parent is on another shard
-- (shard roots seen from their own side), with whether each is empty
-- (administration).
CREATE FUNCTION shard_roots() RETURNS TABLE (inode bigint, parent bigint, empty boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT n.inode, n.parent, _dir_is_empty(n.inode) FROM node n WHERE n.type = 2 AND _remote(n.parent)
$$;

-- Removes entry p_name of directory p_parent when it names a directory of
-- another shard (administration): the first step of removing a shard root
-- (`jfs shard rmdir`), or the repair of an entry whose node is gone.
-- Returns errno (0; 2 ENOENT; 22 EINVAL when the entry's node is here).
CREATE FUNCTION shard_root_unlink(p_parent bigint, p_name bytea, OUT errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_inode bigint;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    PERFORM 1 FROM node WHERE node.inode = p_parent FOR NO KEY UPDATE;
    DELETE FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.type = 2 AND _remote(e.inode)
       AND NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = e.inode)
    RETURNING e.inode INTO v_inode;
    IF NOT FOUND THEN
        errno := CASE WHEN EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = p_name)
                      THEN 22 ELSE 2 END;
        RETURN;
    END IF;
    UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    INSERT INTO change (op, inode, parent, name) VALUES ('rmdir', v_inode, p_parent, p_name);
    errno := 0;
END
$$;

-- Removes directory p_inode, a shard root of this shard (its parent on
-- another), when it is empty (administration): the last step of removing
-- a shard root, once its entry is gone (jfs.shard_root_unlink in the
-- parent's database), or the repair of one that never got its entry.
-- Returns errno (0; 2 ENOENT; 22 EINVAL when it is no shard root; 39
-- ENOTEMPTY).
CREATE FUNCTION shard_root_remove(p_inode bigint, OUT errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    n node;
BEGIN
    PERFORM _unleased(ARRAY[p_inode]);
    SELECT * INTO n FROM node WHERE node.inode = p_inode FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2;
    ELSIF n.type <> 2 OR NOT _remote(n.parent) THEN
        errno := 22;
    ELSIF NOT _dir_is_empty(p_inode) THEN
        errno := 39;
    ELSE
        DELETE FROM node WHERE node.inode = p_inode;
        DELETE FROM xattr WHERE xattr.inode = p_inode;
        DELETE FROM acl WHERE acl.inode = p_inode;
        PERFORM _forget_dirs(ARRAY[p_inode]);
        PERFORM _uncharge_nodes(ARRAY[n.uid], ARRAY[n.gid], ARRAY[4096::bigint]);
        INSERT INTO change (op, inode, parent, name, uid, gid) VALUES ('rmdir', p_inode, n.parent, NULL, n.uid, n.gid);
        errno := 0;
    END IF;
END
$$;

-- (new functions: nobody's until granted, as a fresh install leaves them)
REVOKE EXECUTE ON FUNCTION shard_links(), shard_roots(), shard_root_unlink(bigint, bytea),
    shard_root_remove(bigint) FROM PUBLIC;
