-- Charging and uncharging usage: the procedure that makes a change charges
-- the volume, the owners' quotas, the directory quotas above the entry and
-- the directory's figures, in its own transaction, checking limits first
-- (each stripe within its share, the slow path sharing again). See
-- usage.sql for the accounting as a whole.

-- Deals the shares of quota (p_kind, p_key) again: each stripe may grow by
-- an equal part of what is left under the limit after p_inodes/p_space
-- more. When those would pass the limit nothing changes and the errno comes
-- back (28 for the volume, 122 for the others); 0 otherwise, and for no
-- such quota. The caller holds the quota's stripes locked (or the node table).
CREATE FUNCTION _quota_reshare(p_kind text, p_key bigint, p_inodes bigint, p_space bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    q record;
    u record;
BEGIN
    SELECT l.max_space, l.max_inodes INTO q FROM quota l WHERE l.kind = p_kind AND l.key = p_key;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT coalesce(sum(x.space), 0) AS space, coalesce(sum(x.inodes), 0) AS inodes INTO u
      FROM quota_usage x WHERE x.kind = p_kind AND x.key = p_key;
    IF (q.max_space > 0 AND p_space > 0 AND u.space + p_space > q.max_space)
       OR (q.max_inodes > 0 AND p_inodes > 0 AND u.inodes + p_inodes > q.max_inodes) THEN
        RETURN CASE WHEN p_kind = 'fs' THEN 28 ELSE 122 END;
    END IF;
    UPDATE quota_usage x
       SET share_space = CASE WHEN q.max_space > 0
                              THEN x.space + greatest(q.max_space - u.space - greatest(p_space, 0), 0) / 16 END,
           share_inodes = CASE WHEN q.max_inodes > 0
                               THEN x.inodes + greatest(q.max_inodes - u.inodes - greatest(p_inodes, 0), 0) / 16 END
     WHERE x.kind = p_kind AND x.key = p_key;
    RETURN 0;
END
$$;

-- The quotas _charge names, in (kind, key) order - directory roots by key,
-- the volume, the group, the user - with how many times each is charged.
CREATE FUNCTION _quota_list(p_fs boolean, p_uid bigint, p_gid bigint, p_roots bigint[])
RETURNS TABLE (pos bigint, kind text, key bigint, n bigint)
LANGUAGE sql STABLE AS $$
    SELECT row_number() OVER (ORDER BY x.kind, x.key), x.kind, x.key, x.n
      FROM (SELECT 'dir'::text AS kind, k AS key, count(*) AS n FROM unnest(p_roots) k GROUP BY k
            UNION ALL SELECT 'fs', 0, 1 WHERE p_fs
            UNION ALL SELECT 'group', p_gid, 1 WHERE p_gid IS NOT NULL
            UNION ALL SELECT 'user', p_uid, 1 WHERE p_uid IS NOT NULL) x
     ORDER BY x.kind, x.key
$$;

-- Charges p_inodes / p_space to quota (p_kind, p_key) when this stripe's
-- share is not enough: every stripe of it is locked (in stripe order, so no
-- other transaction changes its usage now), the exact sum decides, and the
-- shares are dealt again. Returns the errno when the limit would be passed
-- (nothing changed), 0 when charged or when there is no such quota.
CREATE FUNCTION _charge_exact(p_kind text, p_key bigint, p_inodes bigint, p_space bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_errno integer;
BEGIN
    PERFORM 1 FROM quota_usage x WHERE x.kind = p_kind AND x.key = p_key ORDER BY x.stripe FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    v_errno := _quota_reshare(p_kind, p_key, p_inodes, p_space);
    IF v_errno = 0 THEN
        UPDATE quota_usage x SET inodes = x.inodes + p_inodes, space = x.space + p_space
         WHERE x.kind = p_kind AND x.key = p_key AND x.stripe = _stripe();
    END IF;
    RETURN v_errno;
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
CREATE FUNCTION _charge(p_fs boolean, p_uid bigint, p_gid bigint, p_roots bigint[], p_dir bigint,
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

-- Uncharges a removed entry of directory p_dir (qroot p_qroot; of length
-- p_length): its dir_stats and the directory quotas above it. No check.
CREATE FUNCTION _uncharge_entry(p_dir bigint, p_qroot bigint, p_inodes bigint, p_space bigint,
                                p_length bigint DEFAULT 0) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _charge(false, NULL, NULL, _quota_roots(p_qroot), p_dir, -p_inodes, -p_space, false, -p_length);
END
$$;

-- Charges a change of p_space in the space of file p_inode (owned by
-- p_uid/p_gid) and of p_length in its length: the space to the volume and
-- the owner's quotas once, and both to every entry naming it (dir_stats,
-- and the space to the directory quotas above each). When p_check and the
-- space grows, limits are checked first and the errno of the one that
-- would be passed is returned, with nothing changed.
CREATE FUNCTION _charge_space(p_inode bigint, p_uid bigint, p_gid bigint, p_space bigint, p_check boolean,
                              p_length bigint DEFAULT 0)
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
        IF p_length <> 0 THEN
            PERFORM _dir_stats_add(ed.parent, 0, 0, p_length) FROM edge ed WHERE ed.inode = p_inode
              ORDER BY ed.parent;
        END IF;
        RETURN 0;
    END IF;
    SELECT quota_limits, owner_quotas, quota_uids, quota_gids INTO f FROM setting;
    FOR e IN SELECT ed.parent, p.qroot FROM edge ed JOIN node p ON p.inode = ed.parent WHERE ed.inode = p_inode LOOP
        v_dirs := v_dirs || e.parent;
        IF e.qroot > 0 THEN
            v_roots := v_roots || _quota_roots(e.qroot);
        END IF;
    END LOOP;
    -- the volume and owners once, every entry's directory quotas
    v_errno := _charge(true, _owner_key(f.owner_quotas, f.quota_uids, p_uid), _owner_key(f.owner_quotas, f.quota_gids, p_gid),
                       v_roots, 0, 0, p_space, p_check AND f.quota_limits);
    IF v_errno = 0 AND v_dirs IS NOT NULL THEN
        PERFORM _dir_stats_add(d, 0, p_space, p_length) FROM unnest(v_dirs) d ORDER BY d;
    END IF;
    RETURN v_errno;
END
$$;

-- Uncharges removed entries, set-based: entry i was in directory
-- p_parents[i], counted p_spaces[i] and had length p_lengths[i] (NULL: 0).
-- The directory quotas above them (grouped by qroot) and dir_stats of each
-- directory lose them, in the lock order of _charge: quota rows, then
-- dir_stats.
CREATE FUNCTION _uncharge_entries(p_parents bigint[], p_spaces bigint[], p_lengths bigint[] DEFAULT NULL)
RETURNS void
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
    INSERT INTO dir_stats AS d (inode, stripe, space, inodes, length)
    SELECT e.parent, v_stripe, -sum(e.space), -count(*), -coalesce(sum(e.length), 0)
      FROM unnest(p_parents, p_spaces, p_lengths) e(parent, space, length) GROUP BY e.parent ORDER BY e.parent
        ON CONFLICT (inode, stripe) DO UPDATE
        SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes, length = d.length + excluded.length;
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

-- What a writer asks before it buffers growth, so that the write crossing a
-- limit fails at once with ENOSPC/EDQUOT (the commit checks again, exactly).

-- Whether any space limit is set and enforced (a mount asks now and then;
-- with none, its writers need not ask space_limit).
CREATE FUNCTION space_limited() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT s.quota_limits AND EXISTS (SELECT 1 FROM quota q WHERE q.max_space > 0) FROM setting s
$$;

-- The longest file p_inode may be now before a space limit refuses it: the
-- volume's capacity, its owners' quotas and the directory quotas above each
-- of its entries, given what they hold now (space counts in 4 KiB units of
-- length, see _space). max_length is NULL when no limit applies; over_errno
-- is what the binding limit answers (28 ENOSPC for the volume, 122 EDQUOT
-- for a quota). errno 2: no such node, 22: not a regular file.
CREATE FUNCTION space_limit(p_inode bigint, OUT errno integer, OUT max_length bigint, OUT over_errno integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    f record;
    q record;
    n node;
    v_roots bigint[];
    v_length bigint;
BEGIN
    SELECT * INTO n FROM node WHERE inode = p_inode;
    IF NOT FOUND THEN
        errno := 2; RETURN;
    ELSIF n.type <> 1 THEN
        errno := 22; RETURN;
    END IF;
    errno := 0;
    SELECT quota_limits, owner_quotas, quota_uids, quota_gids INTO f FROM setting;
    IF NOT f.quota_limits THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(r.root), '{}') INTO v_roots
      FROM edge e JOIN node p ON p.inode = e.parent, unnest(_quota_roots(p.qroot)) r(root)
     WHERE e.inode = p_inode AND p.qroot > 0;
    FOR q IN
        SELECT l.kind, l.n, qq.max_space,
               (SELECT coalesce(sum(u.space), 0) FROM quota_usage u WHERE u.kind = l.kind AND u.key = l.key) AS used
          FROM _quota_list(true, _owner_key(f.owner_quotas, f.quota_uids, n.uid),
                           _owner_key(f.owner_quotas, f.quota_gids, n.gid), v_roots) l
          JOIN quota qq ON qq.kind = l.kind AND qq.key = l.key
         WHERE qq.max_space > 0
    LOOP
        -- growth is charged l.n times (hard links in one quota's tree)
        v_length := ((_space(n.length) + greatest(q.max_space - q.used, 0) / q.n) / 4096) * 4096;
        IF max_length IS NULL OR v_length < max_length THEN
            max_length := v_length;
            over_errno := CASE WHEN q.kind = 'fs' THEN 28 ELSE 122 END;
        END IF;
    END LOOP;
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
            -- quota roots moved with it (or the directory itself) have new roots above
            PERFORM _quota_chains();
        END IF;
    END IF;
    PERFORM _dir_stats_add(p_from, -1, -_node_space(p_type, p_length), -p_length);
    PERFORM _dir_stats_add(p_to, 1, _node_space(p_type, p_length), p_length);
    RETURN 0;
END
$$;
