-- jfs 0.2.22 -> 0.2.23.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.23 makes from sql/:
-- tests/upgrade/check.sh compares the two. Every procedure changed keeps
-- its signature (CREATE OR REPLACE), and so its grants. Read-only roles
-- lose want_lease's grant when jfs.grant_client runs again; until then
-- want_lease itself refuses them.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- A lease is renewed for at most a minute from its taking (sql/schema.sql).
ALTER TABLE dir_lease ADD COLUMN granted timestamptz NOT NULL DEFAULT now();

-- ---------------------------------------------------------------------------
-- Read-only roles read past leases and ask for none (sql/internal.sql,
-- sql/security.sql).


-- Whether the caller's login role is read-only (jfs.grant_client).
CREATE FUNCTION _caller_read_only() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT bool_or(r.read_only) FROM _caller_limits() r), false)
$$;


-- Refuses when a session other than the caller's holds the lease of any
-- of directories p_dirs (the caller's session is worked out only then).
-- A read-only role reads past leases, as administration does: it sees
-- what the holder committed (at most a batch window, 50 ms, behind), and
-- so never makes a holder give a lease up (0.2.23).
-- (Almost every call finds no lease: one probe answers it. A loop over the
-- leases found, with the caller's session in it, made every create 0.02
-- ms slower.)
CREATE OR REPLACE FUNCTION _unleased(p_dirs bigint[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
    v_me bigint;
BEGIN
    SELECT d.dir, d.sid INTO l FROM dir_lease d WHERE d.dir = ANY (p_dirs) LIMIT 1;
    IF NOT FOUND OR _caller_read_only() THEN
        RETURN;
    END IF;
    v_me := _change_session();
    FOR l IN SELECT d.dir, d.sid FROM dir_lease d WHERE d.dir = ANY (p_dirs) AND d.sid IS DISTINCT FROM v_me LOOP
        PERFORM _leased(l.dir, l.sid);
    END LOOP;
END
$$;


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
             'mknod_with_slices', 'want_lease']::name[];


-- The limits the caller's login role is under (jfs.grant_client; those of
-- the roles it is a member of count too, a superuser has none), for a
-- mount to apply locally.
CREATE OR REPLACE FUNCTION client_limits(OUT read_only boolean, OUT squash text, OUT squash_uid bigint, OUT squash_gid bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT _caller_read_only(), q.kind, q.uid, q.gid FROM _caller_squash() q
$$;


-- ---------------------------------------------------------------------------
-- A holder gives a lease up a second after it is asked for, whatever it
-- calls, and loses it 5 seconds after; what a session claims of its
-- version changes nothing for the others; lease_commit makes no file past
-- a quota (sql/lease.sql).


-- Whether a lease taken (first) at p_granted and asked for since p_wanted
-- (NULL: by nobody) may be kept by its holder's commit: for a minute from
-- its taking, and, once asked for, only by a commit that holds it
-- (p_hold: one the holder sent while it went on answering) within a
-- second of the asking.
CREATE FUNCTION _lease_renewable(p_granted timestamptz, p_wanted timestamptz, p_hold boolean)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_granted >= now() - interval '1 minute'
           AND (p_wanted IS NULL OR (p_hold AND p_wanted >= now() - interval '1 second'))
$$;


-- Asks for directory p_dir's lease, after a call was refused with SQLSTATE
-- JL000: its holder gives it up at its next commit. True when the
-- directory is free now: no lease, or one that ends here because its
-- holder's session is gone or silent past its timeout, because the holder
-- has not committed for 5 seconds (a live holder commits, and so renews
-- it, every 50 ms, and gives it up after a window without unlinks), or
-- because it was asked for more than 5 seconds ago and the holder kept it
-- (by any call). Read-only roles read past leases and may not ask.
CREATE OR REPLACE FUNCTION want_lease(p_dir bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    l record;
BEGIN
    IF _caller_read_only() THEN
        RAISE EXCEPTION 'jfs.want_lease: a read-only role reads past leases and asks for none'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT d.sid, d.taken, d.wanted,
           d.taken >= now() - interval '5 seconds' AND s.sid IS NOT NULL
           AND (d.wanted IS NULL OR d.wanted >= now() - interval '5 seconds')
           AND s.heartbeat >= now() - coalesce(s.session_timeout, interval '5 minutes') AS live
      INTO l
      FROM dir_lease d LEFT JOIN session s ON s.sid = d.sid WHERE d.dir = p_dir;
    IF NOT FOUND THEN
        RETURN true;
    ELSIF NOT l.live THEN
        -- (unless its holder committed meanwhile, and so renewed it)
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = l.sid AND taken = l.taken;
        RETURN FOUND OR NOT EXISTS (SELECT 1 FROM dir_lease WHERE dir = p_dir);
    ELSIF l.wanted IS NULL THEN
        UPDATE dir_lease SET wanted = now() WHERE dir = p_dir AND wanted IS NULL;
    END IF;
    RETURN false;
END
$$;


DROP FUNCTION _knows_leases(text);


-- Session p_sid takes directory p_dir's lease. Changes in flight in the
-- directory are waited for (their lock of it), then its entries are
-- returned: errno 0 and their names, inodes, types and link counts, in
-- name order. A lease the session holds already is taken again, while
-- _lease_renewable says so (asked for less than a second ago, taken first
-- less than a minute ago); else it ends here, with errno 11. Else no
-- lease, and errno 11 (EAGAIN) when another live session holds it (asked
-- for, as by want_lease), 27 (EFBIG) when the directory has more than
-- p_limit entries, 2 or 20 when it is missing or not a directory, 22 for a
-- session that is not registered. (Until 0.2.23, 95 while a session that
-- claimed an older client's version was registered: what one session
-- says of itself no longer changes what others get; a client before
-- 0.2.17 meets a leased directory as an error.) Taken again, a lease
-- stays asked for if it was. creates (with
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
    v_renewable boolean;
    v_limit integer := least(greatest(coalesce(p_limit, 10000), 1), 100000);
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF NOT EXISTS (SELECT 1 FROM session s WHERE s.sid = p_sid) THEN
        errno := 22;
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
    SELECT d.sid, _lease_renewable(d.granted, d.wanted, true) INTO v_holder, v_renewable
      FROM dir_lease d WHERE d.dir = p_dir;
    IF FOUND AND v_holder <> p_sid AND NOT want_lease(p_dir) THEN
        errno := 11;
        RETURN;
    ELSIF v_holder = p_sid AND NOT v_renewable THEN
        -- (its holder cannot keep a lease asked for by taking it again)
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
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
        ON CONFLICT (dir) DO UPDATE
       SET sid = p_sid, taken = now(), granted = CASE WHEN d.sid = p_sid THEN d.granted ELSE now() END;
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


-- Commits the unlinks session p_sid answered itself in directory p_dir:
-- each of p_names is removed while it still names node p_inodes[i] (so a
-- lease lost meanwhile never removes what another session made), as
-- batch_unlink removes (p_open_inodes: the mount's open files, kept for it).
-- Then the lease is kept when p_keep and no other session asked for it;
-- else it ends. errnos: one per name, 0 (removed) or 2 (it named another
-- node, or none); kept: whether the session holds the lease now.
CREATE OR REPLACE FUNCTION lease_unlink(p_sid bigint, p_dir bigint, p_names bytea[], p_inodes bigint[],
                             p_open_inodes bigint[], p_keep boolean,
                             OUT errnos integer[], OUT kept boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    PERFORM _begin();
    PERFORM _check_session(p_sid);
    IF cardinality(p_names) IS DISTINCT FROM cardinality(p_inodes) THEN
        RAISE EXCEPTION 'jfs.lease_unlink: % names and % inodes', cardinality(p_names), cardinality(p_inodes)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_names) > 0 THEN
        SELECT array_agg(CASE WHEN x.errno = 0 THEN 0 ELSE 2 END ORDER BY u.i) INTO errnos
          FROM unnest(p_names) WITH ORDINALITY u(n, i)
          JOIN _unlink_names(p_dir, p_names, p_inodes, p_sid, coalesce(p_open_inodes, '{}'))
               WITH ORDINALITY x(name, errno, inode, i) ON x.i = u.i;
    END IF;
    errnos := coalesce(errnos, '{}');
    IF p_keep THEN
        UPDATE dir_lease d SET taken = now()
         WHERE d.dir = p_dir AND d.sid = p_sid AND _lease_renewable(d.granted, d.wanted, false);
        kept := FOUND;
    ELSE
        kept := false;
    END IF;
    IF NOT kept THEN
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
    END IF;
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


-- ---------------------------------------------------------------------------
-- No session declares a timeout past an hour (sql/session.sql); the
-- sessions that did are held to it.


-- A new session of the caller's login role (only it, or an administrator,
-- acts for it), which other mounts end only after p_timeout without a
-- heartbeat (its mount's --session-timeout, at least a second and at most
-- an hour: a session that claimed a century kept its locks past its
-- mount's end). None opens on a volume being destroyed.
CREATE OR REPLACE FUNCTION session_open(p_host text, p_pid integer, p_info jsonb, p_timeout interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
BEGIN
    PERFORM _refuse_if_destroying();
    INSERT INTO session (host, pid, info, session_timeout)
    VALUES (coalesce(p_host, ''), coalesce(p_pid, 0), coalesce(p_info, '{}'),
            least(greatest(coalesce(p_timeout, '5 minutes'), '1 second'), '1 hour'))
    RETURNING sid INTO v_sid;
    RETURN v_sid;
END
$$;


-- Ends every session whose last heartbeat is older than p_timeout and than
-- the session's own timeout (at most an hour: so no client can end a live
-- one, and none lives on silent); any client may call it. Returns the
-- number of sessions ended. (An administrator ends any session at once
-- with session_close.)
CREATE OR REPLACE FUNCTION session_cleanup(p_timeout interval DEFAULT '5 minutes') RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
    v_count integer := 0;
BEGIN
    PERFORM _begin();
    FOR v_sid IN SELECT sid FROM session
                  WHERE heartbeat < now() - greatest(p_timeout, coalesce(session_timeout, p_timeout))
                  ORDER BY sid FOR UPDATE SKIP LOCKED LOOP
        PERFORM _end_session(v_sid);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;


-- ---------------------------------------------------------------------------
-- df on a volume without a capacity grows with what is charged: no sparse
-- file fills it (sql/volume.sql).


-- Used and free space and inodes, as statfs(2) reports them: of the volume,
-- or, for a directory p_inode other than the root (a mount of a
-- subdirectory), of the nearest directory quota at or above it where that
-- quota has a limit (the volume's figures where it has none; never more
-- available than the volume has). Without a capacity the volume reports
-- 1 PiB in total, doubled while more than 80% of it is charged; without
-- an inode limit, used + 10 Mi free inodes, the free ones doubled alike.
CREATE OR REPLACE FUNCTION statfs(p_inode bigint DEFAULT 1, OUT errno integer, OUT total_space bigint, OUT avail_space bigint,
                       OUT used_inodes bigint, OUT avail_inodes bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_used_space bigint;
    v_cap bigint;
    v_inodes bigint;
    v_root bigint;
    q record;
BEGIN
    SELECT max_space, max_inodes INTO v_cap, v_inodes FROM quota WHERE kind = 'fs' AND key = 0;
    IF NOT FOUND THEN
        errno := 5; RETURN;
    END IF;
    SELECT coalesce(sum(space), 0), coalesce(sum(quota_usage.inodes), 0) INTO v_used_space, used_inodes
      FROM quota_usage WHERE kind = 'fs' AND key = 0;
    -- without a capacity, 1 PiB, doubled while what is charged passes 80%
    -- of it (as JuiceFS shows it): no file, however sparse, fills df
    total_space := CASE WHEN v_cap > 0 THEN v_cap ELSE 1125899906842624 END;
    WHILE NOT v_cap > 0 AND total_space < 4611686018427387904
          AND total_space::numeric * 8 < v_used_space::numeric * 10 LOOP
        total_space := total_space * 2;
    END LOOP;
    avail_space := greatest(total_space - v_used_space, 0);
    -- (and 10 Mi free inodes, doubled while those used pass 80%)
    avail_inodes := CASE WHEN v_inodes > 0 THEN greatest(v_inodes - used_inodes, 0) ELSE 10485760 END;
    WHILE NOT v_inodes > 0 AND avail_inodes < 4611686018427387904
          AND used_inodes::numeric * 10 > (used_inodes + avail_inodes)::numeric * 8 LOOP
        avail_inodes := avail_inodes * 2;
    END LOOP;
    errno := 0;
    IF p_inode IS NOT NULL AND p_inode <> 1 THEN
        SELECT n.qroot INTO v_root FROM node n WHERE n.inode = p_inode AND n.type = 2;
        IF NOT FOUND THEN
            errno := 2; RETURN;
        END IF;
        SELECT l.max_space, l.max_inodes, coalesce(sum(x.space), 0) AS space, coalesce(sum(x.inodes), 0) AS inodes
          INTO q
          FROM quota l LEFT JOIN quota_usage x ON x.kind = l.kind AND x.key = l.key
         WHERE l.kind = 'dir' AND l.key = v_root
         GROUP BY l.max_space, l.max_inodes;
        IF q.max_space > 0 THEN
            total_space := q.max_space;
            avail_space := least(greatest(q.max_space - q.space, 0), avail_space);
        END IF;
        IF q.max_inodes > 0 THEN
            used_inodes := q.inodes;
            avail_inodes := least(greatest(q.max_inodes - q.inodes, 0), avail_inodes);
        END IF;
    END IF;
END
$$;


-- ---------------------------------------------------------------------------
-- No slice ends at or past 2^57 bytes, the largest file (sql/data.sql): a
-- client role once made a file of 2^57 bytes, whose length has no chunk.


-- Appends a slice to chunk p_chunk_index of file p_inode: bytes
-- [p_slice_off, p_slice_off + p_len) of stored slice p_slice_id (of size
-- p_slice_size) now appear at [p_pos, p_pos + p_len) of the chunk, over
-- whatever was there. Called after the slice's blocks are in object storage.
-- Extends the length, sets mtime (p_mtime, default now) and ctime. The
-- slice id must be one alloc_ids handed out, committed nowhere yet and not
-- queued for deletion (EINVAL): each write's slice is committed once. A
-- slice ending at or past 2^57 bytes, the largest file, is EFBIG.
-- With p_defer, growth within the file's last 4 KiB unit is not added to
-- dir_stats but returned in `deferred`, for the caller to add after every
-- quota row it charges (write_slices: the lock order of _charge).
CREATE OR REPLACE FUNCTION _write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint, p_defer boolean, OUT a attr, OUT deferred bigint)
LANGUAGE plpgsql AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    v_had bigint;
    n node;
BEGIN
    deferred := 0;
    IF p_chunk_index IS NULL OR p_chunk_index < 0 OR p_pos IS NULL OR p_pos < 0 OR p_len IS NULL OR p_len <= 0
       OR p_pos::bigint + p_len > _chunk_size() OR p_slice_id IS NULL OR p_slice_id <= 0
       OR p_slice_off IS NULL OR p_slice_off < 0 OR p_slice_size IS NULL
       OR p_slice_off::bigint + p_len > p_slice_size THEN
        a := _err(22);
        RETURN;
    ELSIF p_chunk_index::bigint * _chunk_size() + p_pos + p_len >= 144115188075855872 THEN
        -- (a file ends before 2^57, as setattr keeps it: the chunk index
        -- of its length must fit an integer)
        a := _err(27);
        RETURN;
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    v_errno := _file_errno(n);
    IF v_errno = 0 AND NOT _fresh_slice_id(p_slice_id) THEN
        v_errno := 22;
    END IF;
    IF v_errno <> 0 THEN
        a := _err(v_errno);
        RETURN;
    END IF;
    v_end := greatest(n.length, p_chunk_index::bigint * _chunk_size() + p_pos + p_len);
    IF p_defer AND _space(v_end) = _space(n.length) THEN
        deferred := v_end - n.length;
    ELSE
        -- a longer file must fit the quotas: refused before anything changes
        v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true, v_end - n.length);
        IF v_errno <> 0 THEN
            a := _err(v_errno);
            RETURN;
        END IF;
    END IF;
    -- (a concurrent commit of the same id makes this fail: the id is used once)
    INSERT INTO slice_ref (slice_id, size, refs) VALUES (p_slice_id, p_slice_size, 1);
    -- the bytes that showed data under the new slice (none for an append)
    v_had := _range_size(_chunk_data(p_inode, p_chunk_index, p_pos, p_pos + p_len));
    INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
    VALUES (p_inode, p_chunk_index, p_slice_id, p_slice_size, p_slice_off, p_len, p_pos);
    n.length := v_end; n.mtime := coalesce(p_mtime, v_now); n.ctime := v_now;
    n.used := n.used + p_len - v_had;
    UPDATE node SET length = v_end, mtime = n.mtime, ctime = v_now, used = n.used
     WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    a := _to_attr(n);
END
$$;


-- ---------------------------------------------------------------------------
-- Read-only roles get the store keys kept for readers, or none
-- (sql/schema.sql, sql/volume.sql, sql/security.sql).
ALTER TABLE secret ADD COLUMN reader_access_key text NOT NULL DEFAULT '';
ALTER TABLE secret ADD COLUMN reader_secret_key text NOT NULL DEFAULT '';


-- The object store's keys and the blocks' RSA key, for mounts. A
-- read-only role gets the keys kept for readers (set_reader_keys), or
-- none: never keys that can delete blocks (it still gets the RSA key,
-- without which nothing reads; its passphrase is never stored here).
-- VOLATILE so that jfs.grant_reader, which grants the read-only functions,
-- never grants this one.
CREATE OR REPLACE FUNCTION volume_secrets(OUT access_key text, OUT secret_key text, OUT encrypt_key text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT CASE WHEN r.ro THEN s.reader_access_key ELSE s.access_key END,
           CASE WHEN r.ro THEN s.reader_secret_key ELSE s.secret_key END, s.encrypt_key
      FROM secret s CROSS JOIN (SELECT _caller_read_only() AS ro) r
$$;


-- Keeps p_access_key and p_secret_key as the object store's keys of
-- read-only roles (administration): keys of a user of the store that may
-- only read its bucket. '' for both: read-only roles get no keys (their
-- mounts then use the credentials of their own environment).
CREATE FUNCTION set_reader_keys(p_access_key text, p_secret_key text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_access_key IS NULL OR p_secret_key IS NULL OR (p_access_key = '') <> (p_secret_key = '') THEN
        RAISE EXCEPTION 'jfs.set_reader_keys: an access key and its secret key, or empty strings for both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO secret (reader_access_key, reader_secret_key) VALUES (p_access_key, p_secret_key)
        ON CONFLICT (id) DO UPDATE SET reader_access_key = excluded.reader_access_key,
                                       reader_secret_key = excluded.reader_secret_key;
END
$$;


-- The procedures of administration, granted by grant_admin only: (re)format
-- the volume (its settings, its bucket and keys), set and delete quotas,
-- define tier classes and move files between them, turn ACLs on, set how
-- long the change log keeps its rows and how long freed objects are kept,
-- load a dump, repair what fsck finds, keep read-only roles' store keys.
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys']::name[];


-- (new functions: nobody's until granted, as a fresh install leaves them;
-- jfs.grant_admin grants set_reader_keys when run again)
REVOKE EXECUTE ON FUNCTION _caller_read_only(), _lease_renewable(timestamptz, timestamptz, boolean),
    set_reader_keys(text, text) FROM PUBLIC;


UPDATE session SET session_timeout = interval '1 hour' WHERE session_timeout > interval '1 hour';
