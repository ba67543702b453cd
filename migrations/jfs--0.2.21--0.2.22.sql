-- jfs 0.2.21 -> 0.2.22.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.22 makes from sql/:
-- tests/upgrade/check.sh compares the two. take_lease keeps its signature
-- (CREATE OR REPLACE); lease_commit, made again with a new parameter, is
-- granted again to the roles that could call it: both stay callable by
-- the roles that could call them.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- A lease taken commits durably in either durability mode (sql/lease.sql):
-- in 'fsync' mode a PostgreSQL crash could take back a lease its holder
-- was already answering creates and unlinks under.

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
-- ACL applies there). A lease taken commits durably in either durability
-- mode (0.2.22).
CREATE OR REPLACE FUNCTION take_lease(p_sid bigint, p_dir bigint, p_limit integer DEFAULT 10000,
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
    -- durable at once, whatever the volume's durability mode: a crash that
    -- took the lease back would leave this session answering for a
    -- directory other sessions then change (the flush also covers the
    -- changes of the directory before it, and a former holder's release)
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
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

-- ---------------------------------------------------------------------------
-- A holder goes on answering creates while its batch's commit is in
-- flight: lease_commit's p_hold keeps a lease asked for meanwhile for the
-- holder's next call, and its new OUT parameter wanted says so. The
-- function is made again.

-- (the roles that may call it keep the right: kept across the drop)
DO $upgrade$
BEGIN
    PERFORM pg_catalog.set_config('jfs.upgrade_lease_commit_grantees', coalesce((
        SELECT pg_catalog.string_agg(a.grantee::text, ',')
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid = 'lease_commit(bigint, bigint, bytea[], bigint[], bigint[], bytea[], bigint[], integer[], integer[], bigint[], bigint[], bigint[], boolean)'::pg_catalog.regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0), ''), true);
END
$upgrade$;

DROP FUNCTION lease_commit(bigint, bigint, bytea[], bigint[], bigint[], bytea[], bigint[], integer[], integer[], bigint[], bigint[], bigint[], boolean);
-- Commits what session p_sid answered itself in directory p_dir under its
-- lease, in one transaction: first the unlinks, as lease_unlink commits
-- them (unlink_errnos: one per name, 0 or 2); then the creates: regular
-- file p_names[i] as inode p_inodes[i] (handed out to a mount:
-- alloc_ids), made with mode p_modes[i] less umask p_umasks[i] by owner
-- p_uids[i]:p_gids[i] at p_times[i] (ns since the epoch; no later than
-- now). Each is made as mknod makes it: the directory's setgid bit gives
-- its group, its default ACL replaces the umask, the caller's squash
-- applies, and its quotas are charged, but without a limit's check: an
-- answered create is not taken back. So the holder answers creates only
-- while `creates` says no limit, squash or default ACL can apply here; one
-- set meanwhile applies to the creates it answers after its next commit
-- (at most a batch window, 50 ms, later). Then the lease is kept or ends
-- as lease_unlink says. errnos: one per create, 0 (made, or found made by
-- an earlier send of the same batch), 17 (the name was taken: the lease
-- was lost meanwhile), 22 (an inode not handed out, or in use; a bad mode
-- or owner) or the name's own (36, 22); all 2 or 20 when the directory is
-- gone. kept: whether the session holds the lease now; creates: whether
-- it may go on answering creates in p_dir itself; dir_mtime, dir_ctime:
-- the directory's times after the commit (NULL when it is gone).
-- With p_hold (and p_keep) the lease is kept even when another session
-- asked for it, if it asked less than a second ago (wanted then says so):
-- the holder went on answering in the directory while this commit was in
-- flight, and its next call commits that and gives the lease up (jfs
-- 0.2.22; without p_hold, as clients before do, the lease ends here).
CREATE FUNCTION lease_commit(p_sid bigint, p_dir bigint, p_unlink_names bytea[], p_unlink_inodes bigint[],
                             p_open_inodes bigint[], p_names bytea[], p_inodes bigint[], p_modes integer[],
                             p_umasks integer[], p_uids bigint[], p_gids bigint[], p_times bigint[],
                             p_keep boolean, p_hold boolean DEFAULT false,
                             OUT unlink_errnos integer[], OUT errnos integer[], OUT kept boolean,
                             OUT creates boolean, OUT dir_mtime bigint, OUT dir_ctime bigint,
                             OUT wanted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_count integer := coalesce(cardinality(p_names), 0);
    par record;
    v_squash record;
    v_acl_tags smallint[];
    v_acl_ids bigint[];
    v_acl_perms smallint[];
    v_modes integer[];
    v_uids bigint[];
    v_gids bigint[];
    v_times bigint[];
    v_made bigint[];
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF v_count <> ANY (ARRAY[coalesce(cardinality(p_inodes), 0), coalesce(cardinality(p_modes), 0),
                             coalesce(cardinality(p_umasks), 0), coalesce(cardinality(p_uids), 0),
                             coalesce(cardinality(p_gids), 0), coalesce(cardinality(p_times), 0)]) THEN
        RAISE EXCEPTION 'jfs.lease_commit: % names and % inodes, % modes, % umasks, % uids, % gids, % times',
            v_count, cardinality(p_inodes), cardinality(p_modes), cardinality(p_umasks),
            cardinality(p_uids), cardinality(p_gids), cardinality(p_times)
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF cardinality(p_unlink_names) IS DISTINCT FROM cardinality(p_unlink_inodes) THEN
        RAISE EXCEPTION 'jfs.lease_commit: % names and % inodes to unlink',
            cardinality(p_unlink_names), cardinality(p_unlink_inodes)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_unlink_names) > 0 THEN
        SELECT array_agg(CASE WHEN x.errno = 0 THEN 0 ELSE 2 END ORDER BY u.i) INTO unlink_errnos
          FROM unnest(p_unlink_names) WITH ORDINALITY u(n, i)
          JOIN _unlink_names(p_dir, p_unlink_names, p_unlink_inodes, p_sid, coalesce(p_open_inodes, '{}'))
               WITH ORDINALITY x(name, errno, inode, i) ON x.i = u.i;
    END IF;
    unlink_errnos := coalesce(unlink_errnos, '{}');
    -- the directory stays one until we commit (as mknod locks it)
    SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.skip_dir_mtime_ns,
           s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
           s.squash_roles
      INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
     WHERE d.inode = p_dir FOR KEY SHARE OF d;
    IF NOT FOUND OR par.type <> 2 THEN
        errnos := array_fill(CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, ARRAY[v_count]);
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
        kept := false;
        creates := false;
        wanted := false;
        RETURN;
    END IF;
    IF par.enable_acl THEN
        SELECT array_agg(a.tag ORDER BY a.tag, a.qualifier), array_agg(a.qualifier ORDER BY a.tag, a.qualifier),
               array_agg(a.perm ORDER BY a.tag, a.qualifier)
          INTO v_acl_tags, v_acl_ids, v_acl_perms
          FROM acl a WHERE a.inode = p_dir AND a.kind = 'd';
    END IF;
    IF par.squash_roles THEN
        v_squash := _caller_squash();
    ELSE
        SELECT 'none'::text AS kind, NULL::bigint AS uid, NULL::bigint AS gid INTO v_squash;
    END IF;

    IF v_count > 0 THEN
        -- each entry checked and its node worked out as mknod does
        -- (-1: made by an earlier send of this batch, whose answer was lost)
        SELECT array_agg(CASE WHEN EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_dir AND e.name = u.name
                                                                 AND e.inode = u.inode) THEN -1
                              WHEN _check_name(u.name) <> 0 THEN _check_name(u.name)
                              WHEN _is_dot(u.name) OR _reserved_name(p_dir, u.name) THEN 17
                              WHEN u.mode IS NULL OR u.uid IS NULL OR u.gid IS NULL OR u.at IS NULL
                                   OR NOT _mode_ok(u.mode, 1) OR NOT _id_ok(u.uid) OR NOT _id_ok(u.gid)
                                   OR u.inode IS NULL OR u.inode < 2 OR NOT _handed_out('inode', u.inode)
                                   OR EXISTS (SELECT 1 FROM node x WHERE x.inode = u.inode)
                                   OR u.inode = ANY (p_inodes[:u.i::integer - 1]) THEN 22
                              ELSE 0 END ORDER BY u.i),
               array_agg(CASE WHEN v_acl_tags IS NULL THEN u.mode & 4095 & ~coalesce(u.umask, 0)
                              ELSE _acl_create_mode(u.mode & 4095, v_acl_tags, v_acl_perms) END ORDER BY u.i),
               array_agg(_squashed(u.uid, v_squash.kind, v_squash.uid) ORDER BY u.i),
               array_agg(CASE WHEN par.mode & 1024 <> 0 THEN par.gid
                              ELSE _squashed(u.gid, v_squash.kind, v_squash.gid) END ORDER BY u.i),
               array_agg(least(u.at, v_now) ORDER BY u.i)
          INTO errnos, v_modes, v_uids, v_gids, v_times
          FROM unnest(p_names, p_inodes, p_modes, p_umasks, p_uids, p_gids, p_times)
               WITH ORDINALITY u(name, inode, mode, umask, uid, gid, at, i);
        -- the names still free (a name twice: its first)
        WITH made AS (
            INSERT INTO edge (parent, name, inode, type)
            SELECT p_dir, u.name, u.inode, 1
              FROM unnest(p_names, p_inodes, errnos) WITH ORDINALITY u(name, inode, errno, i)
             WHERE u.errno = 0 ORDER BY u.i
                ON CONFLICT (parent, name) DO NOTHING
            RETURNING inode)
        SELECT coalesce(array_agg(inode), '{}') INTO v_made FROM made;
        SELECT array_agg(CASE WHEN u.errno = 0 AND u.inode <> ALL (v_made) THEN 17 ELSE u.errno END ORDER BY u.i)
          INTO errnos FROM unnest(p_inodes, errnos) WITH ORDINALITY u(inode, errno, i);
        INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, rdev, parent, tier,
                          qroot, used)
        SELECT u.inode, 1, u.mode, u.uid, u.gid, u.at, u.at, u.at, 1, 0, 0, 0, par.tier, 0, 0
          FROM unnest(p_inodes, errnos, v_modes, v_uids, v_gids, v_times) u(inode, errno, mode, uid, gid, at)
         WHERE u.errno = 0;
        -- charged per owner, a node and an entry each, as mknod charges
        PERFORM _charge(true, _owner_key(par.owner_quotas, par.quota_uids, o.uid),
                        _owner_key(par.owner_quotas, par.quota_gids, o.gid), par.chain, p_dir,
                        o.n, 4096 * o.n, false)
           FROM (SELECT u.uid, u.gid, count(*) AS n FROM unnest(errnos, v_uids, v_gids) u(errno, uid, gid)
                  WHERE u.errno = 0 GROUP BY u.uid, u.gid) o;
        IF v_acl_tags IS NOT NULL THEN
            PERFORM _acl_inherit(m, false, v_acl_tags, v_acl_ids, v_acl_perms) FROM unnest(v_made) m;
        END IF;
        INSERT INTO change (op, inode, parent, name, uid, gid)
        SELECT 'create', u.inode, p_dir, u.name, u.uid, u.gid
          FROM unnest(p_names, p_inodes, errnos, v_uids, v_gids) WITH ORDINALITY u(name, inode, errno, uid, gid, i)
         WHERE u.errno = 0 ORDER BY u.i;
        IF cardinality(v_made) > 0 AND _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
            UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_dir;
        END IF;
        errnos := array_replace(errnos, -1, 0);
    END IF;
    errnos := coalesce(errnos, '{}');
    IF p_keep THEN
        UPDATE dir_lease d SET taken = now()
         WHERE d.dir = p_dir AND d.sid = p_sid
           AND (d.wanted IS NULL OR (p_hold AND d.wanted >= now() - interval '1 second'))
        RETURNING d.wanted IS NOT NULL INTO wanted;
        kept := FOUND;
    ELSE
        kept := false;
    END IF;
    wanted := coalesce(wanted, false);
    IF NOT kept THEN
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
    END IF;
    creates := kept AND NOT par.quota_limits AND v_squash.kind = 'none' AND v_acl_tags IS NULL;
    SELECT n.mtime, n.ctime INTO dir_mtime, dir_ctime FROM node n WHERE n.inode = p_dir;
END
$$;

-- Nothing in schema jfs is usable by PUBLIC (sql/security.sql).
REVOKE EXECUTE ON FUNCTION lease_commit(bigint, bigint, bytea[], bigint[], bigint[], bytea[], bigint[], integer[], integer[], bigint[], bigint[], bigint[], boolean, boolean) FROM PUBLIC;

-- lease_commit, made again, to the roles that could call it before.
DO $upgrade$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY pg_catalog.string_to_array(pg_catalog.current_setting('jfs.upgrade_lease_commit_grantees'), ',')
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION lease_commit(bigint, bigint, bytea[], bigint[], bigint[], bytea[], bigint[], integer[], integer[], bigint[], bigint[], bigint[], boolean, boolean) TO %s',
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
