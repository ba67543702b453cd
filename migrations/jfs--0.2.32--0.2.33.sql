-- jfs 0.2.32 -> 0.2.33.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.33 makes from sql/:
-- tests/upgrade/check.sh compares the two.
--
-- Helpers that PostgreSQL cannot inline are written in PL/pgSQL: before
-- PostgreSQL 18 a SQL-language function that is not inlined is planned
-- afresh at every call, and the caller's role check that every change of
-- a directory made (_caller_read_only, through _unleased) cost some 0.2 ms
-- of planning alone. Their results are as before. _unleased looks the
-- caller's role up only when it finds another session's lease.

-- Whether the caller's login role is read-only (jfs.grant_client).
CREATE OR REPLACE FUNCTION _caller_read_only() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT bool_or(r.read_only) FROM _caller_limits() r), false);
END
$$;

-- The squash of owner ids the caller is under: kind 'none'; 'root', ids 0
-- become uid/gid; 'all', every id does (all before root, then by role).
CREATE OR REPLACE FUNCTION _caller_squash(OUT kind text, OUT uid bigint, OUT gid bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT r.squash, r.squash_uid, r.squash_gid INTO kind, uid, gid FROM _caller_limits() r
     WHERE r.squash <> 'none'
     ORDER BY r.squash = 'all' DESC, r.role
     LIMIT 1;
    kind := coalesce(kind, 'none');
END
$$;

-- Whether some client role is squashed: what setting.squash_roles keeps
-- (schema-qualified: grant_client calls it with jfs off its search_path),
-- so that a create looks the caller's squash up only when one may apply.
CREATE OR REPLACE FUNCTION _some_role_squashed() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM jfs.client_role r WHERE r.squash <> 'none');
END
$$;

-- The shard of its volume this database is (sql/shard.sql; 0: the root).
CREATE OR REPLACE FUNCTION _this_shard() RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT s.shard FROM setting s), 0);
END
$$;

-- Whether the caller's login role administers jfs: a superuser, or a role
-- granted the procedures of administration (jfs.grant_admin).
CREATE OR REPLACE FUNCTION _is_admin() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
        OR pg_catalog.has_function_privilege(session_user, 'jfs.set_retain_deleted(interval)', 'EXECUTE');
END
$$;

-- Whether the caller may act for session p_sid: its login role registered
-- it (or the session is from before sessions had roles), or it is an
-- administrator. NULL when there is no such session.
CREATE OR REPLACE FUNCTION _may_act_for(p_sid bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.role IS NULL OR s.role = session_user OR _is_admin() FROM session s WHERE s.sid = p_sid);
END
$$;

-- Refuses when a session other than the caller's holds the lease of any
-- of directories p_dirs (the caller's session is worked out only then).
-- A read-only role reads past leases, as administration does: it sees
-- what the holder committed (at most a batch window, 50 ms, behind), and
-- so never makes a holder give a lease up (0.2.23).
-- (Almost every call finds no lease: one probe answers it. A loop over the
-- leases found, with the caller's session in it, made every create 0.02
-- ms slower. The caller's role is looked up last, when another session's
-- lease is found: a lease holder's own calls, the creates it commits, do
-- not pay for it; each probe has LIMIT 1, which keeps its plan cached.)
CREATE OR REPLACE FUNCTION _unleased(p_dirs bigint[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
    v_me bigint;
BEGIN
    SELECT d.dir, d.sid INTO l FROM dir_lease d WHERE d.dir = ANY (p_dirs) LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_me := _change_session();
    IF l.sid IS NOT DISTINCT FROM v_me THEN
        SELECT d.dir, d.sid INTO l FROM dir_lease d
         WHERE d.dir = ANY (p_dirs) AND d.sid IS DISTINCT FROM v_me LIMIT 1;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF NOT _caller_read_only() THEN
        PERFORM _leased(l.dir, l.sid);
    END IF;
END
$$;

-- Logs change p_op of node p_inode (p_name: the xattr's name), with its owner.
CREATE OR REPLACE FUNCTION _log_node_change(p_op text, p_inode bigint, p_name bytea DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO change (op, inode, name, uid, gid)
    SELECT p_op, n.inode, p_name, n.uid, n.gid FROM node n WHERE n.inode = p_inode;
END
$$;

-- Rows updated again and again in one transaction (a counter, a quota's
-- stripe, a directory's dir_stats, as a script that makes 100,000 entries
-- in one transaction updates them): every UPDATE adds a version that no
-- one can prune before the commit, and an UPDATE that finds its row by key
-- walks them all, so n updates cost n^2. The ctid of the version this
-- transaction wrote last is kept in a transaction-local setting per slot
-- (jfs.v_SLOT = 'ROW@CTID'; a fixed, small set of slots), and the next
-- update of that row fetches that version directly (a TID scan). A version
-- this transaction changed since through another path is invisible to it,
-- so such an update finds no row and the caller updates by key as before;
-- a subtransaction's rollback takes its settings back with its versions.
-- The version this transaction last wrote of row p_row in slot p_slot (NULL
-- if it wrote none there, or another row since).
CREATE OR REPLACE FUNCTION _last_version(p_slot text, p_row text) RETURNS tid
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := pg_catalog.current_setting('jfs.v_' || p_slot, true);
BEGIN
    RETURN CASE WHEN pg_catalog.split_part(v, '@', 1) = p_row THEN pg_catalog.split_part(v, '@', 2)::tid END;
END
$$;

-- Notes p_ctid as the version this transaction last wrote of row p_row in
-- slot p_slot (see _last_version).
CREATE OR REPLACE FUNCTION _note_version(p_slot text, p_row text, p_ctid tid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('jfs.v_' || p_slot, p_row || '@' || p_ctid::text, true);
END
$$;

-- Whether more bytes wait for deletion than the volume's cap allows
-- (setting.delete_queue_cap; never with no cap).
CREATE OR REPLACE FUNCTION _delete_queue_over_cap() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.delete_queue_cap > 0
                   AND (SELECT coalesce(sum(u.bytes), 0) FROM delete_usage u) > s.delete_queue_cap
              FROM setting s);
END
$$;

-- The keys of the quotas of a kind, for setting.quota_uids/quota_gids: up to
-- 64 of them (NULL for more; the setting row is read by every create).
CREATE OR REPLACE FUNCTION _quota_keys(p_kind text) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT CASE WHEN count(*) <= 64 THEN coalesce(array_agg(q.key ORDER BY q.key), '{}') END
              FROM quota q WHERE q.kind = p_kind);
END
$$;

-- Whether directory p_dir is the trash or one of its hours: removing from
-- there really deletes.
CREATE OR REPLACE FUNCTION _in_trash(p_dir bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_dir = _trash_inode()
        OR EXISTS (SELECT 1 FROM node n WHERE n.inode = p_dir AND n.parent = _trash_inode());
END
$$;

-- Whether node p_inode (locked by the caller) has no name and nobody
-- holds it: no session has it open, and it is not kept in unlinked for
-- other mounts (free_unlinked frees those).
CREATE OR REPLACE FUNCTION _unheld(p_inode bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM node WHERE inode = p_inode AND nlink = 0)
       AND NOT EXISTS (SELECT 1 FROM sustained WHERE inode = p_inode)
       AND NOT EXISTS (SELECT 1 FROM unlinked WHERE inode = p_inode);
END
$$;

-- Whether directories p_dirs (a tree's) hold a shard root: a directory of
-- another shard (sql/shard.sql).
CREATE OR REPLACE FUNCTION _holds_shard_roots(p_dirs bigint[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM unnest(p_dirs) d WHERE (d >> 48) NOT IN (32767, _this_shard()));
END
$$;

-- The directories of the tree rooted at directory p_root, p_root first.
CREATE OR REPLACE FUNCTION _tree_dirs(p_root bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        WITH RECURSIVE t(inode) AS (
            SELECT p_root
            UNION ALL
            SELECT e.inode FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
        )
        SELECT array_agg(t.inode) FROM t);
END
$$;

-- Whether the volume holds nothing but its root (formatted or not).
CREATE OR REPLACE FUNCTION _volume_empty() RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM edge) AND NOT EXISTS (SELECT 1 FROM node WHERE inode <> 1);
END
$$;

-- Whether owner (p_sid, p_owner), waiting for the range, waits (through
-- other waiting owners) on itself. Wait rows not refreshed lately (a
-- client gone from its loop) do not count.
CREATE OR REPLACE FUNCTION _lock_deadlock(p_sid bigint, p_owner bigint, p_inode bigint, p_type integer,
                               p_start bigint, p_end bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        WITH RECURSIVE blocker (sid, owner) AS (
            SELECT l.sid, l.owner FROM _lock_conflicts(p_inode, p_sid, p_owner, p_type, p_start, p_end) l
            UNION
            SELECT l.sid, l.owner
              FROM blocker b
              JOIN lock_wait w ON w.sid = b.sid AND w.owner = b.owner AND w.at > now() - interval '5 seconds'
              CROSS JOIN LATERAL _lock_conflicts(w.inode, w.sid, w.owner, w.ltype, w.lstart, w.lend) l
        )
        SELECT EXISTS (SELECT 1 FROM blocker b WHERE b.sid = p_sid AND b.owner = p_owner));
END
$$;

-- Gives the new node p_inode the ACLs its parent's default ACL (tags, ids,
-- perms) passes on: an access ACL when the default one is more than a
-- mode (its mask and owner bits are in the mode already), and, to a
-- directory, the default ACL itself.
CREATE OR REPLACE FUNCTION _acl_inherit(p_inode bigint, p_is_dir boolean, p_tags smallint[], p_ids bigint[],
                             p_perms smallint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT p_inode, 'a', e.tag, e.id, e.perm
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
     WHERE e.tag IN (2, 4, 8) AND p_tags && ARRAY[2, 8, 16]::smallint[];
    INSERT INTO acl (inode, kind, tag, qualifier, perm)
    SELECT p_inode, 'd', e.tag, e.id, e.perm
      FROM unnest(p_tags, p_ids, p_perms) AS e(tag, id, perm)
     WHERE p_is_dir;
END
$$;

-- The name entry p_name of trash hour p_hour had where it came from: the
-- whole name kept in trash_name when its trash name was cut, else parsed.
CREATE OR REPLACE FUNCTION _trash_original(p_hour bigint, p_name bytea) RETURNS bytea
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN coalesce((SELECT t.original FROM trash_name t WHERE t.hour = p_hour AND t.name = p_name),
                    (_trash_parse(p_name)).name);
END
$$;


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
