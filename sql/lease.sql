-- Directory leases. A mount that removes many entries of one directory
-- (rm -rf, a cleaner), or creates many regular files in it (untar, cp -a,
-- a checkpoint writer), takes the directory's lease (take_lease, which
-- gives it the directory's entries), answers the unlinks and creates
-- itself and commits them in batches (lease_commit; lease_unlink for
-- unlinks alone, as clients before 0.2.20 do). While a session holds a
-- directory's lease, no other session reads or changes its entries:
-- lookup, lookup_ahead and the readdirs refuse (_unleased), and so does
-- any change of its entries (the triggers on edge), with SQLSTATE JL000
-- and the directory in DETAIL. The refused caller asks for the lease
-- (want_lease) and calls again; the holder gives it up at its next commit,
-- within its batch window (50 ms), and at the latest a second after it was
-- asked for, whatever it calls. A holder whose session is gone, that has
-- not committed for 5 seconds, or that still holds it 5 seconds after it
-- was asked for, loses it at the first want_lease: what it had not
-- committed is lost, as in its crash (or, if it still lives, committed
-- late: a name is removed only while it names the node the lease found,
-- and made only while it is free and within every quota). No lease is
-- renewed a minute after it was taken (_lease_renewable). Read-only roles
-- read past leases and ask for none (0.2.23).
-- The caller's session is its connection's (application_name jfs:SID,
-- checked against the role that registered it: _change_session).
-- Administration (dump, fsck, summary, jfs.ls) reads past leases.

-- After any statement that changes entries: their directories must not be
-- leased to another session. Every procedure that changes a directory's
-- entries locks the directory (FOR KEY SHARE at least) first, and
-- take_lease locks it FOR UPDATE: a change in flight when a lease is taken
-- commits before the lease does, and one after it sees the lease here.
-- (Its search_path is pinned: it also runs for statements outside the
-- procedures, a restore's COPY, an administrator's UPDATE.)
CREATE FUNCTION _edge_unleased() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    -- (a probe first: almost no statement touches a leased directory, and
    -- the distinct directories and _unleased's call cost a create 0.03 ms)
    IF TG_OP = 'INSERT' THEN
        PERFORM FROM dir_lease d WHERE d.dir IN (SELECT a.parent FROM added a);
        IF FOUND THEN
            PERFORM _unleased(ARRAY(SELECT DISTINCT a.parent FROM added a));
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM FROM dir_lease d WHERE d.dir IN (SELECT g.parent FROM gone g);
        IF FOUND THEN
            PERFORM _unleased(ARRAY(SELECT DISTINCT g.parent FROM gone g));
        END IF;
    ELSE
        PERFORM FROM dir_lease d WHERE d.dir IN (SELECT a.parent FROM added a UNION ALL SELECT g.parent FROM gone g);
        IF FOUND THEN
            PERFORM _unleased(ARRAY(SELECT a.parent FROM added a UNION SELECT g.parent FROM gone g));
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER edge_unleased_insert AFTER INSERT ON edge
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION _edge_unleased();
CREATE TRIGGER edge_unleased_update AFTER UPDATE ON edge
    REFERENCING OLD TABLE AS gone NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION _edge_unleased();
CREATE TRIGGER edge_unleased_delete AFTER DELETE ON edge
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION _edge_unleased();

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
CREATE FUNCTION want_lease(p_dir bigint) RETURNS boolean
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
CREATE FUNCTION take_lease(p_sid bigint, p_dir bigint, p_limit integer DEFAULT 10000,
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
           array_agg(x.type ORDER BY x.name), array_agg(coalesce(n.nlink, 2) ORDER BY x.name)
      INTO names, inodes, types, nlinks
      FROM (SELECT e.name, e.inode, e.type FROM edge e WHERE e.parent = p_dir
             ORDER BY e.parent, e.name LIMIT v_limit + 1) x
      LEFT JOIN node n ON n.inode = x.inode;  -- (a shard root's node is its shard's)
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
CREATE FUNCTION lease_unlink(p_sid bigint, p_dir bigint, p_names bytea[], p_inodes bigint[],
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
    p_node_uid bigint, p_node_gid bigint, p_inline bytea[] DEFAULT NULL)
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
                        p_uid, p_gid, p_atime, p_set_mtime, p_base_mode, p_inline) w;
END
$$;
