-- jfs 0.2.28 -> 0.2.29.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.29 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- A shard root is removed through a mount (rmdir, rm -rf, jfs rmr): its
-- node on its shard first (jfs.shard_root_remove, only when empty), then
-- its name in the parent's database (jfs.shard_root_unlink). Both were
-- administration only; a client role may now call them, as it may rmdir
-- (they join write_procedures: not a read-only role's). Roles get them
-- when jfs.grant_client runs again, as after every update.

-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, check and repair the volume (fsck, check_quota: full scans
-- no client need run), keep read-only roles' store keys, cap the bytes
-- waiting for deletion, make a database a shard and add it to the map, make
-- and check shard roots (removing one is an rmdir: write_procedures).
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap',
             'shard_init', 'shard_add', 'shard_root_make', 'shard_root_link', 'shard_links',
             'shard_roots']::name[];

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
             'shard_root_unlink']::name[];
