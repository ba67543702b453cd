-- POSIX ACLs: tags 1 user_obj, 2 user, 4 group_obj, 8 group, 16 mask, 32 other
\ir tests/regress/fresh_volume.sql
CREATE FUNCTION pg_temp.oct(m integer) RETURNS text LANGUAGE sql
RETURN ((m >> 9) & 7)::text || ((m >> 6) & 7) || ((m >> 3) & 7) || (m & 7);
SELECT inode AS f FROM jfs.mknod(1, 'f', 1, 420, 0, 0) \gset
SELECT inode AS d FROM jfs.mknod(1, 'd', 2, 488, 0, 0) \gset
-- off until enabled: EOPNOTSUPP
SELECT errno FROM jfs.get_acl(:f, 'a');
SELECT jfs.set_acl(:f, 'a', '{1,4,32}', '{-1,-1,-1}', '{7,5,1}');
SELECT jfs.enable_acl(), jfs.enable_acl();
SELECT enable_acl FROM jfs.volume();
-- a minimal ACL is the mode: it sets the bits (the special ones kept), leaves no rows
SELECT pg_temp.oct((jfs.setattr(:f, 1, 1508)).mode) AS setgid_744;
SELECT jfs.set_acl(:f, 'a', '{1,4,32}', '{-1,-1,-1}', '{7,5,1}');
SELECT pg_temp.oct(mode) FROM jfs.node WHERE inode = :f;
SELECT errno FROM jfs.get_acl(:f, 'a');
SELECT count(*) FROM jfs.acl;
-- a named user: rows for the owning group and the user, the mask is the group bits
SELECT jfs.set_acl(:f, 'a', '{1,2,4,16,32}', '{-1,1000,-1,-1,-1}', '{6,4,0,4,0}');
SELECT pg_temp.oct(mode) FROM jfs.node WHERE inode = :f;
SELECT * FROM jfs.get_acl(:f, 'a');
SELECT path, kind, tag, id, perm FROM jfs.acls ORDER BY tag, id;
SELECT errno, (SELECT array_agg(convert_from(x, 'UTF8')) FROM unnest(names) x) AS names FROM jfs.listxattr(:f);
-- chmod changes the mask, not the rows
SELECT pg_temp.oct((jfs.setattr(:f, 1, 384)).mode) AS chmod_600;
SELECT * FROM jfs.get_acl(:f, 'a');
-- malformed: no mask with a named entry, two owners, a bad id, bad perms
SELECT jfs.set_acl(:f, 'a', '{1,2,4,32}', '{-1,7,-1,-1}', '{6,4,0,0}');
SELECT jfs.set_acl(:f, 'a', '{1,1,4,32}', '{-1,-1,-1,-1}', '{6,4,0,0}');
SELECT jfs.set_acl(:f, 'a', '{1,2,4,16,32}', '{-1,4294967295,-1,-1,-1}', '{6,4,0,4,0}');
SELECT jfs.set_acl(:f, 'a', '{1,4,32}', '{-1,-1,-1}', '{8,0,0}');
SELECT jfs.set_acl(:f, 'x', '{1,4,32}', '{-1,-1,-1}', '{6,0,0}');
SELECT count(*) FROM jfs.acl WHERE inode = :f;
-- a default ACL only on a directory
SELECT jfs.set_acl(:f, 'd', '{1,4,32}', '{-1,-1,-1}', '{7,5,0}');
SELECT jfs.set_acl(:d, 'd', '{1,2,4,16,32}', '{-1,1000,-1,-1,-1}', '{7,7,5,7,0}');
-- new entries inherit it and ignore the umask: file 0666, dir 0777, umask 077
SELECT pg_temp.oct((a).mode) AS file_mode FROM (SELECT jfs.mknod(:d, 'new', 1, 438, 0, 0, p_umask => 63) AS a) x;
SELECT pg_temp.oct((a).mode) AS dir_mode FROM (SELECT jfs.mknod(:d, 'sub', 2, 511, 0, 0, p_umask => 63) AS a) x;
SELECT inode AS new FROM jfs.lookup(:d, 'new') \gset
SELECT inode AS sub FROM jfs.lookup(:d, 'sub') \gset
SELECT * FROM jfs.get_acl(:new, 'a');
SELECT errno FROM jfs.get_acl(:new, 'd');
SELECT * FROM jfs.get_acl(:sub, 'a');
SELECT * FROM jfs.get_acl(:sub, 'd');
-- without a default ACL the umask applies
SELECT pg_temp.oct((a).mode) AS umasked FROM (SELECT jfs.mknod(1, 'plain', 1, 438, 0, 0, p_umask => 18) AS a) x;
SELECT errno FROM jfs.get_acl((jfs.lookup(1, 'plain')).inode, 'a');
-- a default ACL removed: nothing inherited any more
SELECT jfs.set_acl(:d, 'd', NULL, NULL, NULL);
SELECT errno FROM jfs.get_acl(:d, 'd');
SELECT pg_temp.oct((a).mode) AS after_removal FROM (SELECT jfs.mknod(:d, 'late', 1, 438, 0, 0, p_umask => 63) AS a) x;
-- removing the nodes removes their rows
SELECT jfs.set_acl(:d, 'd', '{1,4,16,32,8}', '{-1,-1,-1,-1,50}', '{7,5,7,0,7}');
SELECT count(*) AS rows_before FROM jfs.acl;
SELECT (jfs.unlink(:d, 'new', 0)).errno, (jfs.unlink(:d, 'late', 0)).errno, (jfs.rmdir(:d, 'sub')).errno,
       (jfs.unlink(1, 'f', 0)).errno;
SELECT count(*) AS rows_left, array_agg(DISTINCT inode = :d) AS only_d FROM jfs.acl;
SELECT * FROM jfs.fsck();
