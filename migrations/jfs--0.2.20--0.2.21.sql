-- jfs 0.2.20 -> 0.2.21.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.21 makes from sql/:
-- tests/upgrade/check.sh compares the two. Roles are granted the new
-- procedure (mknod_with_slices) by running jfs.grant_client again; those
-- that could call take_lease, made again here, still can.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- A file created under a directory's lease is made with its data's commit,
-- in one round trip (sql/lease.sql).

-- write_slices for a regular file the caller's session made as inode
-- p_inode under its lease of directory p_parent and has not committed yet:
-- the file is first made as mknod makes it (p_name, mode p_node_mode less
-- p_umask, owner p_node_uid:p_node_gid), in the same transaction and round
-- trip (a copy's or an unpack's file: its creation goes with its data's
-- commit at close). A name that names p_inode already (the same call sent
-- again after its answer was lost) is taken as made. create_errno is
-- mknod's (0: made); when it is not 0 nothing is committed and `a` holds
-- it too.
CREATE FUNCTION mknod_with_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint,
    p_set integer, p_mode integer, p_uid bigint, p_gid bigint, p_atime bigint, p_set_mtime bigint,
    p_base_mode integer, p_parent bigint, p_name bytea, p_node_mode integer, p_umask integer,
    p_node_uid bigint, p_node_gid bigint)
RETURNS TABLE (create_errno integer, committed integer, a attr, attr_errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_made attr;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = p_inode) THEN
        v_made := mknod(p_parent, p_name, 1, p_node_mode, p_node_uid, p_node_gid, 0, NULL, p_inode, p_umask);
        IF v_made.errno <> 0 THEN
            RETURN QUERY SELECT v_made.errno, 0, v_made, NULL::integer;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT 0, w.committed, w.a, w.attr_errno
      FROM write_slices(p_inode, p_chunks, p_pos, p_ids, p_sizes, p_offs, p_lens, p_mtime, p_set, p_mode,
                        p_uid, p_gid, p_atime, p_set_mtime, p_base_mode) w;
END
$$;

-- ---------------------------------------------------------------------------
-- take_lease says whether the session may answer creates in the directory
-- (a lease taken for creates needs no commit of its own to learn it): a
-- new OUT parameter, so the function is made again.

-- (the roles that may call it keep the right: kept across the drop)
DO $upgrade$
BEGIN
    PERFORM pg_catalog.set_config('jfs.upgrade_take_lease_grantees', coalesce((
        SELECT pg_catalog.string_agg(a.grantee::text, ',')
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid = 'take_lease(bigint, bigint, integer)'::pg_catalog.regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0), ''), true);
END
$upgrade$;

DROP FUNCTION take_lease(bigint, bigint, integer);
-- Session p_sid takes directory p_dir's lease. Changes in flight in the
-- directory are waited for (their lock of it), then its entries are
-- returned: errno 0 and their names, inodes, types and link counts, in
-- name order. A lease the session holds already is taken again. Else no
-- lease, and errno 11 (EAGAIN) when another live session holds it (asked
-- for, as by want_lease), 27 (EFBIG) when the directory has more than
-- p_limit entries, 2 or 20 when it is missing or not a directory, 22 for a
-- session that is not registered, 95 (EOPNOTSUPP) while a session of an
-- older client, or of a role that may not call want_lease, is registered
-- (it would fail its calls in the directory instead of asking for the
-- lease). Taken again, a lease stays asked for if it was. creates (with
-- errno 0): whether the session may answer creates in p_dir itself, as
-- lease_commit says it (no quota limit, squash of the caller or default
-- ACL applies there).
CREATE FUNCTION take_lease(p_sid bigint, p_dir bigint, p_limit integer DEFAULT 10000,
                           OUT errno integer, OUT names bytea[], OUT inodes bigint[], OUT types smallint[],
                           OUT nlinks integer[], OUT creates boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_type smallint;
    v_holder bigint;
    v_limit integer := least(greatest(coalesce(p_limit, 10000), 1), 100000);
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF NOT EXISTS (SELECT 1 FROM session s WHERE s.sid = p_sid) THEN
        errno := 22;
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM session s
                   WHERE s.sid <> p_sid
                     AND (NOT _knows_leases(s.info ->> 'version')
                          OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = s.role
                                        AND NOT has_function_privilege(r.oid, 'jfs.want_lease(bigint)', 'EXECUTE'))))
    THEN
        errno := 95;
        RETURN;
    END IF;
    SELECT n.type INTO v_type FROM node n WHERE n.inode = p_dir FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2;
        RETURN;
    ELSIF v_type <> 2 THEN
        errno := 20;
        RETURN;
    END IF;
    SELECT d.sid INTO v_holder FROM dir_lease d WHERE d.dir = p_dir;
    IF FOUND AND v_holder <> p_sid AND NOT want_lease(p_dir) THEN
        errno := 11;
        RETURN;
    END IF;
    SELECT array_agg(x.name ORDER BY x.name), array_agg(x.inode ORDER BY x.name),
           array_agg(x.type ORDER BY x.name), array_agg(n.nlink ORDER BY x.name)
      INTO names, inodes, types, nlinks
      FROM (SELECT e.name, e.inode, e.type FROM edge e WHERE e.parent = p_dir
             ORDER BY e.parent, e.name LIMIT v_limit + 1) x
      JOIN node n ON n.inode = x.inode;
    IF cardinality(names) > v_limit THEN
        errno := 27;
        names := NULL; inodes := NULL; types := NULL; nlinks := NULL;
        RETURN;
    END IF;
    INSERT INTO dir_lease AS d (dir, sid) VALUES (p_dir, p_sid)
        ON CONFLICT (dir) DO UPDATE SET sid = p_sid, taken = now();
    SELECT NOT s.quota_limits
           AND CASE WHEN s.squash_roles THEN (_caller_squash()).kind = 'none' ELSE true END
           AND NOT (s.enable_acl AND EXISTS (SELECT 1 FROM acl a WHERE a.inode = p_dir AND a.kind = 'd'))
      INTO creates FROM setting s;
    errno := 0;
    names := coalesce(names, '{}');
    inodes := coalesce(inodes, '{}');
    types := coalesce(types, '{}');
    nlinks := coalesce(nlinks, '{}');
END
$$;

-- mknod_with_slices writes.
-- The procedures that change the file system (its names, attributes and
-- data, the trash, the change log, the queue of freed objects, backups,
-- other mounts' dead sessions): not granted to a read-only client role.
-- Such a role reads, keeps its own session, locks and files held open, and
-- calls sync.
CREATE OR REPLACE FUNCTION write_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['mknod', 'symlink', 'link', 'unlink', 'rmdir', 'rename', 'setattr', 'set_acl',
             'setxattr', 'removexattr', 'write_slice', 'write_slices', 'zero_range', 'copy_range',
             'batch_unlink', 'rmr', 'clone_node', 'clone', 'compact_chunk', 'restore', 'trash_purge',
             'changelog_prune', 'free_unlinked', 'forget_delslices', 'alloc_ids', 'backup_claim',
             'backup_release', 'session_cleanup', 'take_lease', 'lease_unlink', 'lease_commit',
             'mknod_with_slices']::name[];

-- Nothing in schema jfs is usable by PUBLIC (sql/security.sql).
REVOKE EXECUTE ON FUNCTION take_lease(bigint, bigint, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION mknod_with_slices(bigint, integer[], integer[], bigint[], integer[], integer[],
                                             integer[], bigint, integer, integer, bigint, bigint, bigint,
                                             bigint, integer, bigint, bytea, integer, integer, bigint,
                                             bigint) FROM PUBLIC;

-- take_lease, made again, to the roles that could call it before.
DO $upgrade$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY pg_catalog.string_to_array(pg_catalog.current_setting('jfs.upgrade_take_lease_grantees'), ',')
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION take_lease(bigint, bigint, integer) TO %s',
                                  r::oid::pg_catalog.regrole);
    END LOOP;
END
$upgrade$;

-- The initial privileges of jfs's objects are their owner's alone, as a
-- fresh install makes them: the grants just made inside ALTER EXTENSION
-- are not (pg_dump would leave them out of a dump). As 0.2.15 repairs
-- them; it changes nothing where nothing needs it.
UPDATE pg_catalog.pg_init_privs i
   SET initprivs = ARRAY(SELECT item FROM pg_catalog.unnest(i.initprivs) AS item
                          WHERE (SELECT a.grantee = a.grantor
                                   FROM pg_catalog.aclexplode(ARRAY[item]) AS a LIMIT 1))
 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = i.classoid AND d.objid = i.objoid)
   AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(i.initprivs) AS a WHERE a.grantee <> a.grantor);

-- PostgreSQL 17 and later also record each role named in an initial
-- privilege in pg_shdepend (deptype 'i'): those taken out above go too.
DELETE FROM pg_catalog.pg_shdepend s
 WHERE pg_catalog.current_setting('server_version_num')::integer >= 170000
   AND s.deptype = 'i'
   AND s.dbid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
   AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
                WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                  AND e.extname = 'jfs' AND d.classid = s.classid AND d.objid = s.objid)
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) AS a
                    WHERE i.classoid = s.classid AND i.objoid = s.objid AND i.objsubid = s.objsubid
                      AND a.grantee = s.refobjid);
