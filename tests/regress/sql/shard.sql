-- Shards (sql/shard.sql): this database as a volume's root with shard roots
-- of other shards in it, then made afresh as shard 3. A shard root's entry
-- answers EXDEV (18) with its inode and type; what would cross a shard
-- (rename, rmdir, rmr, link) is refused with EXDEV and changes nothing; a
-- lease lists the entry; every check of fsck passes on both sides.
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
SELECT jfs.shard_number();
SELECT (1::bigint << 48) AS s1, (2::bigint << 48) AS s2 \gset
-- the map: numbers 1..32766, URLs without passwords, each number once
SELECT * FROM jfs.shard_add(1, 'postgres://db1:5432/vol');
SELECT * FROM jfs.shard_add(1, 'postgres://db9/vol');
SELECT * FROM jfs.shard_add(2, 'postgres://u:secret@db2/vol');
SELECT * FROM jfs.shard_add(2, 'postgres://db2/vol?password=secret');
SELECT * FROM jfs.shard_add(2, 'db2');
SELECT * FROM jfs.shard_add(32767, 'postgres://db2/vol');
SELECT * FROM jfs.shard_add(2, 'postgres://u@db2/vol');
SELECT number, url FROM jfs.shards();
-- a root is no shard, and makes no shard roots of its own
SELECT * FROM jfs.shard_init((SELECT uuid FROM jfs.setting), 4);
SELECT * FROM jfs.shard_root_make(:s1 + 1, 493, 0, 0);
-- shard roots in / and in a directory
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.shard_root_link(1, 'far', :s1 + 1);
SELECT errno FROM jfs.shard_root_link(:d, 'farther', :s2 + 7);
SELECT errno FROM jfs.shard_root_link(1, 'far', :s2 + 8);        -- taken
SELECT errno FROM jfs.shard_root_link(1, 'near', :d);            -- of this shard
SELECT errno FROM jfs.shard_root_link(1, 'a/b', :s1 + 2);
SELECT errno FROM jfs.shard_root_link(:s1 + 1, 'x', :s2 + 9);    -- no such parent here
SELECT nlink FROM jfs.node WHERE inode = 1;
SELECT errno, inode - :s1 AS inode, type, mode FROM jfs.lookup(1, 'far');
SELECT errno, name, inode - :s2 AS inode, type, mode FROM jfs.readdirplus(:d);
SELECT count(*) AS ahead_rows FROM jfs.lookup_ahead(1, 'd');
-- refused with EXDEV, nothing changed
SELECT errno FROM jfs.rename(1, 'far', 1, 'moved');
SELECT errno FROM jfs.rename(1, 'far', :d, 'far');
SELECT errno FROM jfs.rename(:d, 'farther', 1, 'd', 2);
SELECT errno FROM jfs.rmdir(1, 'far');
SELECT errno, removed FROM jfs.rmr(1, 'd');
SELECT errno FROM jfs.link(:s1 + 5, 1, 'hard');
SELECT errno FROM jfs.unlink(1, 'far');
SELECT errno FROM jfs.mknod(1, 'far', 1, 420, 0, 0);
SELECT name, inode - :s1 AS inode FROM jfs.edge WHERE parent = 1 AND inode > :s1 ORDER BY name;
-- a lease of / lists the shard root (a create of its name is not answered)
SELECT jfs.session_open('regress', 1, '{}', '1 minute') AS sid \gset
SELECT errno, names, nlinks FROM jfs.take_lease(:sid, 1);
SELECT jfs.session_close(:sid);
-- the gateway's own directory on a shard (procedures of a client role):
-- only as .jfs-gateway/shard-N, for a node of shard N no entry names yet
SELECT inode AS gw FROM jfs.mknod(1, '.jfs-gateway', 2, 448, 0, 0) \gset
SELECT errno FROM jfs.gateway_dir_link(:gw, 'shard-1', :s1 + 20);
SELECT errno FROM jfs.gateway_dir_link(:gw, 'shard-1', :s1 + 21);          -- taken
SELECT errno FROM jfs.gateway_dir_link(:gw, 'shard-2', :s1 + 22);          -- another shard's name
SELECT errno FROM jfs.gateway_dir_link(:gw, 'shard-2', :s2 + 7);           -- named already
SELECT errno FROM jfs.gateway_dir_link(:d, 'shard-2', :s2 + 30);           -- not in .jfs-gateway
SELECT errno FROM jfs.gateway_dir_link(:gw, 'shard-0', :d);                -- of this shard
SELECT errno FROM jfs.gateway_dir_link(:gw, 'shard-32767', 9223372036854775807);
SELECT errno FROM jfs.gateway_dir_link(-1, 'shard-1', :s1 + 23);
SELECT errno FROM jfs.gateway_dir_link(:gw, NULL, :s1 + 24);
SELECT errno FROM jfs.gateway_dir_make(1, 0, 0);                           -- the root makes none
SELECT name, inode - :s1 AS inode FROM jfs.edge WHERE parent = :gw;
-- this side of each shard root, and a name of one removed (jfs shard rmdir)
SELECT parent = 1 AS in_root, name, inode >> 48 AS shard, inode & 65535 AS inode FROM jfs.shard_links() ORDER BY name;
SELECT errno FROM jfs.shard_root_unlink(:d, 'farther');
SELECT errno FROM jfs.shard_root_unlink(:d, 'farther');
SELECT errno FROM jfs.shard_root_unlink(1, 'd');
SELECT nlink, (SELECT count(*) FROM jfs.edge WHERE parent = :d) AS entries FROM jfs.node WHERE inode = :d;
-- ids at the ends of the range name no shard root
SELECT errno FROM jfs.shard_root_link(1, 'edge', 9223372036854775807);
SELECT errno FROM jfs.shard_root_link(1, 'edge', -1);
SELECT errno FROM jfs.shard_root_link(-1, 'edge', :s1 + 3);
SELECT errno FROM jfs.shard_root_unlink(9223372036854775807, 'x');
SELECT errno FROM jfs.shard_root_remove(-1);
SELECT errno FROM jfs.shard_root_make(9223372036854775807, 493, 0, 0);
SELECT * FROM jfs.fsck();

-- made afresh as shard 3 of a volume
\ir tests/regress/fresh_extension.sql
SELECT errno FROM jfs.format('regress', p_uuid => '00000000-0000-0000-0000-0000000000aa');
SELECT * FROM jfs.shard_init('00000000-0000-0000-0000-0000000000bb', 3);
SELECT * FROM jfs.shard_init('00000000-0000-0000-0000-0000000000aa', 3);
SELECT * FROM jfs.shard_init('00000000-0000-0000-0000-0000000000aa', 3);
SELECT * FROM jfs.shard_init('00000000-0000-0000-0000-0000000000aa', 4);
SELECT jfs.shard_number(), (SELECT trash_days FROM jfs.setting);
SELECT name, next - (3::bigint << 48) AS next FROM jfs.counter ORDER BY name;
SELECT count(*) AS nodes FROM jfs.node;
SELECT * FROM jfs.statfs() \gset st_
SELECT :st_used_inodes AS used_inodes;
SELECT * FROM jfs.shard_add(5, 'postgres://db5/vol');
SELECT (jfs.alloc_ids('inode', 4) >> 48) AS inode_shard, (jfs.alloc_ids('slice', 4) >> 48) AS slice_shard;
-- the gateway's own directory here: 0700, below the root's shard only
SELECT inode AS g FROM jfs.gateway_dir_make(1, 1000, 1000) \gset
SELECT :g >> 48 AS shard, parent, mode, uid, gid, nlink FROM jfs.node WHERE inode = :g;
SELECT errno FROM jfs.gateway_dir_make(:g, 0, 0);                          -- a parent of this shard
SELECT errno FROM jfs.gateway_dir_make(9223372036854775807, 0, 0);
SELECT errno FROM jfs.gateway_dir_make(-1, 0, 0);
SELECT errno FROM jfs.gateway_dir_make(1, -1, 0);
SELECT errno FROM jfs.gateway_dir_make(1, 0, 4294967296);
SELECT errno FROM jfs.shard_root_remove(:g);
-- a shard root under directory 1 of the root's shard, and a tree in it
SELECT inode AS r FROM jfs.shard_root_make(1, 493, 1000, 1000) \gset
SELECT :r >> 48 AS shard, :r - (3::bigint << 48) AS after_the_ids_reserved;
SELECT errno FROM jfs.shard_root_make(:r, 493, 0, 0);  -- a parent of this shard
SELECT errno FROM jfs.shard_root_make(1, 65535, 0, 0);
SELECT errno FROM jfs.mknod(:r, 'f', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(:r, 'sub', 2, 493, 0, 0);
SELECT parent, nlink, uid FROM jfs.node WHERE inode = :r;
SELECT * FROM jfs.statfs() \gset st_
SELECT :st_used_inodes AS used_inodes;
-- the trash is the root's: a shard's format keeps none
SELECT errno, message FROM jfs.format('regress', p_trash_days => 1, p_force => true);
SELECT errno, removed FROM jfs.rmr(:r, 'sub');
-- this side of a shard root, removed once empty (jfs shard rmdir)
SELECT inode = :r AS is_r, parent, empty FROM jfs.shard_roots();
SELECT errno FROM jfs.shard_root_remove((SELECT inode FROM jfs.mknod(:r, 'inner', 2, 493, 0, 0)));  -- no shard root
SELECT errno FROM jfs.rmdir(:r, 'inner');
SELECT errno FROM jfs.shard_root_remove(:r);
SELECT errno FROM jfs.unlink(:r, 'f');
SELECT errno FROM jfs.shard_root_remove(:r);
SELECT errno FROM jfs.shard_root_remove(:r);
SELECT count(*) AS nodes FROM jfs.node;
SELECT * FROM jfs.statfs() \gset st_
SELECT :st_used_inodes AS used_inodes;
SELECT * FROM jfs.fsck();
