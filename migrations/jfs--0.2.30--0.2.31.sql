-- jfs 0.2.30 -> 0.2.31.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.31 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- The gateway over shards: gateway_dir_make (on a shard) and
-- gateway_dir_link (on the root) let a client role make the gateway's own
-- directory on a shard, /.jfs-gateway/shard-N, and nowhere else; both
-- write, so a read-only role gets neither (write_procedures).

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


-- The procedures that change the file system (its names, attributes and
-- data, the trash, the change log, the queue of freed objects, backups,
-- other mounts' dead sessions), and asking for a directory's lease: not
-- granted to a read-only client role. Such a role reads (past leases),
-- keeps its own session, locks and files held open, and calls sync.
CREATE OR REPLACE FUNCTION write_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['mknod', 'symlink', 'link', 'unlink', 'rmdir', 'rename', 'setattr', 'set_acl',
             'setxattr', 'removexattr', 'write_slice', 'write_slices', 'zero_range', 'copy_range',
             'batch_unlink', 'rmr', 'clone_node', 'clone', 'compact_chunk', 'restore', 'trash_purge',
             'changelog_prune', 'free_unlinked', 'forget_delslices', 'alloc_ids', 'backup_claim',
             'backup_release', 'session_cleanup', 'take_lease', 'lease_unlink', 'lease_commit',
             'mknod_with_slices', 'want_lease', 'touch_atime', 'create_many', 'shard_root_remove',
             'shard_root_unlink', 'gateway_dir_make', 'gateway_dir_link']::name[];

-- (new functions: nobody's until granted, as a fresh install leaves them)
REVOKE EXECUTE ON FUNCTION gateway_dir_make(bigint, bigint, bigint), gateway_dir_link(bigint, bytea, bigint)
    FROM PUBLIC;
