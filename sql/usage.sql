-- Usage accounting, done by the procedure that makes a change, in its
-- transaction (no client keeps counts):
--   per node   the volume ('fs', 0) and the owner's quotas ('user', uid) and
--              ('group', gid): a node counts one inode and its space once,
--              however many names it has;
--   per entry  dir_stats of the directory holding the entry and every
--              directory quota ('dir', r) at or above that directory: a file
--              with two names in two directories counts under both.
-- Space is whole 4 KiB units of a file's length (at least one), one unit for
-- the other types (_node_space). Counters are striped: a transaction writes
-- the stripe of its backend (16 rows per quota and per directory), readers sum.
--
-- Limits are checked, before anything changes, when usage grows: errno 28
-- ENOSPC for the volume, 122 EDQUOT for the others. Each stripe of a limited
-- quota holds a share: it may grow up to it without looking at the other
-- stripes, and the shares never add up to more than the limit. That makes
-- the usual check free (the UPDATE of the stripe does it). A stripe that
-- would pass its share takes the slow path: it locks all the quota's stripes
-- (waiting for transactions in flight on them), checks the exact sum, and
-- shares what is left equally again. So a limit is never passed, even by
-- many writers at once; near it, they take turns.

-- This backend's stripe: one of 16, or of jfs.stripes (a setting, 1..16;
-- 1 turns striping off, for comparisons).
CREATE FUNCTION _stripe() RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (pg_catalog.pg_backend_pid()
            % least(greatest(coalesce(nullif(pg_catalog.current_setting('jfs.stripes', true), '')::integer, 16), 1), 16)
           )::smallint
$$;

-- Space charged for a node of type p_type and length p_length.
CREATE FUNCTION _node_space(p_type smallint, p_length bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN p_type = 1 THEN _space(p_length) ELSE 4096 END $$;

-- The directory quotas charged for an entry of a directory whose qroot is
-- p_qroot: that root, then the roots above it, nearest first.
CREATE FUNCTION _quota_roots(p_qroot bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_roots bigint[] := '{}';
    v_root bigint := coalesce(p_qroot, 0);
BEGIN
    WHILE v_root > 0 AND cardinality(v_roots) < 10000 LOOP
        v_roots := v_roots || v_root;
        SELECT p.qroot INTO v_root FROM node r JOIN node p ON p.inode = r.parent
         WHERE r.inode = v_root AND r.inode <> 1;
        IF NOT FOUND THEN
            v_root := 0;
        END IF;
    END LOOP;
    RETURN v_roots;
END
$$;

-- Adds to the direct-children figures of directory p_dir.
CREATE FUNCTION _dir_stats_add(p_dir bigint, p_inodes bigint, p_space bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
BEGIN
    UPDATE dir_stats d SET space = d.space + p_space, inodes = d.inodes + p_inodes
     WHERE d.inode = p_dir AND d.stripe = v_stripe;
    IF NOT FOUND THEN
        INSERT INTO dir_stats AS d (inode, stripe, space, inodes) VALUES (p_dir, v_stripe, p_space, p_inodes)
            ON CONFLICT (inode, stripe) DO UPDATE SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes;
    END IF;
END
$$;

-- Sets the shares of quota (p_kind, p_key): each stripe may grow by an
-- equal part of what is left under the limit after p_inodes/p_space more.
-- The caller holds the quota's stripes locked (or the node table).
CREATE FUNCTION _quota_reshare(p_kind text, p_key bigint, p_inodes bigint, p_space bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q record;
    u record;
BEGIN
    SELECT l.max_space, l.max_inodes INTO q FROM quota l WHERE l.kind = p_kind AND l.key = p_key;
    SELECT coalesce(sum(x.space), 0) AS space, coalesce(sum(x.inodes), 0) AS inodes INTO u
      FROM quota_usage x WHERE x.kind = p_kind AND x.key = p_key;
    UPDATE quota_usage x
       SET share_space = CASE WHEN q.max_space > 0
                              THEN x.space + greatest(q.max_space - u.space - greatest(p_space, 0), 0) / 16 END,
           share_inodes = CASE WHEN q.max_inodes > 0
                               THEN x.inodes + greatest(q.max_inodes - u.inodes - greatest(p_inodes, 0), 0) / 16 END
     WHERE x.kind = p_kind AND x.key = p_key;
END
$$;

-- Charges p_inodes / p_space to the quotas named (the volume's when p_fs,
-- user p_uid's and group p_gid's when not NULL, the directory quotas p_roots:
-- a root listed n times is charged n times) and to dir_stats of p_dir (0:
-- none). With p_check, growth that would pass a limit is refused: nothing
-- changes and the errno comes back (28 for the volume, 122 for the others).
--
-- The quotas' rows of this backend's stripe are updated one by one in
-- (kind, key) order, the one lock order of every transaction: updating them
-- in one statement would lock them in the table's physical order, which
-- differs between transactions as rows move, and two creators sharing a
-- stripe would deadlock. A row that would pass its share is not updated; for
-- that quota (in the same order) every stripe is locked, the exact sum
-- decides, and the shares are dealt again. So the usual charge is one
-- UPDATE per quota, each an index probe.
CREATE FUNCTION _charge(p_fs boolean, p_uid bigint, p_gid bigint, p_roots bigint[], p_dir bigint,
                        p_inodes bigint, p_space bigint, p_check boolean) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
    v_check boolean := p_check AND (p_inodes > 0 OR p_space > 0);
    t record;
    q record;
    u record;
    v_done text[] := '{}';
    v_done_n bigint[] := '{}';
BEGIN
    IF p_uid IS NULL AND p_gid IS NULL AND coalesce(cardinality(p_roots), 0) = 0 AND NOT v_check THEN
        -- no quota but the volume's counters, nothing to check: two plain updates
        IF p_fs THEN
            UPDATE quota_usage x SET inodes = x.inodes + p_inodes, space = x.space + p_space
             WHERE x.kind = 'fs' AND x.key = 0 AND x.stripe = v_stripe;
        END IF;
        IF p_dir > 0 THEN
            PERFORM _dir_stats_add(p_dir, p_inodes, p_space);
        END IF;
        RETURN 0;
    END IF;
    FOR t IN
        SELECT x.kind, x.key, x.n
          FROM (SELECT 'fs'::text AS kind, 0::bigint AS key, 1::bigint AS n WHERE p_fs
                UNION ALL SELECT 'user', p_uid, 1 WHERE p_uid IS NOT NULL
                UNION ALL SELECT 'group', p_gid, 1 WHERE p_gid IS NOT NULL
                UNION ALL SELECT 'dir', k, count(*) FROM unnest(p_roots) k GROUP BY k) x
         ORDER BY x.kind, x.key
    LOOP
        UPDATE quota_usage x SET inodes = x.inodes + p_inodes * t.n, space = x.space + p_space * t.n
         WHERE x.kind = t.kind AND x.key = t.key AND x.stripe = v_stripe
           AND (NOT v_check
                OR ((p_space <= 0 OR x.share_space IS NULL OR x.space + p_space * t.n <= x.share_space)
                    AND (p_inodes <= 0 OR x.share_inodes IS NULL OR x.inodes + p_inodes * t.n <= x.share_inodes)));
        IF NOT FOUND AND v_check THEN
            SELECT l.max_space, l.max_inodes INTO q FROM quota l WHERE l.kind = t.kind AND l.key = t.key;
            IF FOUND THEN
                -- past this stripe's share: every stripe of it, so no other
                -- transaction changes its usage now
                PERFORM 1 FROM quota_usage x WHERE x.kind = t.kind AND x.key = t.key ORDER BY x.stripe FOR UPDATE;
                SELECT coalesce(sum(x.space), 0) AS space, coalesce(sum(x.inodes), 0) AS inodes INTO u
                  FROM quota_usage x WHERE x.kind = t.kind AND x.key = t.key;
                IF (q.max_space > 0 AND p_space > 0 AND u.space + p_space * t.n > q.max_space)
                   OR (q.max_inodes > 0 AND p_inodes > 0 AND u.inodes + p_inodes * t.n > q.max_inodes) THEN
                    -- refused: take back what the quotas before it got
                    UPDATE quota_usage x SET inodes = x.inodes - p_inodes * d.n, space = x.space - p_space * d.n
                      FROM unnest(v_done, v_done_n) d(quota, n)
                     WHERE x.kind || ':' || x.key = d.quota AND x.stripe = v_stripe;
                    RETURN CASE WHEN t.kind = 'fs' THEN 28 ELSE 122 END;
                END IF;
                PERFORM _quota_reshare(t.kind, t.key, p_inodes * t.n, p_space * t.n);
                UPDATE quota_usage x SET inodes = x.inodes + p_inodes * t.n, space = x.space + p_space * t.n
                 WHERE x.kind = t.kind AND x.key = t.key AND x.stripe = v_stripe;
            END IF;
        END IF;
        IF v_check THEN
            v_done := v_done || (t.kind || ':' || t.key);
            v_done_n := v_done_n || t.n;
        END IF;
    END LOOP;
    IF p_dir > 0 THEN
        PERFORM _dir_stats_add(p_dir, p_inodes, p_space);
    END IF;
    RETURN 0;
END
$$;

-- Charges what a new node (p_node: for the volume and, when p_owners, its
-- owner's quotas) and a new entry of directory p_dir (whose qroot is
-- p_qroot) add. When p_limits (some quota has a limit) every limit is
-- checked first, and nothing changes when one would be passed: its errno is
-- returned. p_limits and p_owners are setting.quota_limits/owner_quotas,
-- read by the caller after it locked its rows. (A one-expression SQL
-- function: PostgreSQL inlines it into the caller's statement, which saves
-- a PL/pgSQL call on every create.)
CREATE FUNCTION _charge_new(p_node boolean, p_uid bigint, p_gid bigint, p_dir bigint, p_qroot bigint,
                            p_inodes bigint, p_space bigint, p_limits boolean, p_owners boolean) RETURNS integer
LANGUAGE sql AS $$
    SELECT _charge(p_node, CASE WHEN p_node AND p_owners THEN p_uid END, CASE WHEN p_node AND p_owners THEN p_gid END,
                   CASE WHEN p_qroot > 0 THEN _quota_roots(p_qroot) ELSE '{}' END, p_dir, p_inodes, p_space, p_limits)
$$;

-- Uncharges a removed entry of directory p_dir (qroot p_qroot): its
-- dir_stats and the directory quotas above it. No check.
CREATE FUNCTION _uncharge_entry(p_dir bigint, p_qroot bigint, p_inodes bigint, p_space bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _charge(false, NULL, NULL, CASE WHEN p_qroot > 0 THEN _quota_roots(p_qroot) ELSE '{}' END, p_dir,
                    -p_inodes, -p_space, false);
END
$$;

-- Charges a change of p_space in the space of file p_inode (owned by
-- p_uid/p_gid): to the volume and the owner's quotas once, and to every
-- entry naming it (dir_stats and the directory quotas above each). When
-- p_check and the space grows, limits are checked first and the errno of
-- the one that would be passed is returned, with nothing changed.
CREATE FUNCTION _charge_space(p_inode bigint, p_uid bigint, p_gid bigint, p_space bigint, p_check boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_dirs bigint[];
    v_roots bigint[] := '{}';
    e record;
    v_errno integer;
    f record;
BEGIN
    IF p_space = 0 THEN
        RETURN 0;
    END IF;
    SELECT quota_limits, owner_quotas INTO f FROM setting;
    FOR e IN SELECT ed.parent, p.qroot FROM edge ed JOIN node p ON p.inode = ed.parent WHERE ed.inode = p_inode LOOP
        v_dirs := v_dirs || e.parent;
        IF e.qroot > 0 THEN
            v_roots := v_roots || _quota_roots(e.qroot);
        END IF;
    END LOOP;
    -- the volume and owners once, every entry's directory quotas
    v_errno := _charge(true, CASE WHEN f.owner_quotas THEN p_uid END, CASE WHEN f.owner_quotas THEN p_gid END,
                       v_roots, 0, 0, p_space, p_check AND f.quota_limits);
    IF v_errno = 0 AND v_dirs IS NOT NULL THEN
        PERFORM _dir_stats_add(d, 0, p_space) FROM unnest(v_dirs) d;
    END IF;
    RETURN v_errno;
END
$$;

-- Uncharges removed entries, set-based: entry i was in directory
-- p_parents[i] and counted p_spaces[i]. The directory quotas above them
-- (grouped by qroot) and dir_stats of each directory lose them, in the
-- lock order of _charge: quota rows, then dir_stats.
CREATE FUNCTION _uncharge_entries(p_parents bigint[], p_spaces bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
    v_roots bigint[] := '{}';
    v_inodes bigint[] := '{}';
    v_space bigint[] := '{}';
    g record;
BEGIN
    IF p_parents IS NULL THEN
        RETURN;
    END IF;
    -- every quota root above the entries, with what it loses
    FOR g IN
        SELECT p.qroot, count(*) AS n, sum(e.space) AS space
          FROM unnest(p_parents, p_spaces) e(parent, space) JOIN node p ON p.inode = e.parent
         WHERE p.qroot > 0
         GROUP BY p.qroot
    LOOP
        SELECT v_roots || r.roots, v_inodes || array_fill(g.n, ARRAY[cardinality(r.roots)]),
               v_space || array_fill(g.space, ARRAY[cardinality(r.roots)])
          INTO v_roots, v_inodes, v_space
          FROM (SELECT _quota_roots(g.qroot) AS roots) r;
    END LOOP;
    FOR g IN
        SELECT r.root, sum(r.n) AS n, sum(r.space) AS space
          FROM unnest(v_roots, v_inodes, v_space) r(root, n, space)
         GROUP BY r.root ORDER BY r.root
    LOOP
        UPDATE quota_usage x SET inodes = x.inodes - g.n, space = x.space - g.space
         WHERE x.kind = 'dir' AND x.key = g.root AND x.stripe = v_stripe;
    END LOOP;
    INSERT INTO dir_stats AS d (inode, stripe, space, inodes)
    SELECT e.parent, v_stripe, -sum(e.space), -count(*)
      FROM unnest(p_parents, p_spaces) e(parent, space) GROUP BY e.parent ORDER BY e.parent
        ON CONFLICT (inode, stripe) DO UPDATE SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes;
END
$$;

-- Uncharges removed nodes from the volume and their owners' quotas,
-- set-based (node i was owned by p_uids[i], p_gids[i] and counted
-- p_spaces[i]), row by row in the lock order of _charge.
CREATE FUNCTION _uncharge_nodes(p_uids bigint[], p_gids bigint[], p_spaces bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
    v_owners boolean;
    g record;
BEGIN
    IF p_uids IS NULL THEN
        RETURN;
    END IF;
    SELECT owner_quotas INTO v_owners FROM setting;
    FOR g IN
        SELECT x.kind, x.key, x.n, x.space
          FROM (SELECT 'fs'::text AS kind, 0::bigint AS key, count(*) AS n, sum(n.space) AS space
                  FROM unnest(p_spaces) n(space)
                UNION ALL
                SELECT 'user', n.uid, count(*), sum(n.space) FROM unnest(p_uids, p_spaces) n(uid, space)
                 WHERE v_owners GROUP BY n.uid
                UNION ALL
                SELECT 'group', n.gid, count(*), sum(n.space) FROM unnest(p_gids, p_spaces) n(gid, space)
                 WHERE v_owners GROUP BY n.gid) x
         ORDER BY x.kind, x.key
    LOOP
        UPDATE quota_usage x SET inodes = x.inodes - g.n, space = x.space - g.space
         WHERE x.kind = g.kind AND x.key = g.key AND x.stripe = v_stripe;
    END LOOP;
END
$$;

-- Forgets directories that are gone: their dir_stats and their quotas.
CREATE FUNCTION _forget_dirs(p_dirs bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dir_stats WHERE inode = ANY (p_dirs);
    IF EXISTS (SELECT 1 FROM quota WHERE kind = 'dir' AND key = ANY (p_dirs)) THEN
        DELETE FROM quota WHERE kind = 'dir' AND key = ANY (p_dirs);
        DELETE FROM quota_usage WHERE kind = 'dir' AND key = ANY (p_dirs);
    END IF;
END
$$;

-- The usage of everything below directory p_dir (its subtree, without p_dir's
-- own entry): a quota root's counters, else the sum of dir_stats over its
-- subtree's directories.
CREATE FUNCTION _subtree_usage(p_dir bigint, OUT inodes bigint, OUT space bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM quota q WHERE q.kind = 'dir' AND q.key = p_dir) THEN
        SELECT coalesce(sum(x.inodes), 0), coalesce(sum(x.space), 0) INTO inodes, space
          FROM quota_usage x WHERE x.kind = 'dir' AND x.key = p_dir;
        RETURN;
    END IF;
    WITH RECURSIVE dirs(inode) AS (
        SELECT p_dir
        UNION ALL
        SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2
    )
    SELECT coalesce(sum(s.inodes), 0), coalesce(sum(s.space), 0) INTO inodes, space
      FROM dir_stats s WHERE s.inode IN (SELECT d.inode FROM dirs d);
END
$$;

-- Moves entry p_node (type p_type, length p_length) from directory p_from to
-- directory p_to, as rename does: dir_stats of both, and, when they are under
-- different quota roots, the entry and (for a directory) everything below it
-- from the old roots to the new ones (checked against the new roots' limits
-- first: errno and no change when it does not fit), and the subtree's qroot.
CREATE FUNCTION _move_entry(p_node bigint, p_type smallint, p_length bigint, p_from bigint, p_to bigint)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_space bigint := _node_space(p_type, p_length);
    v_from_root bigint;
    v_to_root bigint;
    v_sub record;
    v_inodes bigint := 1;
    v_errno integer;
BEGIN
    IF p_from = p_to THEN
        RETURN 0;
    END IF;
    SELECT qroot INTO v_from_root FROM node WHERE inode = p_from;
    SELECT qroot INTO v_to_root FROM node WHERE inode = p_to;
    IF v_from_root <> v_to_root THEN
        IF p_type = 2 THEN
            v_sub := _subtree_usage(p_node);
            v_inodes := v_inodes + v_sub.inodes;
            v_space := v_space + v_sub.space;
        END IF;
        v_errno := _charge(false, NULL, NULL, _quota_roots(v_to_root), 0, v_inodes, v_space,
                           (SELECT quota_limits FROM setting));
        IF v_errno <> 0 THEN
            RETURN v_errno;
        END IF;
        PERFORM _charge(false, NULL, NULL, _quota_roots(v_from_root), 0, -v_inodes, -v_space, false);
        IF p_type = 2 THEN
            -- the moved directories that took their qroot from above now take the new one
            WITH RECURSIVE dirs(inode) AS (
                SELECT p_node
                UNION ALL
                SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2
                 WHERE NOT EXISTS (SELECT 1 FROM quota q WHERE q.kind = 'dir' AND q.key = e.inode)
            )
            UPDATE node n SET qroot = v_to_root
             WHERE n.inode IN (SELECT d.inode FROM dirs d) AND n.qroot = v_from_root;
        END IF;
    END IF;
    PERFORM _dir_stats_add(p_from, -1, -_node_space(p_type, p_length));
    PERFORM _dir_stats_add(p_to, 1, _node_space(p_type, p_length));
    RETURN 0;
END
$$;
