-- clone: a file or a tree copied in one transaction, data shared by reference
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
-- /src/{f (8 KiB, xattr), h (hard link of f), s -> f, fifo, sparse (data at chunk 2 only, then a hole),
--       d/{g (hard link of f), e/}, o (hard link of /outside/o)}
SELECT inode AS src FROM jfs.mknod(1, 'src', 2, 493, 1000, 100) \gset
SELECT inode AS d FROM jfs.mknod(:src, 'd', 2, 448, 1000, 100) \gset
SELECT errno FROM jfs.mknod(:d, 'e', 2, 493, 1000, 100);
SELECT inode AS f FROM jfs.mknod(:src, 'f', 1, 420, 1000, 100) \gset
SELECT errno FROM jfs.write_slice(:f, 0, 0, 101, 8192, 0, 8192);
SELECT errno FROM jfs.write_slice(:f, 0, 4096, 102, 4096, 0, 100);
SELECT jfs.setxattr(:f, 'user.tag', 'blue');
SELECT errno FROM jfs.link(:f, :src, 'h');
SELECT errno FROM jfs.link(:f, :d, 'g');
SELECT errno FROM jfs.symlink(:src, 's', 'f', 1000, 100);
SELECT errno FROM jfs.mknod(:src, 'fifo', 4, 420, 1000, 100);
SELECT inode AS sparse FROM jfs.mknod(:src, 'sparse', 1, 420, 1000, 100) \gset
SELECT errno FROM jfs.write_slice(:sparse, 2, 0, 103, 65536, 0, 65536);
SELECT errno FROM jfs.setattr(:sparse, 8, p_length => 2 * 67108864 + 1000);
SELECT errno FROM jfs.setattr(:sparse, 8, p_length => 2 * 67108864 + 70000);
SELECT inode AS outside FROM jfs.mknod(1, 'outside', 2, 493, 0, 0) \gset
SELECT inode AS o FROM jfs.mknod(:outside, 'o', 1, 420, 0, 0) \gset
SELECT errno FROM jfs.write_slice(:o, 0, 0, 104, 4096, 0, 4096);
SELECT errno FROM jfs.link(:o, :src, 'o');
SELECT sum(inodes) AS inodes, sum(space) AS space FROM jfs.quota_usage WHERE kind = 'fs';

-- the whole tree
SELECT nodes, space FROM jfs.clone('/src', '/copy');
SELECT name, type, size, mode, uid, gid, nlink FROM jfs.ls('/copy');
SELECT name, type, size, mode, nlink FROM jfs.ls('/copy/d');
-- hard links inside the tree stay one node; the link from outside became its own node
SELECT count(DISTINCT inode) AS f_h_g_nodes FROM jfs.ls('/copy') WHERE name IN ('f', 'h')
 UNION ALL SELECT count(*) FROM jfs.ls('/copy/d') l WHERE l.inode = (SELECT inode FROM jfs.ls('/copy') WHERE name = 'f');
SELECT (SELECT inode FROM jfs.ls('/copy') WHERE name = 'o') <> :o AS o_is_new;
SELECT errno, nlink FROM jfs.getattr(:o);
-- new ids, same content: symlink target, xattr, slices in the same order, the hole
SELECT errno, convert_from(target, 'UTF8') FROM jfs.readlink(jfs.resolve('/copy/s'));
SELECT errno, convert_from(value, 'UTF8') FROM jfs.getxattr(jfs.resolve('/copy/f'), 'user.tag');
SELECT pos, slice_id, slice_size, slice_off, len FROM jfs.read_chunk(jfs.resolve('/copy/f'), 0);
SELECT chunk, pos, slice_id, len FROM generate_series(0, 2) chunk, jfs.read_chunk(jfs.resolve('/copy/sparse'), chunk);
SELECT (SELECT parent FROM jfs.getattr(jfs.resolve('/copy/d'))) = jfs.resolve('/copy') AS dir_parent,
       (SELECT parent FROM jfs.getattr(jfs.resolve('/copy'))) = 1 AS root_parent;
-- each shared slice gained one reference per new slice row
SELECT slice_id, refs FROM jfs.slice_ref ORDER BY 1;
SELECT sum(inodes) AS inodes, sum(space) AS space FROM jfs.quota_usage WHERE kind = 'fs';
SELECT nlink FROM jfs.getattr(1);
SELECT * FROM jfs.fsck();

-- copy-on-write: writing the clone adds a slice there, the source is unchanged
SELECT errno FROM jfs.write_slice(jfs.resolve('/copy/f'), 0, 0, 105, 4096, 0, 4096);
SELECT pos, slice_id, len FROM jfs.read_chunk(:f, 0);
SELECT pos, slice_id, len FROM jfs.read_chunk(jfs.resolve('/copy/f'), 0);

-- a single file: a hard-linked source gives a clone with one link; owner given
SELECT nodes, space FROM jfs.clone_node(:f, 1, 'one', 7, 8);
SELECT type, nlink, length, uid, gid, mode FROM jfs.getattr(jfs.resolve('/one'));
-- into its own subtree: the snapshot does not include the clone itself
SELECT nodes FROM jfs.clone('/src', '/src/d/e/again');
SELECT count(*) AS entries_in_again FROM jfs.ls('/src/d/e/again');
SELECT * FROM jfs.fsck();

-- errors: nothing happens
SELECT errno, inode FROM jfs.clone_node(:f, 1, 'one');
SELECT errno FROM jfs.clone_node(:f, :f, 'x');
SELECT errno FROM jfs.clone_node(:f, 99999, 'x');
SELECT errno FROM jfs.clone_node(99999, 1, 'x');
SELECT errno FROM jfs.clone_node(:f, 1, '.');
SELECT errno FROM jfs.clone_node(:f, 1, 'a/b');
SELECT errno FROM jfs.clone_node(:f, 1, convert_to(repeat('x', 256), 'UTF8'));
SELECT * FROM jfs.clone('/src', '/copy');
SELECT * FROM jfs.clone('/nope', '/x');
SELECT * FROM jfs.clone('/src', '/nope/x');
SELECT * FROM jfs.clone('/src', 'relative');
SELECT * FROM jfs.clone('/src', '/');
SELECT sum(inodes) AS inodes, sum(space) AS space FROM jfs.quota_usage WHERE kind = 'fs';

-- refcounts exact: remove the source, then every clone: each slice queued exactly once
SELECT jfs.rmr('/src');
SELECT slice_id, refs FROM jfs.slice_ref ORDER BY 1;
SELECT * FROM jfs.fsck();
SELECT jfs.rmr('/copy'), jfs.rmr('/one');
SELECT slice_id, refs FROM jfs.slice_ref ORDER BY 1;
SELECT slice_id FROM jfs.delslice ORDER BY 1;
SELECT jfs.rmr('/outside');
SELECT slice_id FROM jfs.slice_ref;
SELECT slice_id FROM jfs.delslice ORDER BY 1;
SELECT sum(inodes) AS inodes, sum(space) AS space FROM jfs.quota_usage WHERE kind = 'fs';
SELECT name FROM jfs.ls('/');
SELECT * FROM jfs.rmr('/gone');
SELECT * FROM jfs.fsck();
