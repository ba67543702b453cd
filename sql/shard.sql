-- Shards: one volume over several databases, its namespace split by subtree.
--
-- The root database (shard 0) holds the root directory and the shard map
-- (table shard_map); every other database of the volume is formatted with
-- the volume's uuid and settings and made shard N by jfs.shard_init. The
-- inode and slice ids a database hands out carry its shard number in bits
-- 48 to 62 (shard N's are N * 2^48 + 1 onwards), so an inode names its
-- shard without a lookup and objects of different shards never share a key
-- in the volume's bucket. (The trash's inode, 0x7FFFFFFF10000000, names no
-- shard: shard numbers stop at 32766.) The trash is the root's: a shard
-- keeps none (its trash_days is 0), so what is removed there is gone.
--
-- A shard root is a directory whose node lives on one shard and whose
-- entry lives in its parent's database, another shard: jfs.shard_root_make
-- makes the node on the target shard first, then jfs.shard_root_link the
-- entry in the parent's, so a crash in between leaves only a directory
-- without a name, never an entry naming nothing. Everything made below a
-- shard root is made on its shard. In the parent's database the entry is
-- an ordinary edge row whose inode has no node row there: jfs.lookup
-- answers it with errno 18 (EXDEV) and the inode and type, and the mount
-- asks the shard for the attributes.

-- The shard this database is of its volume (0: the root).
CREATE FUNCTION shard_number() RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT _this_shard()
$$;

-- The volume's other shards (in its root database): number, URL (without
-- credentials: a mount adds its own) and when each was added.
CREATE FUNCTION shards(OUT number integer, OUT url text, OUT added_at timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT m.number, m.url, m.added_at FROM shard_map m ORDER BY m.number
$$;

-- Makes this database, formatted as volume p_uuid (jfs.format with p_uuid)
-- and used by nobody yet, shard p_number of that volume (administration):
-- its ids from then on carry p_number, and it has no root directory of
-- its own (the root database's is the volume's). Returns errno (0; 22
-- EINVAL with the reason in message when this database is not a fresh
-- format of that volume or is the root of other shards) and a message.
-- Run again with the same arguments, it changes nothing and answers 0.
CREATE FUNCTION shard_init(p_uuid uuid, p_number integer, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting;
BEGIN
    errno := 22;
    IF p_number IS NULL OR p_number NOT BETWEEN 1 AND 32766 THEN
        message := pg_catalog.format('invalid shard number %s: use 1 to 32766', p_number);
        RETURN;
    END IF;
    LOCK TABLE setting IN EXCLUSIVE MODE;
    SELECT * INTO s FROM setting;
    IF NOT FOUND OR s.uuid IS DISTINCT FROM p_uuid THEN
        message := pg_catalog.format('this database is not formatted as volume %s: format it with that uuid first',
                                     p_uuid);
        RETURN;
    ELSIF s.shard = p_number THEN
        errno := 0;
        message := pg_catalog.format('already shard %s of volume %L', p_number, s.name);
        RETURN;
    ELSIF s.shard <> 0 THEN
        message := pg_catalog.format('this database is shard %s of volume %L already', s.shard, s.name);
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM shard_map) THEN
        message := 'this database is the root of shards of its own';
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM edge) OR EXISTS (SELECT 1 FROM node WHERE inode <> 1) OR EXISTS (SELECT 1 FROM session)
          OR (SELECT c.next FROM counter c WHERE c.name = 'inode') <> 2
          OR (SELECT c.next FROM counter c WHERE c.name = 'slice') <> 1 THEN
        message := 'this database holds files or was used by a mount: a shard starts from a fresh format';
        RETURN;
    END IF;
    -- the trash is the root database's (/.trash): removals on a shard are
    -- final, as with --trash-days 0
    UPDATE setting SET shard = p_number, trash_days = 0;
    UPDATE counter SET next = (p_number::bigint << 48) + 1;
    -- the volume's root is the root database's: no root here, and so
    -- nothing charged to this database's share of the volume's usage
    DELETE FROM node WHERE inode = 1;
    DELETE FROM dir_stats WHERE inode = 1;
    UPDATE quota_usage SET space = 0, inodes = 0 WHERE kind = 'fs' AND key = 0;
    errno := 0;
    message := pg_catalog.format('this database is shard %s of volume %L', p_number, s.name);
END
$$;

-- Notes shard p_number at p_url (a connection URL without a password) in
-- the volume's shard map, in its root database (administration). The
-- shard must be made first (jfs.shard_init in its own database; `jfs
-- shard add` does both and checks the shard). Returns errno (0, 17 EEXIST
-- when the number is taken, 22 EINVAL) and a message.
CREATE FUNCTION shard_add(p_number integer, p_url text, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    errno := 22;
    IF p_number IS NULL OR p_number NOT BETWEEN 1 AND 32766 THEN
        message := pg_catalog.format('invalid shard number %s: use 1 to 32766', p_number);
    ELSIF NOT EXISTS (SELECT 1 FROM setting) THEN
        message := 'this database holds no volume';
    ELSIF shard_number() <> 0 THEN
        message := pg_catalog.format('this database is shard %s: shards are added in the root database',
                                     shard_number());
    ELSIF p_url IS NULL OR p_url !~ '^postgres(ql)?://' THEN
        message := 'a shard''s URL is a postgres:// URL';
    ELSIF p_url ~ '^postgres(ql)?://[^/@]*:[^/@]*@' OR p_url ~* '[?&]password=' THEN
        message := 'a shard''s URL is kept where every mount reads it: give it without a password '
                   '(mounts use their own credentials)';
    ELSE
        INSERT INTO shard_map (number, url) VALUES (p_number, p_url) ON CONFLICT (number) DO NOTHING;
        IF FOUND THEN
            errno := 0;
            message := pg_catalog.format('shard %s added', p_number);
        ELSE
            errno := 17;
            message := pg_catalog.format('shard %s is in the map already', p_number);
        END IF;
    END IF;
END
$$;

-- Step 1 of a shard root (administration), in the target shard's
-- database: a directory of mode p_mode owned by p_uid:p_gid whose parent
-- p_parent is a directory of another shard. Charged to this shard's part
-- of the volume's usage and its owner's quotas. Returns errno (0; 22
-- EINVAL when p_parent is of this shard or an argument is invalid; 28 or
-- 122 past a limit) and the new directory's inode.
CREATE FUNCTION shard_root_make(p_parent bigint, p_mode integer, p_uid bigint, p_gid bigint,
                                OUT errno integer, OUT inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting;
    v_now bigint := _now();
BEGIN
    SELECT * INTO s FROM setting;
    IF NOT FOUND OR s.shard = 0 OR p_parent IS NULL OR p_parent <= 0 OR NOT _remote(p_parent)
       OR p_mode IS NULL OR NOT _mode_ok(p_mode, 2) OR NOT _id_ok(p_uid) OR NOT _id_ok(p_gid) THEN
        errno := 22;
        RETURN;
    END IF;
    errno := _charge(true, _owner_key(s.owner_quotas, s.quota_uids, p_uid),
                     _owner_key(s.owner_quotas, s.quota_gids, p_gid), NULL, NULL, 1, 4096, s.quota_limits);
    IF errno <> 0 THEN
        RETURN;
    END IF;
    inode := _next_ids('inode', 1);
    INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, parent)
    VALUES (inode, 2, p_mode & 4095, p_uid, p_gid, v_now, v_now, v_now, 2, 0, p_parent);
    INSERT INTO change (op, inode, parent, name, uid, gid) VALUES ('mkdir', inode, p_parent, NULL, p_uid, p_gid);
END
$$;

-- Step 2 of a shard root (administration), in the parent's database: entry
-- p_name in directory p_parent for directory p_inode of another shard
-- (made by jfs.shard_root_make). Returns errno (0; 2 ENOENT, 20 ENOTDIR
-- for p_parent; 17 EEXIST; 22 EINVAL when p_inode is of this shard).
CREATE FUNCTION shard_root_link(p_parent bigint, p_name bytea, p_inode bigint, OUT errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_type smallint;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    errno := _check_name(p_name);
    IF errno <> 0 THEN
        RETURN;
    ELSIF p_inode IS NULL OR p_inode <= 0 OR NOT _remote(p_inode) THEN
        errno := 22;
        RETURN;
    ELSIF _is_dot(p_name) OR _reserved_name(p_parent, p_name) THEN
        errno := 17;
        RETURN;
    END IF;
    SELECT d.type INTO v_type FROM node d WHERE d.inode = p_parent FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        errno := 2;
        RETURN;
    ELSIF v_type <> 2 THEN
        errno := 20;
        RETURN;
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, 2)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        errno := 17;
        RETURN;
    END IF;
    UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    INSERT INTO change (op, inode, parent, name) VALUES ('mkdir', p_inode, p_parent, p_name);
    errno := 0;
END
$$;

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
-- another shard: the last step of removing a shard root (an rmdir through
-- a mount, `jfs shard rmdir`), once its node is gone from its shard
-- (jfs.shard_root_remove there), or the repair of an entry whose node is
-- gone (`jfs shard fsck`). A client role may call it, as it may rmdir and
-- rmr: the caller checks that the node is gone first. Returns errno (0;
-- 2 ENOENT; 22 EINVAL when the entry's node is here).
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
-- another), when it is empty: the first step of removing a shard root
-- (its entry, in the parent's database, goes next: jfs.shard_root_unlink),
-- or the repair of one that never got its entry. A create in it either
-- commits first (ENOTEMPTY) or finds it gone: a crash before the second
-- step leaves a name of nothing (mounts answer ENOENT for it), which `jfs
-- shard rmdir` or `jfs shard fsck --repair` removes, never a directory
-- with files and no name. A client role may call it, as it may rmdir.
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

-- Step 1 of a directory of the gateway's own on this shard (a client
-- role's procedure, unlike shard_root_make): `jfs gateway` writes an
-- object whose key is on this shard aside in it, then renames it onto the
-- key (a rename never crosses shards). Mode 0700, owned by p_uid:p_gid as
-- the caller's role squashes them, its parent p_parent a directory of the
-- root's shard; its entry can only be made by jfs.gateway_dir_link, in a
-- directory named .jfs-gateway. A crash before that leaves an orphan that
-- `jfs shard fsck --repair` removes. Returns errno and the inode, as
-- shard_root_make.
CREATE FUNCTION gateway_dir_make(p_parent bigint, p_uid bigint, p_gid bigint,
                                 OUT errno integer, OUT inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_squash record;
BEGIN
    IF p_parent IS NULL OR p_parent >> 48 <> 0 THEN
        errno := 22;
        RETURN;
    END IF;
    IF (SELECT s.squash_roles FROM setting s) THEN
        v_squash := _caller_squash();
        p_uid := _squashed(p_uid, v_squash.kind, v_squash.uid);
        p_gid := _squashed(p_gid, v_squash.kind, v_squash.gid);
    END IF;
    SELECT m.errno, m.inode INTO errno, inode FROM shard_root_make(p_parent, 448, p_uid, p_gid) m;
END
$$;

-- Step 2 of a directory of the gateway's own, in the root's database: entry
-- p_name, which must be 'shard-N', in directory p_parent, which must be an
-- entry named .jfs-gateway, for directory p_inode of shard N (made by
-- jfs.gateway_dir_make there) that no entry here names yet. Returns errno
-- (0; 1 EPERM for another name, parent or database; 17 EEXIST; else as
-- jfs.shard_root_link).
CREATE FUNCTION gateway_dir_link(p_parent bigint, p_name bytea, p_inode bigint, OUT errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF _this_shard() <> 0 OR p_inode IS NULL OR p_inode <= 0 OR NOT _remote(p_inode)
       OR p_name IS DISTINCT FROM convert_to('shard-' || (p_inode >> 48), 'UTF8')
       OR NOT EXISTS (SELECT 1 FROM edge e
                       WHERE e.inode = p_parent AND e.type = 2
                         AND e.name = '\x2e6a66732d67617465776179'::bytea) THEN
        errno := 1;
    ELSIF EXISTS (SELECT 1 FROM edge e WHERE e.inode = p_inode) THEN
        errno := 17;
    ELSE
        errno := shard_root_link(p_parent, p_name, p_inode);
    END IF;
END
$$;
