-- rename: plain, replace, RENAME_NOREPLACE (1), RENAME_EXCHANGE (2), loop check, nlink of parents
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT inode AS a FROM jfs.mknod(1, 'a', 2, 493, 0, 0) \gset
SELECT inode AS b FROM jfs.mknod(1, 'b', 2, 493, 0, 0) \gset
SELECT inode AS ab FROM jfs.mknod(:a, 'ab', 2, 493, 0, 0) \gset
SELECT inode AS f FROM jfs.mknod(:a, 'f', 1, 420, 0, 0) \gset
SELECT inode AS g FROM jfs.mknod(:b, 'g', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:g, 0, 0, 11, 4096, 0, 4096);
-- a file moves within a directory and between directories
SELECT errno, inode = :f AS moved FROM jfs.rename(:a, 'f', :a, 'f1');
SELECT errno FROM jfs.lookup(:a, 'f');
SELECT errno, inode = :f AS found FROM jfs.lookup(:a, 'f1');
SELECT errno FROM jfs.rename(:a, 'f1', :b, 'f');
SELECT errno, inode = :f AS found FROM jfs.lookup(:b, 'f');
SELECT nlink FROM jfs.getattr(:a);
-- replacing a file: the old one loses its link and its data is queued for deletion
SELECT errno, replaced = :g AS replaced_g, replaced_nlink FROM jfs.rename(:b, 'f', :b, 'g');
SELECT errno FROM jfs.getattr(:g);
SELECT slice_id FROM jfs.delslice;
SELECT errno, inode = :f AS now_f FROM jfs.lookup(:b, 'g');
-- replacing a hard-linked file keeps the node for its other name
SELECT inode AS h FROM jfs.mknod(:b, 'h', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.link(:h, :a, 'h-link');
SELECT errno, replaced = :h AS replaced_h, replaced_nlink FROM jfs.rename(:b, 'g', :b, 'h');
SELECT errno, nlink FROM jfs.getattr(:h);
-- RENAME_NOREPLACE refuses an existing target
SELECT errno FROM jfs.mknod(:b, 'x', 1, 420, 0, 0);
SELECT errno FROM jfs.rename(:b, 'x', :b, 'h', 1);
SELECT errno FROM jfs.rename(:b, 'x', :b, 'y', 1);
-- RENAME_EXCHANGE swaps two entries (here a directory and a file in different directories)
SELECT nlink AS a_nlink FROM jfs.getattr(:a);
SELECT nlink AS b_nlink FROM jfs.getattr(:b);
SELECT errno, inode = :ab AS moved_ab FROM jfs.rename(:a, 'ab', :b, 'y', 2);
SELECT (SELECT inode FROM jfs.lookup(:a, 'ab')) = (SELECT inode FROM jfs.lookup(1, 'b')) AS wrong,
       (SELECT type FROM jfs.lookup(:a, 'ab')) AS a_ab_type, (SELECT type FROM jfs.lookup(:b, 'y')) AS b_y_type;
SELECT parent = :b AS ab_parent_is_b FROM jfs.getattr(:ab);
SELECT nlink AS a_nlink FROM jfs.getattr(:a);
SELECT nlink AS b_nlink FROM jfs.getattr(:b);
SELECT errno FROM jfs.rename(:a, 'ab', :b, 'missing', 2);
SELECT errno FROM jfs.rename(:a, 'ab', :b, 'y', 3);
SELECT errno FROM jfs.rename(:a, 'ab', :b, 'y', 4);
-- a directory may not move into its own subtree
SELECT inode AS deep FROM jfs.mknod(:ab, 'deep', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.rename(:b, 'y', :deep, 'loop');
SELECT errno FROM jfs.rename(:b, 'y', :ab, 'loop');
SELECT errno FROM jfs.rename(1, 'b', :deep, 'loop');
SELECT errno FROM jfs.rename(:b, 'y', :ab, 'loop', 2);  -- exchange needs an existing target
-- ... and may not be exchanged into one
SELECT errno FROM jfs.mknod(:deep, 'z', 1, 420, 0, 0);
SELECT errno FROM jfs.rename(1, 'b', :deep, 'z', 2);
-- directory over directory: only over an empty one
SELECT inode AS full FROM jfs.mknod(1, 'full', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:full, 'child', 1, 420, 0, 0);
SELECT inode AS empty FROM jfs.mknod(1, 'empty', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.rename(:b, 'y', 1, 'full');
SELECT nlink AS root_nlink FROM jfs.getattr(1);
SELECT errno, replaced = :empty AS replaced_empty, replaced_nlink FROM jfs.rename(:b, 'y', 1, 'empty');
SELECT nlink AS root_nlink FROM jfs.getattr(1);
SELECT nlink AS b_nlink FROM jfs.getattr(:b);
SELECT parent FROM jfs.getattr(:ab);
SELECT errno FROM jfs.getattr(:empty);
-- type mismatches: a directory over a file, a file over a directory
SELECT errno FROM jfs.mknod(1, 'tf', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, 'td', 2, 493, 0, 0);
SELECT errno FROM jfs.rename(1, 'td', 1, 'tf');
SELECT errno FROM jfs.rename(1, 'tf', 1, 'td');
-- two names of one file: nothing happens
SELECT errno FROM jfs.link(:h, :b, 'h2');
SELECT errno FROM jfs.rename(:a, 'h-link', :b, 'h2');
SELECT count(*) AS names, (SELECT nlink FROM jfs.getattr(:h)) FROM jfs.edge WHERE inode = :h;
-- a name onto itself, a missing source, a missing or non-directory target parent
SELECT errno FROM jfs.rename(:b, 'x', :b, 'x');
SELECT errno FROM jfs.rename(:b, 'nope', :b, 'x2');
SELECT errno FROM jfs.rename(:b, 'x', 999, 'x2');
SELECT errno FROM jfs.rename(:b, 'x', :h, 'x2');
SELECT errno FROM jfs.rename(:b, '.', :b, 'x2');
SELECT errno FROM jfs.rename(:b, 'x', :b, '..');
-- rename sets the moved node's ctime and both parents' mtime
UPDATE jfs.node SET mtime = 0, ctime = 0 WHERE inode IN (1, :b);
SELECT ctime AS before_ctime FROM jfs.lookup(:b, 'x') \gset
SELECT errno FROM jfs.rename(:b, 'x', 1, 'x');
SELECT mtime > 0 AS root_mtime, ctime > 0 AS root_ctime FROM jfs.getattr(1);
SELECT mtime > 0 AS b_mtime FROM jfs.getattr(:b);
SELECT ctime >= :before_ctime AS ctime_moved FROM jfs.lookup(1, 'x');
SELECT * FROM jfs.fsck();
