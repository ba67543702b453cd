-- jfs 0.2.21 -> 0.2.22.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.22 makes from sql/:
-- tests/upgrade/check.sh compares the two. take_lease keeps its signature
-- (CREATE OR REPLACE), so the roles that could call it still can.
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
