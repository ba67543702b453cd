-- tiers: id -> storage class, inherited through mkdir and create, set recursively
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT * FROM jfs.tier ORDER BY id;
SELECT * FROM jfs.set_tier_class(1, 'standard_ia');
SELECT * FROM jfs.set_tier_class(3, 'GLACIER');
-- inheritance: what is made in a tier-3 directory is tier 3, at any depth
SELECT errno FROM jfs.mknod(1, 'cold', 2, 493, 0, 0);
SELECT errno FROM jfs.mknod(1, 'hot', 2, 493, 0, 0);
SELECT jfs.set_tier('/cold', 3);
SELECT errno, tier FROM jfs.mknod(jfs.resolve('/cold'), 'sub', 2, 493, 0, 0);
SELECT errno, tier FROM jfs.mknod(jfs.resolve('/cold/sub'), 'f', 1, 420, 0, 0);
SELECT errno, tier FROM jfs.symlink(jfs.resolve('/cold/sub'), 'l', 'f', 0, 0);
SELECT errno, tier FROM jfs.mknod(jfs.resolve('/hot'), 'f', 1, 420, 0, 0);
SELECT errno FROM jfs.write_slice(jfs.resolve('/cold/sub/f'), 0, 0, 7, 4096, 0, 4096);
SELECT errno FROM jfs.write_slice(jfs.resolve('/hot/f'), 0, 0, 8, 8192, 0, 8192);
SELECT name, tier FROM jfs.ls('/cold/sub') ORDER BY name;
SELECT * FROM jfs.tier_usage;
-- recursive set: everything below, once; without -r only the node itself
SELECT jfs.set_tier('/cold', 1, true);
SELECT jfs.set_tier('/cold', 1, true);
SELECT jfs.set_tier('/hot', 2);
SELECT jfs.path(inode), tier FROM jfs.node WHERE inode > 1 ORDER BY 1;
-- what jfs tier set/restore walks: files and their slices, with the class
SELECT jfs.path(inode), tier, storage_class, slice_id, slice_size FROM jfs.tier_files('/', true);
-- a new mapping changes no node (the objects move with jfs tier set --force)
SELECT * FROM jfs.set_tier_class(1, 'DEEP_ARCHIVE');
SELECT * FROM jfs.tier_usage;
-- errors
SELECT jfs.set_tier('/cold', 4);
SELECT jfs.set_tier('/nope', 1);
SELECT * FROM jfs.set_tier_class(1, 'COLD_STORAGE');
SELECT * FROM jfs.set_tier_class(7, 'GLACIER');
SELECT * FROM jfs.tier_files('/nope');
SELECT * FROM jfs.fsck();
