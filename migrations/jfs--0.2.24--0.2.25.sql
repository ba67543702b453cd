-- jfs 0.2.24 -> 0.2.25.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.25 makes from sql/:
-- tests/upgrade/check.sh compares the two. mknod and lease_commit keep
-- their signatures (CREATE OR REPLACE), and so their grants; they now
-- work out a new node's mode and owner with one internal function,
-- _made_node, and make the same nodes as before (nothing to grant).
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- The mode and owner of a node of type p_type asked for with mode p_mode
-- less p_umask, as p_uid:p_gid, in a directory of mode p_dir_mode and group
-- p_dir_gid: the directory's default ACL (p_acl_tags, p_acl_perms; NULL:
-- none) replaces the umask, the caller's squash (p_squash_kind 'none',
-- 'root' or 'all', to p_squash_uid:p_squash_gid) applies to the ids, and
-- a setgid directory gives its group (and, to a directory, the bit). The
-- one definition of what mknod and lease_commit make (a regress test runs
-- both over a matrix: tests/regress/sql/make_file.sql).
CREATE FUNCTION _made_node(p_type integer, p_mode integer, p_umask integer, p_uid bigint, p_gid bigint,
                           p_dir_mode integer, p_dir_gid bigint, p_acl_tags smallint[], p_acl_perms smallint[],
                           p_squash_kind text, p_squash_uid bigint, p_squash_gid bigint)
RETURNS TABLE (mode integer, uid bigint, gid bigint)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_acl_tags IS NULL THEN p_mode & 4095 & ~coalesce(p_umask, 0)
                ELSE _acl_create_mode(p_mode & 4095, p_acl_tags, p_acl_perms) END
           | CASE WHEN p_type = 2 AND p_dir_mode & 1024 <> 0 THEN 1024 ELSE 0 END,
           _squashed(p_uid, p_squash_kind, p_squash_uid),
           CASE WHEN p_dir_mode & 1024 <> 0 THEN p_dir_gid
                ELSE _squashed(p_gid, p_squash_kind, p_squash_gid) END
$$;


REVOKE EXECUTE ON FUNCTION _made_node(integer, integer, integer, bigint, bigint, integer, bigint, smallint[], smallint[], text, bigint, bigint) FROM PUBLIC;

-- Creates a node of any type in p_parent: 1 file, 2 directory, 3 symlink
-- (p_target), 4 fifo, 5 block and 6 char device (p_rdev), 7 socket.
-- p_inode is an id from a range the client reserved with alloc_ids (another
-- is EINVAL); NULL allocates one here. /.trash and /.jfs.control are EEXIST
-- (the trash's own inode makes /.trash, owned by root, 0700: EPERM else). A directory with the set-group-id bit passes its group
-- (and, to subdirectories, the bit) on. A squashed role's owner ids are
-- squashed (_caller_squash, looked up only when some role is squashed:
-- setting.squash_roles), but for the trash's own directories. A
-- symlink target holds no NUL byte (EINVAL).
CREATE OR REPLACE FUNCTION mknod(
    p_parent bigint, p_name bytea, p_type integer, p_mode integer, p_uid bigint, p_gid bigint,
    p_rdev bigint DEFAULT 0, p_target bytea DEFAULT NULL, p_inode bigint DEFAULT NULL,
    p_umask integer DEFAULT 0)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    par record;
    n node;
    v_acl_tags smallint[];
    v_acl_ids bigint[];
    v_acl_perms smallint[];
    v_squash record;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) THEN
        RETURN _err(17);
    ELSIF p_type IS NULL OR p_type NOT BETWEEN 1 AND 7 OR p_mode IS NULL OR p_uid IS NULL OR p_gid IS NULL
          OR NOT _mode_ok(p_mode, p_type) OR NOT _id_ok(p_uid) OR NOT _id_ok(p_gid) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND (p_target IS NULL OR length(p_target) = 0 OR position('\x00'::bytea IN p_target) > 0) THEN
        RETURN _err(22);
    ELSIF p_type = 3 AND length(p_target) > 4096 THEN
        RETURN _err(36);
    ELSIF p_inode = _trash_inode() THEN
        IF p_parent <> 1 OR p_name <> '\x2e7472617368'::bytea OR p_type <> 2 OR p_uid <> 0 OR p_gid <> 0
           OR p_mode & 4095 <> 448 THEN
            RETURN _err(1);
        END IF;
    ELSIF _reserved_name(p_parent, p_name) THEN
        RETURN _err(17);
    ELSIF p_inode IS NOT NULL AND (p_inode < 2 OR NOT _handed_out('inode', p_inode)
                                   OR EXISTS (SELECT 1 FROM node x WHERE x.inode = p_inode)) THEN
        RETURN _err(22);
    END IF;

    -- the parent must stay a directory until we commit: FOR KEY SHARE keeps
    -- rmdir out but lets other creates in (mkdir changes its nlink: NO KEY UPDATE)
    -- (with the settings and the chain of quota roots the entry is charged to)
    IF p_type = 2 THEN
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
               s.squash_roles, s.destroying
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR NO KEY UPDATE OF d;
    ELSE
        SELECT d.type, d.mode, d.gid, d.tier, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns,
               s.quota_limits, s.owner_quotas, s.quota_uids, s.quota_gids, q.chain, s.enable_acl,
               s.squash_roles, s.destroying
          INTO par FROM node d CROSS JOIN setting s LEFT JOIN quota q ON q.kind = 'dir' AND q.key = d.qroot
         WHERE d.inode = p_parent FOR KEY SHARE OF d;
    END IF;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF par.type <> 2 THEN
        RETURN _err(20);
    ELSIF par.destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    IF par.meta_durability = 'fsync' THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);  -- _durability, without its call
    END IF;

    -- a directory's default ACL, if any, replaces the umask (sql/acl.sql)
    IF par.enable_acl AND p_type <> 3 THEN
        SELECT array_agg(a.tag ORDER BY a.tag, a.qualifier), array_agg(a.qualifier ORDER BY a.tag, a.qualifier),
               array_agg(a.perm ORDER BY a.tag, a.qualifier)
          INTO v_acl_tags, v_acl_ids, v_acl_perms
          FROM acl a WHERE a.inode = p_parent AND a.kind = 'd';
    END IF;

    n.inode := coalesce(p_inode, _next_ids('inode', 1));
    n.type := p_type::smallint;
    IF par.squash_roles AND NOT (p_type = 2 AND p_mode & 4095 = 448 AND p_uid = 0 AND p_gid = 0
                                 AND (p_inode = _trash_inode() OR p_parent = _trash_inode())) THEN
        v_squash := _caller_squash();
    ELSE
        SELECT 'none'::text AS kind, NULL::bigint AS uid, NULL::bigint AS gid INTO v_squash;
    END IF;
    SELECT m.mode, m.uid, m.gid INTO n.mode, n.uid, n.gid
      FROM _made_node(p_type, p_mode, p_umask, p_uid, p_gid, par.mode, par.gid, v_acl_tags, v_acl_perms,
                      v_squash.kind, v_squash.uid, v_squash.gid) m;
    n.atime := v_now; n.mtime := v_now; n.ctime := v_now;
    n.nlink := CASE WHEN p_type = 2 THEN 2 ELSE 1 END;
    n.length := CASE WHEN p_type = 3 THEN length(p_target) ELSE 0 END;
    n.rdev := CASE WHEN p_type IN (5, 6) THEN coalesce(p_rdev, 0) ELSE 0 END;
    n.parent := CASE WHEN p_type = 2 THEN p_parent ELSE 0 END;
    n.tier := par.tier;
    n.qroot := CASE WHEN p_type = 2 THEN par.qroot ELSE 0 END;
    n.used := 0;

    -- the new node and its entry, within every limit
    v_errno := _charge(true, _owner_key(par.owner_quotas, par.quota_uids, n.uid),
                       _owner_key(par.owner_quotas, par.quota_gids, n.gid), par.chain, p_parent, 1, 4096,
                       par.quota_limits, n.length);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, n.inode, p_type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, par.qroot, 1, 4096, n.length);
        PERFORM _uncharge_nodes(ARRAY[n.uid], ARRAY[n.gid], ARRAY[4096::bigint]);
        RETURN _err(17);
    END IF;
    INSERT INTO node VALUES (n.*);
    IF p_type = 3 THEN
        INSERT INTO symlink (inode, target) VALUES (n.inode, p_target);
    ELSIF v_acl_tags IS NOT NULL THEN
        PERFORM _acl_inherit(n.inode, p_type = 2, v_acl_tags, v_acl_ids, v_acl_perms);
    END IF;
    IF p_type = 2 THEN
        UPDATE node SET nlink = nlink + 1, mtime = v_now, ctime = v_now WHERE inode = p_parent;
    ELSIF _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
    END IF;
    INSERT INTO change (op, inode, parent, name, uid, gid)
    VALUES ((ARRAY['create', 'mkdir', 'symlink', 'mknod', 'mknod', 'mknod', 'mknod'])[p_type],
            n.inode, p_parent, p_name, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

-- Commits what session p_sid answered itself in directory p_dir under its
-- lease, in one transaction: first the unlinks, as lease_unlink commits
-- them (unlink_errnos: one per name, 0 or 2); then the creates: regular
-- file p_names[i] as inode p_inodes[i] (handed out to a mount:
-- alloc_ids), made with mode p_modes[i] less umask p_umasks[i] by owner
-- p_uids[i]:p_gids[i] at p_times[i] (ns since the epoch; no later than
-- now). Each is made as mknod makes it: the directory's setgid bit gives
-- its group, its default ACL replaces the umask, the caller's squash
-- applies, and its quotas are charged within every limit (122 EDQUOT or
-- 28 ENOSPC past one). The holder answers creates only while `creates`
-- says no limit, squash or default ACL can apply here; one set meanwhile
-- applies to the creates it answers after its next commit (at most a batch
-- window, 50 ms, later), and refuses those it answered before that cross
-- it. Then the lease is kept or ends
-- as lease_unlink says. errnos: one per create, 0 (made, or found made by
-- an earlier send of the same batch), 17 (the name was taken: the lease
-- was lost meanwhile), 22 (an inode not handed out, or in use; a bad mode
-- or owner), 122 or 28 (a limit) or the name's own (36, 22); all 2 or 20
-- when the directory is
-- gone. kept: whether the session holds the lease now; creates: whether
-- it may go on answering creates in p_dir itself; dir_mtime, dir_ctime:
-- the directory's times after the commit (NULL when it is gone).
-- With p_hold (and p_keep) the lease is kept even when another session
-- asked for it, if it asked less than a second ago (wanted then says so):
-- the holder went on answering in the directory while this commit was in
-- flight, and its next call commits that and gives the lease up (jfs
-- 0.2.22; without p_hold, as clients before do, the lease ends here).
CREATE OR REPLACE FUNCTION lease_commit(p_sid bigint, p_dir bigint, p_unlink_names bytea[], p_unlink_inodes bigint[],
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
    v_errno integer;
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
        -- each entry checked and its node worked out as mknod does (_made_node)
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
               array_agg(m.mode ORDER BY u.i), array_agg(m.uid ORDER BY u.i), array_agg(m.gid ORDER BY u.i),
               array_agg(least(u.at, v_now) ORDER BY u.i)
          INTO errnos, v_modes, v_uids, v_gids, v_times
          FROM unnest(p_names, p_inodes, p_modes, p_umasks, p_uids, p_gids, p_times)
               WITH ORDINALITY u(name, inode, mode, umask, uid, gid, at, i)
         CROSS JOIN LATERAL _made_node(1, u.mode, u.umask, u.uid, u.gid, par.mode, par.gid, v_acl_tags,
                                       v_acl_perms, v_squash.kind, v_squash.uid, v_squash.gid) m;
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
        IF par.quota_limits THEN
            -- each charged within every limit, as mknod charges it: a
            -- holder answers creates only while no limit applies, so this
            -- refuses only the creates of a caller that did not ask, or
            -- ones answered just before a limit was set (0.2.23)
            FOR i IN 1 .. v_count LOOP
                CONTINUE WHEN errnos[i] <> 0;
                v_errno := _charge(true, _owner_key(par.owner_quotas, par.quota_uids, v_uids[i]),
                                   _owner_key(par.owner_quotas, par.quota_gids, v_gids[i]), par.chain, p_dir,
                                   1, 4096, true);
                IF v_errno <> 0 THEN
                    DELETE FROM edge e WHERE e.parent = p_dir AND e.name = p_names[i] AND e.inode = p_inodes[i];
                    errnos[i] := v_errno;
                    v_made := array_remove(v_made, p_inodes[i]);
                END IF;
            END LOOP;
        END IF;
        INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, rdev, parent, tier,
                          qroot, used)
        SELECT u.inode, 1, u.mode, u.uid, u.gid, u.at, u.at, u.at, 1, 0, 0, 0, par.tier, 0, 0
          FROM unnest(p_inodes, errnos, v_modes, v_uids, v_gids, v_times) u(inode, errno, mode, uid, gid, at)
         WHERE u.errno = 0;
        -- else charged per owner, a node and an entry each, as mknod charges
        PERFORM _charge(true, _owner_key(par.owner_quotas, par.quota_uids, o.uid),
                        _owner_key(par.owner_quotas, par.quota_gids, o.gid), par.chain, p_dir,
                        o.n, 4096 * o.n, false)
           FROM (SELECT u.uid, u.gid, count(*) AS n FROM unnest(errnos, v_uids, v_gids) u(errno, uid, gid)
                  WHERE u.errno = 0 GROUP BY u.uid, u.gid) o
          WHERE NOT par.quota_limits;
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
         WHERE d.dir = p_dir AND d.sid = p_sid AND _lease_renewable(d.granted, d.wanted, p_hold)
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

