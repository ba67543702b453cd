-- jfs 0.2.23 -> 0.2.24.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.24 makes from sql/:
-- tests/upgrade/check.sh compares the two. Every procedure changed keeps
-- its signature (CREATE OR REPLACE), and so its grants. Client roles get
-- end_stalling when jfs.grant_client runs again (until then their mounts
-- wait for stalling transactions as before); fsck and check_quota become
-- administration: every role that is not an administrator loses them here
-- (grant_client and grant_reader, run again, do not give them back).
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Ids handed out are their role's (sql/schema.sql, sql/internal.sql,
-- sql/volume.sql): those handed out before this version stay anyone's.
CREATE TABLE id_grant (
    kind  text   NOT NULL CHECK (kind IN ('inode', 'slice')),
    first bigint NOT NULL,
    last  bigint NOT NULL CHECK (last >= first),
    role  name,
    PRIMARY KEY (kind, first)
);
SELECT pg_catalog.pg_extension_config_dump('id_grant', '');
INSERT INTO id_grant (kind, first, last, role)
SELECT c.name, 1, c.next - 1, NULL FROM counter c WHERE c.next > 1;
REVOKE ALL ON TABLE id_grant FROM PUBLIC;

-- Whether p_id is an id of counter p_kind ('inode', 'slice') that alloc_ids
-- handed out to the caller's login role (or before 0.2.24, when ranges had
-- no owner), or the caller administers jfs: ids are never handed out
-- twice, and no client names ids reserved by another role.
CREATE OR REPLACE FUNCTION _handed_out(p_kind text, p_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    g id_grant;
BEGIN
    IF p_id IS NULL OR p_id <= 0 OR p_id >= (SELECT c.next FROM counter c WHERE c.name = p_kind) THEN
        RETURN false;
    END IF;
    SELECT * INTO g FROM id_grant x WHERE x.kind = p_kind AND x.first <= p_id ORDER BY x.first DESC LIMIT 1;
    IF FOUND AND p_id <= g.last AND (g.role IS NULL OR g.role = session_user) THEN
        RETURN true;
    END IF;
    RETURN _is_admin();
END
$$;

-- Notes that ids p_first .. p_first + p_count - 1 of kind p_kind went to
-- the caller's login role (see _handed_out): the range just before grows
-- when it went to that role too (the counter's row lock, held by the
-- caller, orders the grants).
CREATE FUNCTION _grant_ids(p_kind text, p_first bigint, p_count bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE id_grant g SET last = p_first + p_count - 1
     WHERE g.kind = p_kind AND g.last = p_first - 1 AND g.role = session_user
       AND g.first = (SELECT max(x.first) FROM id_grant x WHERE x.kind = p_kind AND x.first < p_first);
    IF NOT FOUND THEN
        INSERT INTO id_grant (kind, first, last, role) VALUES (p_kind, p_first, p_first + p_count - 1, session_user);
    END IF;
END
$$;

-- Reserves p_count consecutive ids of kind 'inode' or 'slice' for the
-- caller; returns the first. A client reserves a range and uses it without
-- touching the counter again.
CREATE OR REPLACE FUNCTION alloc_ids(p_kind text, p_count integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_first bigint;
BEGIN
    IF p_kind NOT IN ('inode', 'slice') OR p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'alloc_ids: kind must be inode or slice and count between 1 and 1000000 (got %, %)',
            p_kind, p_count USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM _begin();
    v_first := _next_ids(p_kind, p_count);
    IF v_first IS NULL THEN
        RAISE EXCEPTION 'alloc_ids: the volume is not formatted' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM _grant_ids(p_kind, v_first, p_count);
    RETURN v_first;
END
$$;

-- ---------------------------------------------------------------------------
-- Directory moves are ordered by a row lock no role takes outside a
-- procedure (any role could hold the advisory lock they took before);
-- destroy_finish leaves its row.
CREATE TABLE tree_lock (
    id boolean PRIMARY KEY DEFAULT true CHECK (id)
);
INSERT INTO tree_lock VALUES (true);
REVOKE ALL ON TABLE tree_lock FROM PUBLIC;

-- Moves (p_parent, p_name) to (p_new_parent, p_new_name). A replaced
-- non-directory loses that link and, at zero links, is freed unless the
-- session p_sid has it open (p_open_inodes). Directories that move between
-- parents take a volume-wide transaction lock first (as Linux takes its
-- per-superblock rename mutex), so two renames can never build a cycle.
-- Nothing moves to /.trash or /.jfs.control, and the trash does not move
-- (EPERM). Returns errno, the moved inode, and the replaced (or exchanged)
-- inode with its nlink after the call (0 and NULL when nothing was replaced).
CREATE OR REPLACE FUNCTION rename(
    p_parent bigint, p_name bytea, p_new_parent bigint, p_new_name bytea,
    p_flags integer DEFAULT 0, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}',
    OUT errno integer, OUT inode bigint, OUT replaced bigint, OUT replaced_nlink integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_exchange boolean := coalesce(p_flags, 0) & 2 <> 0;
    v_noreplace boolean := coalesce(p_flags, 0) & 1 <> 0;
    v_cross boolean := p_parent <> p_new_parent;
    v_src bigint; v_src_type smallint;
    v_dst bigint; v_dst_type smallint;
    v_dir_type smallint;
    v_mode text;
    v_skip bigint;
    v_destroying timestamptz;
    v_moves_dir boolean;
    v_locked_tree boolean := false;
    v_now_src bigint; v_now_dst bigint;
    v_nlink integer;
    v_src_node node;
    v_dst_node node;
    v_gone node;
BEGIN
    replaced := 0;
    PERFORM _unleased(ARRAY[p_parent, p_new_parent]);
    IF coalesce(p_flags, 0) & ~3 <> 0 OR (v_exchange AND v_noreplace) THEN
        errno := 22; RETURN;
    END IF;
    IF _is_dot(p_name) OR _is_dot(p_new_name) THEN
        errno := CASE WHEN v_noreplace THEN 17 ELSE 16 END; RETURN;
    END IF;
    errno := greatest(_check_name(p_name), _check_name(p_new_name));
    IF errno <> 0 THEN
        RETURN;
    ELSIF _reserved_name(p_new_parent, p_new_name) THEN
        errno := 1; RETURN;
    END IF;

    FOR attempt IN 1..5 LOOP
        SELECT se.inode, se.type, de.inode, de.type, st.meta_durability, st.skip_dir_mtime_ns, st.destroying
          INTO v_src, v_src_type, v_dst, v_dst_type, v_mode, v_skip, v_destroying
          FROM setting st
          LEFT JOIN edge se ON se.parent = p_parent AND se.name = p_name
          LEFT JOIN edge de ON de.parent = p_new_parent AND de.name = p_new_name;
        IF v_destroying IS NOT NULL THEN
            PERFORM _destroyed();
        ELSIF v_src IS NULL THEN
            errno := _missing(p_parent, p_name); RETURN;
        ELSIF v_src = _trash_inode() THEN
            errno := 1; RETURN;
        END IF;
        inode := v_src;
        IF v_dst IS NULL THEN
            SELECT n.type INTO v_dir_type FROM node n WHERE n.inode = p_new_parent;
            IF v_dir_type IS NULL THEN
                errno := 2; RETURN;
            ELSIF v_dir_type <> 2 THEN
                errno := 20; RETURN;
            ELSIF v_exchange THEN
                errno := 2; RETURN;
            END IF;
        ELSIF v_noreplace THEN
            errno := 17; RETURN;
        ELSIF v_dst = v_src THEN
            -- both names are links to one file: POSIX says do nothing
            errno := 0; RETURN;
        ELSIF NOT v_exchange AND v_src_type = 2 AND v_dst_type <> 2 THEN
            errno := 20; RETURN;
        ELSIF NOT v_exchange AND v_src_type <> 2 AND v_dst_type = 2 THEN
            errno := 21; RETURN;
        END IF;
        IF attempt = 1 THEN
            PERFORM _durability(v_mode);
        END IF;

        v_moves_dir := v_cross AND (v_src_type = 2 OR (v_exchange AND v_dst_type = 2));
        IF v_moves_dir AND NOT v_locked_tree THEN
            PERFORM 1 FROM tree_lock FOR UPDATE;  -- (a row lock: no role takes it outside a procedure)
            v_locked_tree := true;
        END IF;
        IF v_cross OR v_dst IS NOT NULL THEN
            PERFORM _lock_nodes(ARRAY[p_parent, p_new_parent, v_src, v_dst],
                                ARRAY['share', 'share', 'update', 'update']);
        ELSE
            PERFORM _lock_nodes(ARRAY[p_parent, v_src], ARRAY['share', 'update']);
        END IF;
        -- both entries must still be what we read before waiting for the locks
        SELECT (SELECT e.inode FROM edge e WHERE e.parent = p_parent AND e.name = p_name),
               (SELECT e.inode FROM edge e WHERE e.parent = p_new_parent AND e.name = p_new_name)
          INTO v_now_src, v_now_dst;
        IF v_now_src IS DISTINCT FROM v_src OR v_now_dst IS DISTINCT FROM v_dst
           OR (v_moves_dir AND NOT v_locked_tree) THEN
            CONTINUE;
        END IF;

        IF v_cross AND v_src_type = 2 AND _is_ancestor(v_src, p_new_parent) THEN
            errno := 22; RETURN;
        END IF;
        IF v_cross AND v_exchange AND v_dst_type = 2 AND _is_ancestor(v_dst, p_parent) THEN
            errno := 22; RETURN;
        END IF;
        IF NOT v_exchange AND v_dst_type = 2 THEN
            PERFORM _unleased(ARRAY[v_dst]);
            IF NOT _dir_is_empty(v_dst) THEN
                errno := 39; RETURN;
            END IF;
        END IF;

        -- usage: a move between directories under different quota roots
        -- must fit the new roots' limits (refused before anything changes)
        IF v_cross THEN
            SELECT * INTO v_src_node FROM node WHERE node.inode = v_src;
            errno := _move_entry(v_src, v_src_node.type, v_src_node.length, p_parent, p_new_parent);
            IF errno <> 0 THEN
                RETURN;
            END IF;
            IF v_exchange THEN
                SELECT * INTO v_dst_node FROM node WHERE node.inode = v_dst;
                errno := _move_entry(v_dst, v_dst_node.type, v_dst_node.length, p_new_parent, p_parent);
                IF errno <> 0 THEN
                    -- undo the first move (it fitted where it was)
                    PERFORM _move_entry(v_src, v_src_node.type, v_src_node.length, p_new_parent, p_parent);
                    RETURN;
                END IF;
            END IF;
        END IF;

        IF v_exchange THEN
            UPDATE edge SET inode = v_dst, type = v_dst_type WHERE parent = p_parent AND name = p_name;
            UPDATE edge SET inode = v_src, type = v_src_type WHERE parent = p_new_parent AND name = p_new_name;
            UPDATE node SET ctime = v_now,
                   parent = CASE WHEN node.type <> 2 THEN node.parent
                                 WHEN node.inode = v_src THEN p_new_parent ELSE p_parent END
             WHERE node.inode IN (v_src, v_dst);
            IF v_cross THEN
                -- p_parent loses src if it is a directory and gains dst if that is one
                v_nlink := (v_dst_type = 2)::integer - (v_src_type = 2)::integer;
                IF v_nlink <> 0 THEN
                    UPDATE node SET nlink = nlink + CASE WHEN node.inode = p_parent THEN v_nlink ELSE -v_nlink END
                     WHERE node.inode IN (p_parent, p_new_parent);
                END IF;
            END IF;
            replaced := v_dst;
            SELECT n.nlink INTO replaced_nlink FROM node n WHERE n.inode = v_dst;
        ELSE
            IF v_dst IS NOT NULL AND v_dst_type <> 2
               AND (SELECT n.nlink FROM node n WHERE n.inode = v_dst) = 1
               AND _to_trash(p_new_parent, p_new_name) = 0 THEN
                -- with a trash, the replaced file moves there
                replaced := v_dst;
                replaced_nlink := 1;
            ELSIF v_dst IS NOT NULL THEN
                DELETE FROM edge WHERE parent = p_new_parent AND name = p_new_name;
                replaced := v_dst;
                SELECT * INTO v_gone FROM node WHERE node.inode = v_dst;
                PERFORM _uncharge_entry(p_new_parent, (SELECT n.qroot FROM node n WHERE n.inode = p_new_parent),
                                        1, _node_space(v_gone.type, v_gone.length), v_gone.length);
                IF v_dst_type = 2 THEN
                    DELETE FROM node WHERE node.inode = v_dst;
                    DELETE FROM xattr WHERE xattr.inode = v_dst;
                    DELETE FROM acl WHERE acl.inode = v_dst;
                    PERFORM _forget_dirs(ARRAY[v_dst]);
                    UPDATE node SET nlink = nlink - 1 WHERE node.inode = p_new_parent;
                    PERFORM _uncharge_nodes(ARRAY[v_gone.uid], ARRAY[v_gone.gid], ARRAY[4096::bigint]);
                    replaced_nlink := 0;
                ELSE
                    UPDATE node SET nlink = nlink - 1, ctime = v_now WHERE node.inode = v_dst
                    RETURNING nlink INTO replaced_nlink;
                    IF replaced_nlink = 0 AND NOT _keep_open(v_dst, p_sid, p_open_inodes) THEN
                        PERFORM _free_node(v_dst);
                    END IF;
                END IF;
            END IF;
            UPDATE edge SET parent = p_new_parent, name = p_new_name, cookie = nextval('edge_cookie')
             WHERE parent = p_parent AND name = p_name;
            IF v_cross AND v_src_type = 2 THEN
                UPDATE node SET ctime = v_now, parent = p_new_parent WHERE node.inode = v_src;
                UPDATE node SET nlink = nlink + CASE WHEN node.inode = p_new_parent THEN 1 ELSE -1 END
                 WHERE node.inode IN (p_parent, p_new_parent);
            ELSE
                UPDATE node SET ctime = v_now WHERE node.inode = v_src;
            END IF;
        END IF;
        PERFORM _touch_dir(p_parent, v_now, v_skip);
        IF v_cross THEN
            PERFORM _touch_dir(p_new_parent, v_now, v_skip);
        END IF;
        INSERT INTO change (op, inode, parent, name, parent2, name2, inode2, uid, gid)
        SELECT CASE WHEN v_exchange THEN 'exchange' ELSE 'rename' END, v_src, p_parent, p_name,
               p_new_parent, p_new_name, nullif(replaced, 0), n.uid, n.gid
          FROM node n WHERE n.inode = v_src;
        errno := 0;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'rename: entries kept changing under concurrent operations; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

-- `jfs destroy`, its last step (administration), after the volume's
-- objects are deleted: empties every table of the volume, so the database
-- is as CREATE EXTENSION left it (the client roles' limits stay) and
-- `jfs format` can make a new volume (session ids go on counting, so none
-- names a session of the old volume's mounts). errno 2: no volume; 22:
-- p_uuid is not its uuid, or destroy_begin did not mark it; 16: a reader
-- of the tables (a dump, a query) kept them locked for 10 seconds.
CREATE OR REPLACE FUNCTION destroy_finish(p_uuid uuid, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp SET lock_timeout = '10s' AS $$
DECLARE
    s setting;
    v_tables text;
    q record;
BEGIN
    SELECT * INTO s FROM setting FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2; message := 'the database holds no volume';
        RETURN;
    ELSIF s.uuid IS DISTINCT FROM p_uuid OR s.destroying IS NULL THEN
        errno := 22;
        message := pg_catalog.format('volume %s (uuid %s) is not being destroyed by uuid %s: jfs.destroy_begin first',
                                     s.name, s.uuid, coalesce(p_uuid::text, 'NULL'));
        RETURN;
    END IF;
    SELECT string_agg(c.oid::regclass::text, ', ' ORDER BY c.relname) INTO v_tables
      FROM pg_class c
     WHERE c.relnamespace = 'jfs'::regnamespace AND c.relkind IN ('r', 'p')
       AND c.relname NOT IN ('client_role', 'tree_lock');
    BEGIN
        EXECUTE 'TRUNCATE ' || v_tables;
    EXCEPTION WHEN lock_not_available THEN
        errno := 16;
        message := 'another session holds the volume''s tables (a dump, a long query): try again when it ends';
        RETURN;
    END;
    FOR q IN SELECT c.oid::regclass AS seq FROM pg_class c
              WHERE c.relnamespace = 'jfs'::regnamespace AND c.relkind = 'S' AND c.relname <> 'session_sid'
    LOOP
        EXECUTE pg_catalog.format('ALTER SEQUENCE %s RESTART', q.seq);
    END LOOP;
    errno := 0;
END
$$;

-- ---------------------------------------------------------------------------
-- Transactions left open around a procedure are ended when they keep
-- others waiting (sql/session.sql).
-- Ends the transactions that keep others waiting for their locks: a
-- transaction of a role that does not administer jfs, open for 5 seconds
-- or more, that holds a lock some backend of this database has waited for
-- 5 seconds or more, and that is not itself at work: idle in its
-- transaction (BEGIN; SELECT jfs.rename(...) and no COMMIT), asleep
-- (pg_sleep beside a procedure) or waiting for an advisory lock, or running
-- for 5 minutes. A row a procedure locked would otherwise stall every mount
-- that needs it for as long as such a client likes. A holder that waits
-- for a row lock itself is left: the end of the chain is ended instead.
-- Mounts call it when a call of theirs has waited 5 seconds (their own
-- call may be what waits); returns the number of backends ended.
CREATE FUNCTION end_stalling() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    h record;
    v_count integer := 0;
BEGIN
    FOR h IN
        SELECT DISTINCT b.pid, b.usename, b.state, now() - b.xact_start AS open_for
          FROM pg_locks w
         CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS k(pid)
          JOIN pg_stat_activity b ON b.pid = k.pid
          JOIN pg_roles r ON r.oid = b.usesysid
         WHERE NOT w.granted AND w.waitstart < now() - interval '5 seconds'
           AND b.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
           AND b.pid <> pg_backend_pid()
           AND b.xact_start < now() - interval '5 seconds'
           AND NOT r.rolsuper
           AND NOT has_function_privilege(r.oid, 'jfs.set_retain_deleted(interval)', 'EXECUTE')
           AND (b.state <> 'active'
                OR b.wait_event_type = 'Timeout'
                OR (b.wait_event_type = 'Lock' AND b.wait_event = 'advisory')
                OR b.xact_start < now() - interval '5 minutes')
    LOOP
        IF pg_terminate_backend(h.pid) THEN
            RAISE LOG 'jfs.end_stalling: ended backend % of role % (%, its transaction open for %), which held locks others waited for',
                h.pid, h.usename, h.state, h.open_for;
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END
$$;

REVOKE EXECUTE ON FUNCTION end_stalling(), _grant_ids(text, bigint, bigint) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- fsck and check_quota are administration (sql/security.sql).
CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish', 'set_reader_keys', 'fsck', 'check_quota', 'set_delete_queue_cap']::name[];


CREATE OR REPLACE FUNCTION grant_reader(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA jfs TO %I', p_role);
    EXECUTE pg_catalog.format('GRANT SELECT ON ALL TABLES IN SCHEMA jfs TO %I', p_role);
    EXECUTE pg_catalog.format('REVOKE SELECT ON jfs.secret FROM %I', p_role);
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace = 'jfs'::regnamespace AND p.provolatile IN ('s', 'i')
                AND p.proname <> ALL (jfs.admin_procedures())
              ORDER BY p.oid
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.rolname, f.oid::regprocedure AS proc
               FROM pg_catalog.pg_roles a
              CROSS JOIN pg_catalog.pg_proc f
              WHERE f.pronamespace = 'jfs'::regnamespace AND f.proname IN ('fsck', 'check_quota')
                AND NOT a.rolsuper
                AND pg_catalog.has_function_privilege(a.oid, f.oid, 'EXECUTE')
                AND NOT pg_catalog.has_function_privilege(a.oid, 'jfs.set_retain_deleted(interval)', 'EXECUTE')
              ORDER BY a.rolname, f.oid
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', r.proc, r.rolname);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Rows updated again and again in one transaction are updated at the
-- version written last (sql/usage.sql, sql/charge.sql, sql/internal.sql):
-- 100,000 creates in one transaction no longer cost n^2.
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
CREATE FUNCTION _last_version(p_slot text, p_row text) RETURNS tid
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN pg_catalog.split_part(v, '@', 1) = p_row
                THEN pg_catalog.split_part(v, '@', 2)::tid END
      FROM (SELECT pg_catalog.current_setting('jfs.v_' || p_slot, true) AS v) s
$$;

-- Notes p_ctid as the version this transaction last wrote of row p_row in
-- slot p_slot (see _last_version).
CREATE FUNCTION _note_version(p_slot text, p_row text, p_ctid tid) RETURNS void
LANGUAGE sql AS $$
    SELECT NULL::void FROM pg_catalog.set_config('jfs.v_' || p_slot, p_row || '@' || p_ctid::text, true)
$$;

-- Adds to the direct-children figures of directory p_dir (p_length: to the
-- sum of their lengths).
CREATE OR REPLACE FUNCTION _dir_stats_add(p_dir bigint, p_inodes bigint, p_space bigint, p_length bigint DEFAULT 0)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
    v_row text := p_dir || ':' || v_stripe;
    v_last tid := _last_version('dir_stats', v_row);
    v_ctid tid;
BEGIN
    IF v_last IS NOT NULL THEN
        UPDATE dir_stats d SET space = d.space + p_space, inodes = d.inodes + p_inodes, length = d.length + p_length
         WHERE d.ctid = v_last AND d.inode = p_dir AND d.stripe = v_stripe
        RETURNING d.ctid INTO v_ctid;
    END IF;
    IF v_ctid IS NULL THEN
        UPDATE dir_stats d SET space = d.space + p_space, inodes = d.inodes + p_inodes, length = d.length + p_length
         WHERE d.inode = p_dir AND d.stripe = v_stripe
        RETURNING d.ctid INTO v_ctid;
    END IF;
    IF v_ctid IS NULL THEN
        INSERT INTO dir_stats AS d (inode, stripe, space, inodes, length)
        VALUES (p_dir, v_stripe, p_space, p_inodes, p_length)
            ON CONFLICT (inode, stripe) DO UPDATE
            SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes,
                length = d.length + excluded.length
        RETURNING d.ctid INTO v_ctid;
    END IF;
    PERFORM _note_version('dir_stats', v_row, v_ctid);
END
$$;

-- Charges p_inodes / p_space to the quotas named (the volume's when p_fs,
-- user p_uid's and group p_gid's when not NULL, the directory quotas p_roots:
-- a root listed n times is charged n times) and to dir_stats of p_dir (0:
-- none), whose entries' lengths grow by p_length. With p_check, growth that would pass a limit is refused: nothing
-- changes and the errno comes back (28 for the volume, 122 for the others).
--
-- The quotas' rows of this backend's stripe are updated one by one in
-- (kind, key) order (_quota_list's), the one lock order of every
-- transaction: updating them in one statement would lock them in the
-- table's physical order, which differs between transactions as rows move,
-- and two creators sharing a stripe would deadlock. The usual charge is one
-- UPDATE per quota, an index probe that also checks the stripe's share; a
-- row that would pass its share is not updated, and _charge_exact decides.
-- The loop counts through the quotas instead of querying _quota_list: a
-- create pays for every statement here.
CREATE OR REPLACE FUNCTION _charge(p_fs boolean, p_uid bigint, p_gid bigint, p_roots bigint[], p_dir bigint,
                        p_inodes bigint, p_space bigint, p_check boolean, p_length bigint DEFAULT 0)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
    v_check boolean := p_check AND (p_inodes > 0 OR p_space > 0);
    v_roots bigint[] := p_roots;
    v_counts bigint[];
    v_nroots integer := coalesce(cardinality(p_roots), 0);
    v_kind text;
    v_key bigint;
    v_n bigint;
    v_errno integer;
    v_row text;
    v_last tid;
    v_ctid tid;
BEGIN
    IF v_nroots > 1 THEN
        SELECT array_agg(l.key ORDER BY l.key), array_agg(l.n ORDER BY l.key) INTO v_roots, v_counts
          FROM _quota_list(false, NULL, NULL, p_roots) l;
        v_nroots := cardinality(v_roots);
    END IF;
    FOR i IN 1 .. v_nroots + 3 LOOP
        IF i <= v_nroots THEN
            v_kind := 'dir';
            v_key := v_roots[i];
            v_n := coalesce(v_counts[i], 1);
        ELSE
            v_kind := CASE i - v_nroots WHEN 1 THEN 'fs' WHEN 2 THEN 'group' ELSE 'user' END;
            v_key := CASE i - v_nroots WHEN 1 THEN CASE WHEN p_fs THEN 0 END WHEN 2 THEN p_gid ELSE p_uid END;
            v_n := 1;
            CONTINUE WHEN v_key IS NULL;
        END IF;
        -- (the version this transaction wrote last, if any, directly: see
        -- _last_version; a slot per place in the loop)
        v_row := v_kind || ':' || v_key || ':' || v_stripe;
        v_last := _last_version('quota_usage_' || i, v_row);
        v_ctid := NULL;
        IF v_last IS NOT NULL THEN
            UPDATE quota_usage x SET inodes = x.inodes + p_inodes * v_n, space = x.space + p_space * v_n
             WHERE x.ctid = v_last AND x.kind = v_kind AND x.key = v_key AND x.stripe = v_stripe
               AND (NOT v_check OR (_fits(x.space, x.share_space, p_space * v_n)
                                    AND _fits(x.inodes, x.share_inodes, p_inodes * v_n)))
            RETURNING x.ctid INTO v_ctid;
        END IF;
        IF v_ctid IS NULL THEN
            UPDATE quota_usage x SET inodes = x.inodes + p_inodes * v_n, space = x.space + p_space * v_n
             WHERE x.kind = v_kind AND x.key = v_key AND x.stripe = v_stripe
               AND (NOT v_check OR (_fits(x.space, x.share_space, p_space * v_n)
                                    AND _fits(x.inodes, x.share_inodes, p_inodes * v_n)))
            RETURNING x.ctid INTO v_ctid;
        END IF;
        IF v_ctid IS NOT NULL THEN
            PERFORM _note_version('quota_usage_' || i, v_row, v_ctid);
        ELSIF v_check THEN
            v_errno := _charge_exact(v_kind, v_key, p_inodes * v_n, p_space * v_n);
            IF v_errno <> 0 THEN
                -- refused: take back what the quotas before it got
                UPDATE quota_usage x SET inodes = x.inodes - p_inodes * l.n, space = x.space - p_space * l.n
                  FROM _quota_list(p_fs, p_uid, p_gid, p_roots) l
                 WHERE (l.kind, l.key) < (v_kind, v_key)
                   AND x.kind = l.kind AND x.key = l.key AND x.stripe = v_stripe;
                RETURN v_errno;
            END IF;
        END IF;
    END LOOP;
    IF p_dir > 0 THEN
        PERFORM _dir_stats_add(p_dir, p_inodes, p_space, p_length);
    END IF;
    RETURN 0;
END
$$;

-- Reserves the next p_count ids of a counter; returns the first. (The
-- version of the counter's row this transaction wrote last is updated
-- directly: see _last_version.)
CREATE OR REPLACE FUNCTION _next_ids(p_name text, p_count bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_first bigint;
    v_last tid := _last_version('counter', p_name);
    v_ctid tid;
BEGIN
    IF v_last IS NOT NULL THEN
        UPDATE counter c SET next = c.next + p_count WHERE c.ctid = v_last AND c.name = p_name
        RETURNING c.next - p_count, c.ctid INTO v_first, v_ctid;
    END IF;
    IF v_first IS NULL THEN
        UPDATE counter c SET next = c.next + p_count WHERE c.name = p_name
        RETURNING c.next - p_count, c.ctid INTO v_first, v_ctid;
    END IF;
    IF v_ctid IS NOT NULL THEN
        PERFORM _note_version('counter', p_name, v_ctid);
    END IF;
    RETURN v_first;
END
$$;

REVOKE EXECUTE ON FUNCTION _last_version(text, text), _note_version(text, text, tid) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- A listing past its first page is bounded by the cookie handed out last
-- (sql/readdir.sql). Client roles get it when jfs.grant_client runs again.
-- The newest cookie handed out so far, by any session: a listing asks
-- for it when it goes past its first page and shows no entry with a newer
-- one, so entries renamed away and back (each time with a new cookie)
-- cannot keep a listing going for ever (xfstests generic/736). Entries
-- made after it are left to the next listing, as POSIX allows.
CREATE FUNCTION listing_ceiling() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.last_value FROM edge_cookie s
$$;

REVOKE EXECUTE ON FUNCTION listing_ceiling() FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Bytes waiting for deletion: counted (delete_usage, by triggers on
-- delslice), shown by statfs, jfs status and the metrics, and capped
-- (setting.delete_queue_cap) (sql/schema.sql, sql/data.sql, sql/volume.sql,
-- sql/fsck.sql, sql/metrics.sql).
ALTER TABLE setting ADD COLUMN delete_queue_cap bigint NOT NULL DEFAULT 0 CHECK (delete_queue_cap >= 0);
CREATE TABLE delete_usage (
    stripe smallint PRIMARY KEY,
    slices bigint   NOT NULL DEFAULT 0,
    bytes  bigint   NOT NULL DEFAULT 0
);
REVOKE ALL ON TABLE delete_usage FROM PUBLIC;
INSERT INTO delete_usage (stripe, slices, bytes)
SELECT 0, count(*), coalesce(sum(d.size), 0) FROM delslice d HAVING count(*) > 0;

-- Counts slices queued for deletion, or no longer, in delete_usage (the
-- row of the caller's stripe: any stripe's row may go below 0, their sum
-- is exact), from a statement's transition table: statement triggers on
-- delslice, so no writer of it can forget (a restore of a dump neither). (The version this transaction
-- wrote last of the row is updated directly: see _last_version.)
CREATE FUNCTION _count_delete_queue() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sign integer := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
    v_slices bigint;
    v_bytes bigint;
    v_stripe smallint;
    v_row text;
    v_last tid;
    v_ctid tid;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT count(*), coalesce(sum(q.size), 0) INTO v_slices, v_bytes FROM queued q;
    ELSE
        SELECT count(*), coalesce(sum(q.size), 0) INTO v_slices, v_bytes FROM unqueued q;
    END IF;
    IF v_slices = 0 THEN
        RETURN NULL;
    END IF;
    v_stripe := _stripe();
    v_row := v_stripe::text;
    v_last := _last_version('delete_usage', v_row);
    IF v_last IS NOT NULL THEN
        UPDATE delete_usage u SET slices = u.slices + v_sign * v_slices, bytes = u.bytes + v_sign * v_bytes
         WHERE u.ctid = v_last AND u.stripe = v_stripe
        RETURNING u.ctid INTO v_ctid;
    END IF;
    IF v_ctid IS NULL THEN
        INSERT INTO delete_usage AS u (stripe, slices, bytes) VALUES (v_stripe, v_sign * v_slices, v_sign * v_bytes)
            ON CONFLICT (stripe) DO UPDATE SET slices = u.slices + excluded.slices, bytes = u.bytes + excluded.bytes
        RETURNING u.ctid INTO v_ctid;
    END IF;
    PERFORM _note_version('delete_usage', v_row, v_ctid);
    RETURN NULL;
END
$$;

CREATE TRIGGER delslice_queued AFTER INSERT ON delslice REFERENCING NEW TABLE AS queued
    FOR EACH STATEMENT EXECUTE FUNCTION _count_delete_queue();
CREATE TRIGGER delslice_unqueued AFTER DELETE ON delslice REFERENCING OLD TABLE AS unqueued
    FOR EACH STATEMENT EXECUTE FUNCTION _count_delete_queue();

-- Whether more bytes wait for deletion than the volume's cap allows
-- (setting.delete_queue_cap; never with no cap).
CREATE FUNCTION _delete_queue_over_cap() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT s.delete_queue_cap > 0
       AND (SELECT coalesce(sum(u.bytes), 0) FROM delete_usage u) > s.delete_queue_cap
      FROM setting s
$$;

-- Slices whose last reference went away at least p_min_age ago, and at
-- least the volume's retain_deleted, for a mount or `jfs gc --delete` to
-- delete their objects (then forget_delslices); p_min_age counts for
-- nothing while more bytes wait than the volume's delete_queue_cap (the
-- oldest go first; a mount deletes them once their freeing commits are
-- durable). Several mounts may get the same rows; deleting an object
-- twice is harmless.
CREATE OR REPLACE FUNCTION pending_delslices(p_min_age interval DEFAULT '0', p_limit integer DEFAULT 1000)
RETURNS TABLE (slice_id bigint, size integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT d.slice_id, d.size FROM delslice d
     WHERE d.queued_at <= now() - greatest(CASE WHEN _delete_queue_over_cap() THEN interval '0' ELSE p_min_age END,
                                           (SELECT s.retain_deleted FROM setting s))
     ORDER BY d.queued_at, d.slice_id
     LIMIT least(greatest(p_limit, 1), 100000)
$$;

-- What waits for deletion: slices and bytes (the store still holds them:
-- statfs counts them as used), since when the oldest waits, and the
-- volume's cap (0: none) and retain_deleted. For jfs status.
CREATE FUNCTION delete_queue(OUT slices bigint, OUT bytes bigint, OUT oldest timestamptz, OUT cap bigint,
                             OUT retain interval)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT coalesce(sum(u.slices), 0)::bigint, coalesce(sum(u.bytes), 0)::bigint,
           (SELECT min(d.queued_at) FROM delslice d), s.delete_queue_cap, s.retain_deleted
      FROM setting s LEFT JOIN delete_usage u ON true
     GROUP BY s.delete_queue_cap, s.retain_deleted
$$;

-- Sets the cap on the bytes waiting for deletion (administration; 0: no
-- cap; NULL leaves it). Returns the setting.
CREATE FUNCTION set_delete_queue_cap(p_bytes bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_cap bigint;
BEGIN
    IF p_bytes < 0 THEN
        RAISE EXCEPTION 'jfs.set_delete_queue_cap: bytes >= 0 (0: no cap), not %', p_bytes
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET delete_queue_cap = coalesce(p_bytes, s.delete_queue_cap) RETURNING s.delete_queue_cap INTO v_cap;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_delete_queue_cap: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_cap;
END
$$;

-- Used and free space and inodes, as statfs(2) reports them: of the volume,
-- or, for a directory p_inode other than the root (a mount of a
-- subdirectory), of the nearest directory quota at or above it where that
-- quota has a limit (the volume's figures where it has none; never more
-- available than the volume has). Without a capacity the volume reports
-- 1 PiB in total, doubled while more than 80% of it is charged; without
-- an inode limit, used + 10 Mi free inodes, the free ones doubled alike.
-- The volume's used space counts the bytes waiting for deletion (the
-- store holds them until the mounts delete them).
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
    -- what waits for deletion still takes room in the store: df shows it
    v_used_space := v_used_space + (SELECT coalesce(sum(u.bytes), 0) FROM delete_usage u);
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


CREATE OR REPLACE FUNCTION fsck() RETURNS TABLE (problem text, inode bigint, detail text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    -- an entry must point at an existing node of the same type, in a directory
    SELECT 'dangling edge', e.inode, pg_catalog.format('entry %s in %s', _name_text(e.name), e.parent)
      FROM edge e WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = e.inode)
    UNION ALL
    SELECT 'edge type', e.inode, pg_catalog.format('entry says %s, node says %s', e.type, n.type)
      FROM edge e JOIN node n ON n.inode = e.inode WHERE e.type <> n.type
    UNION ALL
    SELECT 'edge parent', e.parent, pg_catalog.format('entry %s is in a non-directory', _name_text(e.name))
      FROM edge e LEFT JOIN node p ON p.inode = e.parent WHERE p.type IS DISTINCT FROM 2
    UNION ALL
    -- modes are permission bits, owners valid ids
    SELECT 'node attrs', n.inode, pg_catalog.format('mode %s, uid %s, gid %s', n.mode, n.uid, n.gid)
      FROM node n WHERE n.mode NOT BETWEEN 0 AND 4095 OR NOT _id_ok(n.uid) OR NOT _id_ok(n.gid)
    UNION ALL
    -- nlink of a non-directory = the entries naming it
    SELECT 'nlink', n.inode, pg_catalog.format('nlink %s, entries %s', n.nlink, c.k)
      FROM node n
      CROSS JOIN LATERAL (SELECT count(*) AS k FROM edge e WHERE e.inode = n.inode) c
     WHERE n.type <> 2 AND n.nlink <> c.k
    UNION ALL
    -- nlink of a directory = 2 + its subdirectories; one entry names it (the root none)
    SELECT 'dir nlink', n.inode, pg_catalog.format('nlink %s, subdirectories %s', n.nlink, c.k)
      FROM node n
      CROSS JOIN LATERAL (SELECT count(*) AS k FROM edge e WHERE e.parent = n.inode AND e.type = 2) c
     WHERE n.type = 2 AND n.nlink <> 2 + c.k
    UNION ALL
    SELECT 'dir entries', n.inode, pg_catalog.format('%s entries name it, parent column %s', c.k, n.parent)
      FROM node n
      CROSS JOIN LATERAL (SELECT count(*) AS k, min(e.parent) AS p FROM edge e WHERE e.inode = n.inode) c
     WHERE n.type = 2 AND n.inode <> 1 AND (c.k <> 1 OR c.p <> n.parent)
    UNION ALL
    -- every node is reachable from the root, unless unlinked and held open
    -- (an anti-join, not NOT IN: NOT IN over a big set is quadratic)
    SELECT 'unreachable', n.inode, pg_catalog.format('type %s, nlink %s', n.type, n.nlink)
      FROM node n
      LEFT JOIN (WITH RECURSIVE tree(inode) AS (
                     SELECT 1::bigint
                     UNION
                     SELECT e.inode FROM tree JOIN edge e ON e.parent = tree.inode
                 )
                 SELECT DISTINCT tree.inode FROM tree) r ON r.inode = n.inode
     WHERE n.inode <> 1 AND r.inode IS NULL
       AND NOT EXISTS (SELECT 1 FROM sustained s WHERE s.inode = n.inode AND n.nlink = 0)
       AND NOT EXISTS (SELECT 1 FROM unlinked u WHERE u.inode = n.inode AND n.nlink = 0)
    UNION ALL
    SELECT 'sustained', s.inode, pg_catalog.format('session %s: session or unlinked node missing', s.sid)
      FROM sustained s
     WHERE NOT EXISTS (SELECT 1 FROM session x WHERE x.sid = s.sid)
        OR NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = s.inode AND n.nlink = 0)
    UNION ALL
    SELECT 'unlinked', u.inode, 'kept for other mounts, but the file is missing or has names'
      FROM unlinked u
     WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = u.inode AND n.nlink = 0 AND n.type = 1)
    UNION ALL
    SELECT 'symlink', n.inode, 'symlink without target, or target of a non-symlink'
      FROM node n FULL JOIN symlink l ON l.inode = n.inode
     WHERE (n.type = 3) IS DISTINCT FROM (l.inode IS NOT NULL)
    UNION ALL
    SELECT 'xattr', x.inode, 'xattr of a missing node'
      FROM xattr x WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = x.inode)
    UNION ALL
    SELECT 'acl', a.inode, 'ACL entry of a missing node'
      FROM acl a WHERE NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = a.inode)
    UNION ALL
    -- slices belong to regular files; a file of length 0 has none
    SELECT 'slice owner', s.inode, pg_catalog.format('chunk %s seq %s', s.chunk_index, s.seq)
      FROM slice s LEFT JOIN node n ON n.inode = s.inode
     WHERE n.type IS DISTINCT FROM 1 OR n.length = 0
    UNION ALL
    -- a file's "used" (st_blocks) = the bytes its slices show, all within
    -- its length (counted up to the largest file, so data past the end
    -- shows as a difference too)
    SELECT 'used', n.inode, pg_catalog.format('used %s, slices show %s (length %s)', n.used, d.size, n.length)
      FROM node n CROSS JOIN LATERAL (SELECT _data_size(n.inode, 0, 144115188075855872) AS size) d
     WHERE n.type = 1 AND n.used <> d.size
    UNION ALL
    SELECT 'used', n.inode, pg_catalog.format('node of type %s with used %s', n.type, n.used)
      FROM node n WHERE n.type <> 1 AND n.used <> 0
    UNION ALL
    -- refs = the slice rows using the slice; no queued deletion still referenced
    SELECT 'slice refs', coalesce(r.slice_id, c.slice_id),
           pg_catalog.format('refs %s, slice rows %s', r.refs, coalesce(c.k, 0))
      FROM slice_ref r
      FULL JOIN (SELECT slice_id, count(*) AS k FROM slice WHERE slice_id <> 0 GROUP BY slice_id) c
        ON c.slice_id = r.slice_id
     WHERE r.refs IS DISTINCT FROM c.k
    UNION ALL
    SELECT 'delslice', d.slice_id, 'queued for deletion but still referenced'
      FROM delslice d WHERE EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = d.slice_id)
    UNION ALL
    -- the queue as counted (delete_usage) = the queue
    SELECT 'delete usage', NULL::bigint,
           pg_catalog.format('counted %s slices / %s bytes, recorded %s / %s', c.slices, c.bytes, u.slices, u.bytes)
      FROM (SELECT count(*)::bigint AS slices, coalesce(sum(d.size), 0)::bigint AS bytes FROM delslice d) c,
           (SELECT coalesce(sum(x.slices), 0)::bigint AS slices, coalesce(sum(x.bytes), 0)::bigint AS bytes
              FROM delete_usage x) u
     WHERE c.slices <> u.slices OR c.bytes <> u.bytes
    UNION ALL
    -- every quota's counters = a recount of the namespace
    SELECT 'usage', q.key, pg_catalog.format('%s quota %s: counted %s inodes / %s bytes, recorded %s / %s',
                                             q.kind, q.key, c.inodes, c.space, u.inodes, u.space)
      FROM quota q
      CROSS JOIN LATERAL _quota_count(q.kind, q.key) c
      CROSS JOIN LATERAL (SELECT coalesce(sum(x.inodes), 0) AS inodes, coalesce(sum(x.space), 0) AS space
                            FROM quota_usage x WHERE x.kind = q.kind AND x.key = q.key) u
     WHERE c.inodes <> u.inodes OR c.space <> u.space
    UNION ALL
    -- dir_stats = a recount of each directory's entries
    SELECT 'dir_stats', coalesce(c.parent, r.inode),
           pg_catalog.format('counted %s entries / %s bytes / length %s, recorded %s / %s / %s',
                             coalesce(c.inodes, 0), coalesce(c.space, 0), coalesce(c.length, 0),
                             coalesce(r.inodes, 0), coalesce(r.space, 0), coalesce(r.length, 0))
      FROM (SELECT e.parent, count(*) AS inodes, sum(_node_space(n.type, n.length)) AS space, sum(n.length) AS length
              FROM edge e JOIN node n ON n.inode = e.inode GROUP BY e.parent) c
      FULL JOIN (SELECT d.inode, sum(d.inodes) AS inodes, sum(d.space) AS space, sum(d.length) AS length
                   FROM dir_stats d GROUP BY d.inode) r
        ON r.inode = c.parent
     WHERE coalesce(c.inodes, 0) <> coalesce(r.inodes, 0) OR coalesce(c.space, 0) <> coalesce(r.space, 0)
        OR coalesce(c.length, 0) <> coalesce(r.length, 0)
    UNION ALL
    -- a directory's qroot is the nearest quota root at or above it
    SELECT 'qroot', n.inode, pg_catalog.format('qroot %s, nearest quota root %s', n.qroot, _nearest_quota_root(n.inode))
      FROM node n WHERE n.type = 2 AND n.qroot <> _nearest_quota_root(n.inode)
    UNION ALL
    -- a directory quota's chain is it and the quota roots above it, nearest first
    SELECT 'quota_chain', q.key, pg_catalog.format('chain %s, walked %s', q.chain, _walked_chain(q.key))
      FROM quota q WHERE q.kind = 'dir' AND q.chain IS DISTINCT FROM _walked_chain(q.key)
$$;

-- Rebuilds what follows from the namespace and the slices wherever it
-- differs (what fsck reports as nlink, dir nlink, used, slice refs, delslice,
-- usage and dir_stats): link counts from the entries, each file's used bytes
-- from its slices, slice references from the slice rows (a slice no row
-- names any more is queued for deletion, one still named leaves the
-- queue), quota usage and dir_stats from a recount. What needs a person
-- (dangling entries, unreachable nodes) it leaves alone. Returns how many
-- rows of each kind it changed. Metadata changes wait while it runs.
CREATE OR REPLACE FUNCTION fsck_repair() RETURNS TABLE (repaired text, changed bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    LOCK TABLE node, edge, slice, slice_ref, delslice IN EXCLUSIVE MODE;
    repaired := 'nlink';
    UPDATE node n SET nlink = c.k
      FROM (SELECT e.inode, count(*)::integer AS k FROM edge e WHERE e.type <> 2 GROUP BY e.inode) c
     WHERE n.inode = c.inode AND n.type <> 2 AND n.nlink <> c.k;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'dir nlink';
    UPDATE node n SET nlink = c.k
      FROM (SELECT d.inode, 2 + (SELECT count(*) FROM edge e WHERE e.parent = d.inode AND e.type = 2)::integer AS k
              FROM node d WHERE d.type = 2) c
     WHERE n.inode = c.inode AND n.nlink <> c.k;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'used';
    UPDATE node n SET used = d.size
      FROM (SELECT f.inode, _data_size(f.inode, 0, 144115188075855872) AS size FROM node f WHERE f.type = 1) d
     WHERE n.inode = d.inode AND n.used <> d.size;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'slice refs';
    WITH counted AS (
        SELECT s.slice_id, max(s.slice_size) AS size, count(*)::integer AS k FROM slice s
         WHERE s.slice_id <> 0 GROUP BY s.slice_id
    ), fixed AS (
        INSERT INTO slice_ref AS r (slice_id, size, refs) SELECT c.slice_id, c.size, c.k FROM counted c
            ON CONFLICT (slice_id) DO UPDATE SET refs = excluded.refs WHERE r.refs <> excluded.refs
        RETURNING 1
    )
    SELECT count(*) INTO changed FROM fixed;
    WITH gone AS (
        DELETE FROM slice_ref r WHERE NOT EXISTS (SELECT 1 FROM slice s WHERE s.slice_id = r.slice_id)
        RETURNING r.slice_id, r.size
    ), queued AS (
        INSERT INTO delslice (slice_id, size) SELECT g.slice_id, g.size FROM gone g ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT changed + count(*) INTO changed FROM queued;
    RETURN NEXT;
    repaired := 'delslice';
    DELETE FROM delslice d WHERE EXISTS (SELECT 1 FROM slice_ref r WHERE r.slice_id = d.slice_id);
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN NEXT;
    repaired := 'delete usage';
    SELECT count(*) INTO changed
      FROM (SELECT count(*)::bigint AS slices, coalesce(sum(d.size), 0)::bigint AS bytes FROM delslice d) c,
           (SELECT coalesce(sum(x.slices), 0)::bigint AS slices, coalesce(sum(x.bytes), 0)::bigint AS bytes
              FROM delete_usage x) u
     WHERE c.slices <> u.slices OR c.bytes <> u.bytes;
    IF changed > 0 THEN
        DELETE FROM delete_usage;
        INSERT INTO delete_usage (stripe, slices, bytes) SELECT 0, count(*), coalesce(sum(d.size), 0) FROM delslice d;
    END IF;
    RETURN NEXT;
    repaired := 'usage and dir_stats';
    SELECT count(*) FILTER (WHERE c.repaired) INTO changed FROM check_quota(NULL, NULL, true) c;
    RETURN NEXT;
END
$$;

REVOKE EXECUTE ON FUNCTION _count_delete_queue(), _delete_queue_over_cap(), delete_queue(), set_delete_queue_cap(bigint) FROM PUBLIC;

CREATE OR REPLACE VIEW metrics AS
SELECT f.metric, ''::text AS key, f.value
  FROM usage u
 CROSS JOIN LATERAL (VALUES ('capacity_bytes'::text, u.capacity::float8), ('used_bytes', u.used_space),
                            ('max_inodes', u.max_inodes), ('used_inodes', u.used_inodes)) f (metric, value)
UNION ALL
SELECT 'quota_' || f.metric, q.kind || ':' || coalesce(q.path, q.uid::text, q.gid::text, '?'), f.value
  FROM quotas q
 CROSS JOIN LATERAL (VALUES ('max_bytes', q.max_space::float8), ('used_bytes', q.used_space),
                            ('max_inodes', q.max_inodes), ('used_inodes', q.used_inodes)) f (metric, value)
 WHERE q.kind <> 'fs'
UNION ALL
SELECT f.metric, t.tier::text, f.value
  FROM tier_usage t
 CROSS JOIN LATERAL (VALUES ('tier_files', t.files::float8), ('tier_bytes', t.bytes)) f (metric, value)
UNION ALL
SELECT f.metric, '', f.value
  FROM (SELECT count(*) AS sessions, extract(epoch FROM now() - min(s.heartbeat)) AS oldest FROM session s) s
 CROSS JOIN LATERAL (VALUES ('sessions', s.sessions::float8),
                            ('oldest_heartbeat_seconds', coalesce(s.oldest, 0)::float8)) f (metric, value)
UNION ALL
SELECT 'trash_entries', '', count(*)
  FROM edge h JOIN edge e ON e.parent = h.inode
 WHERE h.parent = _trash_inode()
UNION ALL SELECT 'locks', '', count(*) FROM plock
UNION ALL
SELECT f.metric, '', f.value
  FROM (SELECT coalesce(sum(u.slices), 0) AS slices, coalesce(sum(u.bytes), 0) AS bytes FROM delete_usage u) d
 CROSS JOIN LATERAL (VALUES ('delete_queue_slices', d.slices::float8),
                            ('delete_queue_bytes', d.bytes::float8)) f (metric, value);

-- ---------------------------------------------------------------------------
-- Reads move atimes as a mount's --atime-mode says (sql/setattr.sql);
-- read-only roles may not (sql/security.sql). Client roles get it when
-- jfs.grant_client runs again.
-- A read of node p_inode (or a listing of it), now: its atime moves to now
-- when p_strict (strictatime), unless it moved less than a second ago;
-- else (relatime, as Linux's) only when it is not after the node's mtime
-- or ctime, or is a day old. The ctime stays, and nothing is logged for
-- other mounts (an atime is as loose as that everywhere). Its commit is
-- asynchronous: no fsync vouches for an atime. Returns the atime (NULL:
-- no such node).
CREATE FUNCTION touch_atime(p_inode bigint, p_strict boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_atime bigint;
BEGIN
    PERFORM _begin();
    PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
    UPDATE node n SET atime = v_now
     WHERE n.inode = p_inode AND n.atime < v_now - 1000000000
       AND (p_strict OR n.atime <= n.mtime OR n.atime <= n.ctime OR n.atime <= v_now - 86400000000000)
    RETURNING n.atime INTO v_atime;
    IF NOT FOUND THEN
        SELECT n.atime INTO v_atime FROM node n WHERE n.inode = p_inode;
    END IF;
    RETURN v_atime;
END
$$;

REVOKE EXECUTE ON FUNCTION touch_atime(bigint, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION write_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['mknod', 'symlink', 'link', 'unlink', 'rmdir', 'rename', 'setattr', 'set_acl',
             'setxattr', 'removexattr', 'write_slice', 'write_slices', 'zero_range', 'copy_range',
             'batch_unlink', 'rmr', 'clone_node', 'clone', 'compact_chunk', 'restore', 'trash_purge',
             'changelog_prune', 'free_unlinked', 'forget_delslices', 'alloc_ids', 'backup_claim',
             'backup_release', 'session_cleanup', 'take_lease', 'lease_unlink', 'lease_commit',
             'mknod_with_slices', 'want_lease', 'touch_atime', 'create_many']::name[];


-- ---------------------------------------------------------------------------
-- Many entries in one call (sql/namespace.sql). Client roles get it when
-- jfs.grant_client runs again.
-- Makes every name of p_names in directory p_parent, in one call and one
-- transaction: regular files (p_type 1) or directories (2) of mode p_mode
-- less p_umask, owned by p_uid:p_gid, each as mknod makes it (a
-- directory's default ACL, setgid bit, the caller's squash, quotas: a name
-- refused is refused alone, with its errno). What a script that makes
-- many entries from SQL wants (JuiceFS users ask for it, #7278); at most
-- 100,000 names a call. Returns each name, in order, with its errno and
-- inode.
CREATE FUNCTION create_many(p_parent bigint, p_names bytea[], p_type integer DEFAULT 1,
                            p_mode integer DEFAULT 420, p_uid bigint DEFAULT 0, p_gid bigint DEFAULT 0,
                            p_umask integer DEFAULT 0)
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_type IS NULL OR p_type NOT IN (1, 2) THEN
        RAISE EXCEPTION 'jfs.create_many: makes files (type 1) or directories (2), not type %', p_type
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF coalesce(cardinality(p_names), 0) > 100000 THEN
        RAISE EXCEPTION 'jfs.create_many: at most 100000 names a call, not %', cardinality(p_names)
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    RETURN QUERY
        SELECT u.name, m.errno, CASE WHEN m.errno = 0 THEN m.inode END
          FROM unnest(p_names) WITH ORDINALITY u(name, i)
         CROSS JOIN LATERAL mknod(p_parent, u.name, p_type, p_mode, p_uid, p_gid, 0, NULL, NULL, p_umask) m
         ORDER BY u.i;
END
$$;

REVOKE EXECUTE ON FUNCTION create_many(bigint, bytea[], integer, integer, bigint, bigint, integer) FROM PUBLIC;
