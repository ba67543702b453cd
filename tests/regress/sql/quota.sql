-- quotas: each kind refuses what would pass it, with the right errno, and usage stays exact
\set VERBOSITY terse
\ir tests/regress/fresh_volume.sql
-- slice ids, reserved as a mount reserves them
SELECT jfs.alloc_ids('slice', 1000000) AS first_slice \gset
SELECT * FROM jfs.usage;
-- /a (quota 3 inodes), /a/sub, /b (quota 64 KiB space)
SELECT inode AS a FROM jfs.mknod(1, 'a', 2, 493, 0, 0) \gset
SELECT inode AS sub FROM jfs.mknod(:a, 'sub', 2, 493, 0, 0) \gset
SELECT inode AS b FROM jfs.mknod(1, 'b', 2, 493, 0, 0) \gset
SELECT inode AS pre FROM jfs.mknod(:sub, 'pre', 1, 420, 1000, 1000) \gset
SELECT * FROM jfs.set_quota('/a', 0, 3);
SELECT * FROM jfs.set_quota('/b', 65536, 0);
-- the new quota counted what was there once; sub now charges /a
SELECT kind, path, max_space, used_space, max_inodes, used_inodes FROM jfs.quotas ORDER BY kind, path;
SELECT (SELECT qroot FROM jfs.node WHERE inode = :sub) = :a AS sub_under_a;

-- directory quota, inodes: the third entry fits, the fourth is refused
SELECT errno FROM jfs.mknod(:sub, 'x', 1, 420, 1000, 1000);
SELECT errno FROM jfs.mknod(:a, 'y', 1, 420, 1000, 1000);
SELECT errno FROM jfs.symlink(:a, 'z', 'y', 1000, 1000);
SELECT errno FROM jfs.link(:pre, :sub, 'pre2');
SELECT used_inodes FROM jfs.quotas WHERE path = '/a';
-- a hard link from outside counts under /a too (each entry); user quotas count the inode once
SELECT inode AS o FROM jfs.mknod(1, 'o', 1, 420, 1000, 1000) \gset
SELECT errno FROM jfs.link(:o, :a, 'olink');
SELECT errno FROM jfs.unlink(:sub, 'x');
SELECT errno FROM jfs.link(:o, :a, 'olink');
SELECT used_inodes FROM jfs.quotas WHERE path = '/a';

-- directory quota, space: writes that grow a file past it fail (EDQUOT) and change nothing
SELECT inode AS f FROM jfs.mknod(:b, 'f', 1, 420, 1000, 1000) \gset
SELECT errno, length FROM jfs.write_slice(:f, 0, 0, 1, 61440, 0, 61440);
SELECT errno, length FROM jfs.write_slice(:f, 0, 61440, 2, 8192, 0, 8192);
SELECT length FROM jfs.getattr(:f);
SELECT count(*) AS slices FROM jfs.slice WHERE inode = :f;
SELECT errno FROM jfs.setattr(:f, 8, p_length => 1000000);
SELECT errno, length FROM jfs.setattr(:f, 8, p_length => 4096);
SELECT used_space FROM jfs.quotas WHERE path = '/b';

-- rename across quota roots moves usage, and is refused when it does not fit
SELECT errno FROM jfs.rename(:b, 'f', :a, 'f');
SELECT errno FROM jfs.rename(:a, 'olink', :b, 'olink');
SELECT path, used_space, used_inodes FROM jfs.quotas WHERE kind = 'dir' ORDER BY path;
-- a directory moves with everything below it
SELECT errno FROM jfs.rename(:a, 'sub', :b, 'sub');
SELECT path, used_space, used_inodes FROM jfs.quotas WHERE kind = 'dir' ORDER BY path;
SELECT (SELECT qroot FROM jfs.node WHERE inode = :sub) = :b AS sub_under_b;
SELECT * FROM jfs.fsck();

-- user and group quotas: per inode, EDQUOT
SELECT * FROM jfs.set_user_quota(1000, 0, 7);
SELECT * FROM jfs.set_group_quota(2000, 8192, 0);
SELECT errno FROM jfs.mknod(1, 'u1', 1, 420, 1000, 1);
SELECT errno FROM jfs.mknod(1, 'u2', 1, 420, 1000, 1);
SELECT errno FROM jfs.mknod(1, 'g1', 1, 420, 1, 2000);
SELECT errno FROM jfs.mknod(1, 'g2', 1, 420, 1, 2000);
SELECT errno FROM jfs.mknod(1, 'g3', 1, 420, 1, 2000);
-- chown into a full quota is refused; out of it frees a place
SELECT errno FROM jfs.setattr(jfs.resolve('/u1'), 4, p_gid => 2000);
SELECT errno FROM jfs.setattr(jfs.resolve('/g1'), 4, p_gid => 1);
SELECT errno FROM jfs.mknod(1, 'g3', 1, 420, 1, 2000);
SELECT kind, uid, gid, max_space, used_space, max_inodes, used_inodes FROM jfs.quotas WHERE kind IN ('user', 'group') ORDER BY kind;

-- the volume: ENOSPC
SELECT * FROM jfs.set_volume_quota(0, 13);
SELECT used_inodes FROM jfs.usage;
SELECT errno FROM jfs.mknod(1, 'v1', 1, 420, 0, 0);
SELECT errno FROM jfs.mknod(1, 'v2', 1, 420, 0, 0);
SELECT * FROM jfs.set_volume_quota(0, 0);

-- clone charges the destination
SELECT * FROM jfs.set_quota('/b', 0, 5);
SELECT used_inodes FROM jfs.quotas WHERE path = '/b';
-- /b/sub holds sub/pre: a clone of it in /b adds 2 entries, one too many
SELECT errno FROM jfs.clone_node(:sub, :b, 'copy');
SELECT * FROM jfs.set_quota('/b', 0, 0);
SELECT errno, nodes FROM jfs.clone_node(:sub, :b, 'copy');
SELECT path, used_inodes FROM jfs.quotas WHERE kind = 'dir' ORDER BY path;
SELECT * FROM jfs.du('/b');
SELECT * FROM jfs.fsck();

-- check_quota finds and repairs a corrupted counter
UPDATE jfs.quota_usage SET inodes = inodes + 42 WHERE kind = 'dir' AND stripe = 3
   AND key = (SELECT inode FROM jfs.ls('/') WHERE name = 'a');
SELECT kind, path, counted_inodes, recorded_inodes, ok, repaired FROM jfs.check_quota() WHERE NOT ok;
SELECT kind, path, ok, repaired FROM jfs.check_quota('dir', NULL, true) WHERE NOT ok;
SELECT count(*) AS still_wrong FROM jfs.check_quota() WHERE NOT ok;

-- removing a quota: its directories take the nearest quota above
SELECT jfs.delete_quota('/b');
SELECT count(*) AS dirs_pointing_at_b FROM jfs.node WHERE qroot = :b;
SELECT jfs.delete_user_quota(1000), jfs.delete_group_quota(2000), jfs.delete_user_quota(4242);
SELECT kind, path FROM jfs.quotas ORDER BY kind, path;
SELECT * FROM jfs.set_quota('/nope', 1, 1);
SELECT * FROM jfs.set_quota('/o', 1, 1);
SELECT * FROM jfs.set_user_quota(1, -1, 0);
-- removing trees removes their quotas and keeps the rest exact
SELECT jfs.rmr('/a') > 0 AS removed;
SELECT kind, path FROM jfs.quotas ORDER BY kind, path;
SELECT * FROM jfs.fsck();

-- statfs of a mounted subdirectory: its nearest directory quota with a limit
SELECT inode AS s FROM jfs.mknod(1, 'sd', 2, 493, 0, 0) \gset
SELECT inode AS sdeep FROM jfs.mknod(:s, 'deep', 2, 493, 0, 0) \gset
SELECT errno FROM jfs.mknod(:sdeep, 'f', 1, 420, 0, 0);
SELECT * FROM jfs.set_quota('/sd', 1048576, 10);
SELECT errno, total_space, avail_space, used_inodes, avail_inodes FROM jfs.statfs(:sdeep);
-- a space limit only: inodes are the volume's
SELECT * FROM jfs.set_quota('/sd', 1048576, 0);
SELECT total_space, avail_space, used_inodes = (SELECT used_inodes FROM jfs.statfs()) AS volume_inodes
  FROM jfs.statfs(:sdeep);
-- no quota above: the volume's figures; not a directory: ENOENT
SELECT (SELECT row(s.*)::text FROM jfs.statfs(:b) s) = (SELECT row(v.*)::text FROM jfs.statfs() v) AS same_as_volume;
SELECT errno FROM jfs.statfs((SELECT inode FROM jfs.ls('/sd/deep') WHERE name = 'f'));
SELECT errno FROM jfs.statfs(-5);

-- nested directory quotas: an entry counts under every root above it, and
-- each root's chain (what its entries are charged to) follows quota and
-- rename changes
SELECT inode AS n1 FROM jfs.mknod(1, 'n1', 2, 493, 0, 0) \gset
SELECT inode AS n2 FROM jfs.mknod(:n1, 'n2', 2, 493, 0, 0) \gset
SELECT inode AS n3 FROM jfs.mknod(:n2, 'n3', 2, 493, 0, 0) \gset
SELECT 1 FROM jfs.set_quota('/n1/n2/n3', 0, 100);
SELECT 1 FROM jfs.set_quota('/n1', 0, 100);
SELECT errno FROM jfs.mknod(:n3, 'f', 1, 420, 0, 0);
SELECT key = :n3 AS n3, chain = ARRAY[:n3, :n1]::bigint[] AS chain FROM jfs.quota WHERE kind = 'dir' AND key = :n3;
SELECT path, used_inodes FROM jfs.quotas WHERE path LIKE '/n1%' ORDER BY path;
-- /n1/n2 (holding n3) moves to /sd: n3's chain is n3 then /sd
SELECT errno FROM jfs.rename(:n1, 'n2', :s, 'n2');
SELECT chain = ARRAY[:n3, :s]::bigint[] AS chain_after_rename FROM jfs.quota WHERE kind = 'dir' AND key = :n3;
SELECT path, used_inodes FROM jfs.quotas WHERE path LIKE '/n1%' OR path LIKE '/sd%' ORDER BY path;
-- without /sd's quota, n3 stands alone
SELECT jfs.delete_quota('/sd');
SELECT chain = ARRAY[:n3]::bigint[] AS chain_alone FROM jfs.quota WHERE kind = 'dir' AND key = :n3;
-- a quota above it again: n2 gets one, n3's chain grows; a file below counts under both
SELECT 1 FROM jfs.set_quota('/sd/n2', 0, 100);
SELECT chain = ARRAY[:n3, :n2]::bigint[] AS chain_grown FROM jfs.quota WHERE kind = 'dir' AND key = :n3;
SELECT errno FROM jfs.mknod(:n3, 'g', 1, 420, 0, 0);
SELECT path, used_inodes FROM jfs.quotas WHERE path LIKE '/sd%' ORDER BY path;
SELECT * FROM jfs.fsck();
SELECT count(*) AS drifted FROM jfs.check_quota() WHERE NOT ok;
-- space_limit: how long a file may grow (what a writer checks at write()); the tightest limit binds
SELECT jfs.space_limited() AS limited_before;
SELECT inode AS w FROM jfs.mknod(1, 'w', 2, 493, 0, 0) \gset
SELECT inode AS wf FROM jfs.mknod(:w, 'f', 1, 420, 0, 0) \gset
SELECT errno, max_length, over_errno FROM jfs.space_limit(:wf) AS no_space_limit;
SELECT 1 FROM jfs.set_quota('/w', 1048576, 0);
SELECT jfs.space_limited() AS limited;
-- /w holds the empty file (4 KiB): the file may grow to the whole MiB
SELECT errno, max_length, over_errno FROM jfs.space_limit(:wf);
SELECT jfs.alloc_ids('slice', 1) AS ws \gset
SELECT errno, length FROM jfs.write_slice(:wf, 0, 0, :ws, 100000, 0, 100000);
SELECT errno, max_length FROM jfs.space_limit(:wf) AS after_a_write;
-- a second name under /w counts the file twice: half the room each
SELECT errno FROM jfs.link(:wf, :w, 'f2');
SELECT errno, max_length FROM jfs.space_limit(:wf) AS linked_twice;
-- the volume's capacity, tighter still, answers ENOSPC
SELECT 1 FROM jfs.set_volume_quota((SELECT sum(space) FROM jfs.quota_usage WHERE kind = 'fs')::bigint + 8192);
SELECT errno, max_length, over_errno FROM jfs.space_limit(:wf) AS volume_binds;
SELECT (jfs.space_limit(999)).errno AS missing, (jfs.space_limit(:w)).errno AS dir;
SELECT jfs.delete_quota('/w');
SELECT 1 FROM jfs.set_volume_quota(0);
SELECT * FROM jfs.fsck();
