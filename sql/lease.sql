-- Directory leases. A mount that removes many entries of one directory
-- (rm -rf, a cleaner) takes the directory's lease (take_lease, which gives
-- it the directory's entries), answers the unlinks itself and commits them
-- in batches (lease_unlink). While a session holds a directory's lease, no
-- other session reads or changes its entries: lookup, lookup_ahead and the
-- readdirs refuse (_unleased), and so does any change of its entries (the
-- triggers on edge), with SQLSTATE JL000 and the directory in DETAIL. The
-- refused caller asks for the lease (want_lease) and calls again; the
-- holder gives it up at its next commit, within its batch window (50 ms).
-- A holder whose session is gone, or that has not committed for 5 seconds,
-- loses it at the first want_lease: what it had not committed is lost, as
-- in its crash (or, if it still lives, committed late: lease_unlink
-- removes a name only while it names the node the lease found).
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

-- Asks for directory p_dir's lease, after a call was refused with SQLSTATE
-- JL000: its holder gives it up at its next commit. True when the
-- directory is free now: no lease, or one that ends here because its
-- holder's session is gone or silent past its timeout, or because the
-- holder has not committed for 5 seconds (a live holder commits, and so
-- renews it, every 50 ms, and gives it up after a window without unlinks).
CREATE FUNCTION want_lease(p_dir bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    l record;
BEGIN
    SELECT d.sid, d.taken, d.wanted,
           d.taken >= now() - interval '5 seconds' AND s.sid IS NOT NULL
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

-- Whether a client of version p_version (a session's info->>'version')
-- asks for a lease a call was refused for: jfs 0.2.17 and later.
CREATE FUNCTION _knows_leases(p_version text) RETURNS boolean
LANGUAGE sql IMMUTABLE
RETURN coalesce(string_to_array(substring(p_version FROM '^[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}'), '.')::integer[]
                >= ARRAY[0, 2, 17], false);

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
-- lease). Taken again, a lease stays asked for if it was.
CREATE FUNCTION take_lease(p_sid bigint, p_dir bigint, p_limit integer DEFAULT 10000,
                           OUT errno integer, OUT names bytea[], OUT inodes bigint[], OUT types smallint[],
                           OUT nlinks integer[])
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
        UPDATE dir_lease SET taken = now() WHERE dir = p_dir AND sid = p_sid AND wanted IS NULL;
        kept := FOUND;
    ELSE
        kept := false;
    END IF;
    IF NOT kept THEN
        DELETE FROM dir_lease WHERE dir = p_dir AND sid = p_sid;
    END IF;
END
$$;
