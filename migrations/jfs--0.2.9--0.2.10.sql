-- jfs 0.2.9 -> 0.2.10.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.10 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- ---------------------------------------------------------------------------
-- jfs.summary: dir_stats also sums its entries' lengths (the apparent size
-- `jfs summary` and `du --apparent-size` give), kept by every procedure
-- that adds, removes, moves or resizes an entry; an index of each
-- directory's subdirectories, so that walks of a tree's directories skip
-- its files. (Run the jfs.grant_* calls again: summary, summary_of,
-- lookup_ahead, destroy_begin and destroy_finish are new.)

ALTER TABLE dir_stats ADD COLUMN length bigint NOT NULL DEFAULT 0;
-- the lengths of what the volume holds now, into stripe 0 of each directory
INSERT INTO dir_stats AS d (inode, stripe, length)
SELECT e.parent, 0, sum(n.length) FROM edge e JOIN node n ON n.inode = e.inode GROUP BY e.parent
    ON CONFLICT (inode, stripe) DO UPDATE SET length = excluded.length;
CREATE INDEX edge_dirs ON edge (parent, inode) WHERE type = 2;

DROP FUNCTION _dir_stats_add(bigint, bigint, bigint);
DROP FUNCTION _charge(boolean, bigint, bigint, bigint[], bigint, bigint, bigint, boolean);
DROP FUNCTION _uncharge_entry(bigint, bigint, bigint, bigint);
DROP FUNCTION _charge_space(bigint, bigint, bigint, bigint, boolean);
DROP FUNCTION _uncharge_entries(bigint[], bigint[]);

CREATE OR REPLACE FUNCTION _dir_stats_add(p_dir bigint, p_inodes bigint, p_space bigint, p_length bigint DEFAULT 0)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_stripe smallint := _stripe();
BEGIN
    UPDATE dir_stats d SET space = d.space + p_space, inodes = d.inodes + p_inodes, length = d.length + p_length
     WHERE d.inode = p_dir AND d.stripe = v_stripe;
    IF NOT FOUND THEN
        INSERT INTO dir_stats AS d (inode, stripe, space, inodes, length)
        VALUES (p_dir, v_stripe, p_space, p_inodes, p_length)
            ON CONFLICT (inode, stripe) DO UPDATE
            SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes,
                length = d.length + excluded.length;
    END IF;
END
$$;

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
        UPDATE quota_usage x SET inodes = x.inodes + p_inodes * v_n, space = x.space + p_space * v_n
         WHERE x.kind = v_kind AND x.key = v_key AND x.stripe = v_stripe
           AND (NOT v_check OR (_fits(x.space, x.share_space, p_space * v_n)
                                AND _fits(x.inodes, x.share_inodes, p_inodes * v_n)));
        IF NOT FOUND AND v_check THEN
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
        UPDATE dir_stats d SET space = d.space + p_space, inodes = d.inodes + p_inodes, length = d.length + p_length
         WHERE d.inode = p_dir AND d.stripe = v_stripe;
        IF NOT FOUND THEN
            PERFORM _dir_stats_add(p_dir, p_inodes, p_space, p_length);
        END IF;
    END IF;
    RETURN 0;
END
$$;

CREATE OR REPLACE FUNCTION _uncharge_entry(p_dir bigint, p_qroot bigint, p_inodes bigint, p_space bigint,
                                p_length bigint DEFAULT 0) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM _charge(false, NULL, NULL, _quota_roots(p_qroot), p_dir, -p_inodes, -p_space, false, -p_length);
END
$$;

CREATE OR REPLACE FUNCTION _charge_space(p_inode bigint, p_uid bigint, p_gid bigint, p_space bigint, p_check boolean,
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

CREATE OR REPLACE FUNCTION _uncharge_entries(p_parents bigint[], p_spaces bigint[], p_lengths bigint[] DEFAULT NULL)
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

CREATE OR REPLACE FUNCTION _move_entry(p_node bigint, p_type smallint, p_length bigint, p_from bigint, p_to bigint)
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
    IF v_acl_tags IS NULL THEN
        n.mode := p_mode & 4095 & ~coalesce(p_umask, 0);
    ELSE
        n.mode := _acl_create_mode(p_mode & 4095, v_acl_tags, v_acl_perms);
    END IF;
    n.uid := p_uid;
    n.gid := p_gid;
    IF par.squash_roles AND NOT (p_type = 2 AND p_mode & 4095 = 448 AND p_uid = 0 AND p_gid = 0
                                 AND (p_inode = _trash_inode() OR p_parent = _trash_inode())) THEN
        v_squash := _caller_squash();
        n.uid := _squashed(p_uid, v_squash.kind, v_squash.uid);
        n.gid := _squashed(p_gid, v_squash.kind, v_squash.gid);
    END IF;
    IF par.mode & 1024 <> 0 THEN
        n.gid := par.gid;
        IF p_type = 2 THEN
            n.mode := n.mode | 1024;
        END IF;
    END IF;
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

CREATE OR REPLACE FUNCTION link(p_inode bigint, p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_errno integer := _check_name(p_name);
    v_ptype smallint;
    v_pqroot bigint;
    v_limits boolean;
    n node;
BEGIN
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF _is_dot(p_name) OR _reserved_name(p_parent, p_name) THEN
        RETURN _err(17);
    END IF;
    PERFORM _lock_nodes(ARRAY[p_inode, p_parent], ARRAY['nokey', 'share']);
    SELECT * INTO n FROM node WHERE inode = p_inode;
    SELECT d.type, d.qroot, st.quota_limits INTO v_ptype, v_pqroot, v_limits FROM node d, setting st WHERE d.inode = p_parent;
    IF n.inode IS NULL OR n.nlink = 0 OR v_ptype IS NULL THEN
        RETURN _err(2);
    ELSIF n.type = 2 THEN
        RETURN _err(1);
    ELSIF v_ptype <> 2 THEN
        RETURN _err(20);
    END IF;
    -- a new entry: counted under p_parent and the directory quotas above it
    v_errno := _charge(false, NULL, NULL, _quota_roots(v_pqroot), p_parent, 1, _node_space(n.type, n.length), v_limits,
                       n.length);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    END IF;
    INSERT INTO edge (parent, name, inode, type) VALUES (p_parent, p_name, p_inode, n.type)
        ON CONFLICT (parent, name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM _uncharge_entry(p_parent, v_pqroot, 1, _node_space(n.type, n.length), n.length);
        RETURN _err(17);
    END IF;
    UPDATE node SET nlink = nlink + 1, ctime = v_now WHERE inode = p_inode RETURNING * INTO n;
    PERFORM _touch_dir(p_parent, v_now, s.skip_dir_mtime_ns);
    INSERT INTO change (op, inode, parent, name, uid, gid) VALUES ('link', n.inode, p_parent, p_name, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION unlink(p_parent bigint, p_name bytea, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}')
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v record;
    par record;
    c node;
    v_trashed integer;
BEGIN
    IF _is_dot(p_name) THEN
        RETURN _err(21);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days, s.destroying INTO v
          FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v.destroying IS NOT NULL THEN
            PERFORM _destroyed();
        ELSIF v.inode = _trash_inode() THEN
            RETURN _err(1);
        ELSIF v.type = 2 THEN
            RETURN _err(21);
        END IF;
        -- with a trash, a last link moves there instead
        IF attempt = 1 AND v.trash_days > 0 AND (SELECT n.nlink FROM node n WHERE n.inode = v.inode) = 1 THEN
            v_trashed := _to_trash(p_parent, p_name);
            IF v_trashed = 0 THEN
                RETURN _attr(v.inode);
            END IF;
        END IF;
        IF attempt = 1 THEN
            PERFORM _durability(v.meta_durability);
        END IF;
        -- lock order: ascending inode
        IF p_parent < v.inode THEN
            SELECT mtime, ctime, qroot INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
            SELECT * INTO c FROM node WHERE inode = v.inode FOR UPDATE;
        ELSE
            SELECT * INTO c FROM node WHERE inode = v.inode FOR UPDATE;
            SELECT mtime, ctime, qroot INTO par FROM node WHERE inode = p_parent FOR KEY SHARE;
        END IF;
        -- the entry may have changed while we waited for the locks
        DELETE FROM edge WHERE parent = p_parent AND name = p_name AND inode = v.inode;
        IF FOUND THEN
            PERFORM _uncharge_entry(p_parent, par.qroot, 1, _node_space(c.type, c.length), c.length);
            c.nlink := c.nlink - 1;
            c.ctime := v_now;
            IF c.nlink > 0 THEN
                UPDATE node SET nlink = c.nlink, ctime = v_now WHERE inode = c.inode;
            ELSIF NOT _keep_open(c.inode, p_sid, p_open_inodes) THEN
                -- a node that had links has no sustained rows: nobody else holds it
                PERFORM _free_node(c.inode);
            END IF;
            IF _dir_times_stale(par.mtime, par.ctime, v_now, v.skip_dir_mtime_ns) THEN
                UPDATE node SET mtime = v_now, ctime = v_now WHERE inode = p_parent;
            END IF;
            INSERT INTO change (op, inode, parent, name, uid, gid)
            VALUES ('unlink', c.inode, p_parent, p_name, c.uid, c.gid);
            RETURN _to_attr(c);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'unlink: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;

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
            PERFORM pg_advisory_xact_lock(1785095027, 1);  -- 'jfs' rename lock
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

CREATE OR REPLACE FUNCTION write_slice(
    p_inode bigint, p_chunk_index integer, p_pos integer, p_slice_id bigint, p_slice_size integer,
    p_slice_off integer, p_len integer, p_mtime bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    w record;
BEGIN
    w := _write_slice(p_inode, p_chunk_index, p_pos, p_slice_id, p_slice_size, p_slice_off, p_len, p_mtime, false);
    RETURN w.a;
END
$$;

CREATE OR REPLACE FUNCTION write_slices(
    p_inode bigint, p_chunks integer[], p_pos integer[], p_ids bigint[], p_sizes integer[],
    p_offs integer[], p_lens integer[], p_mtime bigint DEFAULT NULL)
RETURNS TABLE (committed integer, a attr)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_ids), 0);
    v_attr attr;
    w record;
    v_deferred bigint := 0;
    v_done integer := v_n;
BEGIN
    IF v_n = 0 OR v_n > 10000 OR coalesce(cardinality(p_chunks), -1) <> v_n
       OR coalesce(cardinality(p_pos), -1) <> v_n OR coalesce(cardinality(p_sizes), -1) <> v_n
       OR coalesce(cardinality(p_offs), -1) <> v_n OR coalesce(cardinality(p_lens), -1) <> v_n THEN
        RETURN QUERY SELECT 0, _err(22);
        RETURN;
    END IF;
    FOR i IN 1..v_n LOOP
        w := _write_slice(p_inode, p_chunks[i], p_pos[i], p_ids[i], p_sizes[i], p_offs[i], p_lens[i], p_mtime, true);
        v_attr := w.a;
        v_deferred := v_deferred + w.deferred;
        IF v_attr.errno <> 0 THEN
            v_done := i - 1;
            EXIT;
        END IF;
    END LOOP;
    -- the growth within 4 KiB units, to dir_stats after every quota row
    IF v_deferred <> 0 THEN
        PERFORM _charge_space(p_inode, NULL, NULL, 0, false, v_deferred);
    END IF;
    RETURN QUERY SELECT v_done, v_attr;
END
$$;

CREATE OR REPLACE FUNCTION zero_range(p_inode bigint, p_offset bigint, p_length bigint, p_keep_size boolean)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_end bigint;
    v_errno integer;
    n node;
BEGIN
    IF p_offset IS NULL OR p_offset < 0 OR p_length IS NULL OR p_length <= 0 OR p_keep_size IS NULL THEN
        RETURN _err(22);
    ELSIF NOT p_keep_size AND p_offset >= 144115188075855872 - p_length THEN  -- 2^57: chunk index past int range
        RETURN _err(27);
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR NO KEY UPDATE;
    v_errno := _file_errno(n);
    IF v_errno <> 0 THEN
        RETURN _err(v_errno);
    ELSIF p_keep_size AND p_offset >= n.length THEN
        RETURN _to_attr(n);   -- nothing of the file in the range: nothing changes
    END IF;
    IF p_keep_size THEN
        v_end := p_offset + least(p_length, n.length - p_offset);
    ELSE
        v_end := p_offset + p_length;
    END IF;
    IF v_end > n.length THEN
        v_errno := _charge_space(p_inode, n.uid, n.gid, _space(v_end) - _space(n.length), true, v_end - n.length);
        IF v_errno <> 0 THEN
            RETURN _err(v_errno);
        END IF;
    END IF;
    -- past the old end nothing shows data (truncate and writes keep it so)
    n.used := n.used - _zero(p_inode, p_offset, least(v_end, n.length));
    n.length := greatest(n.length, v_end);
    n.mtime := v_now; n.ctime := v_now;
    UPDATE node SET length = n.length, used = n.used, mtime = v_now, ctime = v_now WHERE inode = p_inode;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_inode, n.uid, n.gid);
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION copy_range(p_src bigint, p_src_offset bigint, p_dst bigint, p_dst_offset bigint,
                           p_length bigint, OUT errno integer, OUT copied bigint, OUT length bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_chunk bigint := _chunk_size();
    v_shift bigint;
    v_end bigint;
    v_ids bigint[];
    v_errno integer;
    src node;
    dst node;
BEGIN
    copied := 0;
    IF p_src_offset IS NULL OR p_src_offset < 0 OR p_dst_offset IS NULL OR p_dst_offset < 0
       OR p_length IS NULL OR p_length < 0 THEN
        errno := 22; RETURN;
    END IF;
    -- both nodes locked in inode order (two copies between the same files
    -- in opposite directions cannot deadlock); the source only against
    -- changes (writes, truncates and compactions lock it for update)
    IF p_src < p_dst THEN
        SELECT * INTO src FROM node WHERE inode = p_src FOR SHARE;
        SELECT * INTO dst FROM node WHERE inode = p_dst FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO dst FROM node WHERE inode = p_dst FOR NO KEY UPDATE;
        SELECT * INTO src FROM node WHERE inode = p_src FOR SHARE;
    END IF;
    -- (the first of 2, 21, 22 either file meets)
    errno := least(nullif(_file_errno(src), 0), nullif(_file_errno(dst), 0));
    IF errno IS NOT NULL THEN
        RETURN;
    END IF;
    copied := greatest(least(p_length, src.length - p_src_offset), 0);
    IF p_src = p_dst AND copied > 0 AND p_src_offset < p_dst_offset + copied
       AND p_dst_offset < p_src_offset + copied THEN
        copied := 0; errno := 22; RETURN;
    END IF;
    IF p_dst_offset >= 144115188075855872 - copied THEN  -- 2^57: chunk index past int range
        copied := 0; errno := 27; RETURN;
    END IF;
    length := dst.length;
    errno := 0;
    IF copied = 0 THEN
        RETURN;
    END IF;
    v_end := p_dst_offset + copied;
    IF v_end > dst.length THEN
        v_errno := _charge_space(p_dst, dst.uid, dst.gid, _space(v_end) - _space(dst.length), true,
                                 v_end - dst.length);
        IF v_errno <> 0 THEN
            copied := 0; errno := v_errno; RETURN;
        END IF;
    END IF;
    PERFORM _lock_refs(p_dst, p_dst_offset, v_end, p_src, p_src_offset, p_src_offset + copied);
    dst.used := dst.used - _zero(p_dst, p_dst_offset, least(v_end, dst.length));
    dst.used := dst.used + _data_size(p_src, p_src_offset, p_src_offset + copied);
    v_shift := p_dst_offset - p_src_offset;
    -- the source's rows cut to the range (file offsets a..b, the slice's
    -- bytes from off), moved by v_shift, split at the destination's chunk
    -- ends; inserted in the source's commit order (seq is drawn as the
    -- rows arrive, so later rows still shadow earlier ones)
    WITH cut AS (
        SELECT sl.seq, sl.slice_id, sl.slice_size,
               greatest(sl.chunk_index * v_chunk + sl.pos, p_src_offset) AS a,
               least(sl.chunk_index * v_chunk + sl.pos + sl.len, p_src_offset + copied) AS b,
               sl.slice_off + greatest(p_src_offset - (sl.chunk_index * v_chunk + sl.pos), 0) AS off
          FROM slice sl
         WHERE sl.inode = p_src
           AND sl.chunk_index BETWEEN p_src_offset / v_chunk AND (p_src_offset + copied - 1) / v_chunk
    ), pieces AS (
        SELECT c.seq, c.slice_id, c.slice_size, k AS chunk_index,
               greatest(c.a + v_shift, k * v_chunk) AS a,
               least(c.b + v_shift, (k + 1) * v_chunk) AS b,
               c.off + greatest(k * v_chunk - (c.a + v_shift), 0) AS off
          FROM cut c,
               generate_series((c.a + v_shift) / v_chunk, (c.b + v_shift - 1) / v_chunk) k
         WHERE c.b > c.a
    ), copied_rows AS (
        INSERT INTO slice (inode, chunk_index, slice_id, slice_size, slice_off, len, pos)
        SELECT p_dst, p.chunk_index, p.slice_id, p.slice_size, p.off, p.b - p.a, p.a - p.chunk_index * v_chunk
          FROM (SELECT * FROM pieces ORDER BY seq, chunk_index) p
        RETURNING slice_id
    )
    SELECT array_agg(slice_id) INTO v_ids FROM copied_rows WHERE slice_id <> 0;
    IF v_ids IS NOT NULL THEN
        PERFORM 1 FROM slice_ref WHERE slice_id = ANY (v_ids) ORDER BY slice_id FOR UPDATE;
        UPDATE slice_ref r SET refs = r.refs + c.n
          FROM (SELECT id, count(*)::integer AS n FROM unnest(v_ids) id GROUP BY id) c
         WHERE r.slice_id = c.id;
    END IF;
    length := greatest(dst.length, v_end);
    UPDATE node SET length = copy_range.length, used = dst.used, mtime = v_now, ctime = v_now
     WHERE inode = p_dst;
    INSERT INTO change (op, inode, uid, gid) VALUES ('write', p_dst, dst.uid, dst.gid);
END
$$;

CREATE OR REPLACE FUNCTION setattr(
    p_inode bigint, p_set integer,
    p_mode integer DEFAULT NULL, p_uid bigint DEFAULT NULL, p_gid bigint DEFAULT NULL,
    p_atime bigint DEFAULT NULL, p_mtime bigint DEFAULT NULL, p_ctime bigint DEFAULT NULL,
    p_length bigint DEFAULT NULL)
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_set integer := coalesce(p_set, 0);
    v_errno integer;
    v_new_uid bigint;
    v_new_gid bigint;
    v_truncated boolean := false;
    v_squash record;
    f record;
    n node;
BEGIN
    IF (v_set & 1 <> 0 AND p_mode IS NULL) OR (v_set & 2 <> 0 AND p_uid IS NULL)
       OR (v_set & 4 <> 0 AND p_gid IS NULL) OR (v_set & 8 <> 0 AND (p_length IS NULL OR p_length < 0))
       OR (v_set & 16 <> 0 AND p_atime IS NULL) OR (v_set & 32 <> 0 AND p_mtime IS NULL)
       OR (v_set & 64 <> 0 AND p_ctime IS NULL)
       OR (v_set & 2 <> 0 AND NOT _id_ok(p_uid)) OR (v_set & 4 <> 0 AND NOT _id_ok(p_gid)) THEN
        RETURN _err(22);
    END IF;
    IF v_set & 8 <> 0 AND p_length >= 144115188075855872 THEN  -- 2^57: chunk index past int range
        RETURN _err(27);
    END IF;
    SELECT * INTO n FROM node WHERE inode = p_inode FOR UPDATE;
    IF NOT FOUND THEN
        RETURN _err(2);
    ELSIF v_set & 1 <> 0 AND NOT _mode_ok(p_mode, n.type) THEN
        RETURN _err(22);
    END IF;
    IF v_set & 8 <> 0 THEN
        IF n.type = 2 THEN
            RETURN _err(21);
        ELSIF n.type <> 1 THEN
            RETURN _err(22);
        END IF;
        IF p_length <> n.length THEN
            v_errno := _charge_space(n.inode, n.uid, n.gid, _space(p_length) - _space(n.length), true,
                                     p_length - n.length);
            IF v_errno <> 0 THEN
                RETURN _err(v_errno);
            END IF;
            n := _truncate(n, p_length, v_now);
            v_truncated := true;
        END IF;
    END IF;
    IF (v_set & 2 <> 0 AND p_uid <> n.uid) OR (v_set & 4 <> 0 AND p_gid <> n.gid) THEN
        -- a new owner: the node's usage moves to the new user/group quotas
        v_new_uid := CASE WHEN v_set & 2 <> 0 AND p_uid <> n.uid THEN p_uid END;
        v_new_gid := CASE WHEN v_set & 4 <> 0 AND p_gid <> n.gid THEN p_gid END;
        -- a squashed role gives nothing to root (root squash); under all
        -- squash it may only give its own nodes to its own group
        v_squash := _caller_squash();
        IF (v_squash.kind = 'root' AND (v_new_uid = 0 OR v_new_gid = 0))
           OR (v_squash.kind = 'all' AND (v_new_uid IS NOT NULL
                                          OR (v_new_gid IS NOT NULL
                                              AND (n.uid <> v_squash.uid OR v_new_gid <> v_squash.gid)))) THEN
            RETURN _err(1);
        END IF;
        SELECT quota_limits, owner_quotas INTO f FROM setting;
        IF f.owner_quotas THEN
            v_errno := _charge(false, v_new_uid, v_new_gid, '{}', 0, 1, _node_space(n.type, n.length), f.quota_limits);
            IF v_errno <> 0 THEN
                RETURN _err(v_errno);
            END IF;
            PERFORM _charge(false, CASE WHEN v_new_uid IS NOT NULL THEN n.uid END,
                            CASE WHEN v_new_gid IS NOT NULL THEN n.gid END, '{}', 0, -1, -_node_space(n.type, n.length),
                            false);
        END IF;
    END IF;
    IF v_set & 1 <> 0 THEN n.mode := p_mode & 4095; END IF;
    IF v_set & 2 <> 0 THEN n.uid := p_uid; END IF;
    IF v_set & 4 <> 0 THEN n.gid := p_gid; END IF;
    IF v_set & 128 <> 0 THEN n.atime := v_now; ELSIF v_set & 16 <> 0 THEN n.atime := p_atime; END IF;
    IF v_set & 256 <> 0 THEN n.mtime := v_now; ELSIF v_set & 32 <> 0 THEN n.mtime := p_mtime; END IF;
    n.ctime := CASE WHEN v_set & 64 <> 0 THEN p_ctime ELSE v_now END;
    IF v_set & ~8 <> 0 THEN
        UPDATE node SET mode = n.mode, uid = n.uid, gid = n.gid, atime = n.atime, mtime = n.mtime, ctime = n.ctime
         WHERE inode = p_inode;
    END IF;
    IF v_set & ~8 <> 0 OR v_truncated THEN
        INSERT INTO change (op, inode, uid, gid)
        VALUES (CASE WHEN v_truncated THEN 'truncate' ELSE 'setattr' END, n.inode, n.uid, n.gid);
    END IF;
    RETURN _to_attr(n);
END
$$;

CREATE OR REPLACE FUNCTION batch_unlink(p_parent bigint, p_names bytea[], p_sid bigint DEFAULT 0,
                             p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (name bytea, errno integer, inode bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    par record;
    v_targets bigint[];
    v_done_names bytea[];
    v_done_inodes bigint[];
    v_spaces bigint[];
    v_lengths bigint[];
BEGIN
    SELECT d.type, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns, s.trash_days, s.destroying INTO par
      FROM node d, setting s WHERE d.inode = p_parent;
    IF par.destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    IF par.type IS DISTINCT FROM 2 THEN
        RETURN QUERY SELECT u.n, CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, NULL::bigint
                       FROM unnest(p_names) WITH ORDINALITY u(n, i) ORDER BY u.i;
        RETURN;
    END IF;
    IF par.trash_days > 0 AND NOT _in_trash(p_parent) THEN
        -- with a trash: one unlink per name (each last link moves there), same transaction
        RETURN QUERY
            SELECT u.n, CASE WHEN _is_dot(u.n) THEN 21 ELSE x.errno END,
                   CASE WHEN x.errno = 0 THEN x.inode END
              FROM unnest(p_names) WITH ORDINALITY u(n, i)
              LEFT JOIN LATERAL (SELECT * FROM unlink(p_parent, u.n, p_sid, p_open_inodes)
                                  WHERE NOT _is_dot(u.n)) x ON true
             ORDER BY u.i;
        RETURN;
    END IF;
    PERFORM _durability(par.meta_durability);

    -- lock the nodes named and the parent in ascending inode order
    SELECT array_agg(DISTINCT e.inode) INTO v_targets
      FROM edge e WHERE e.parent = p_parent AND e.name = ANY (p_names) AND e.type <> 2;
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_targets) AND n.inode < p_parent ORDER BY n.inode FOR UPDATE;
    PERFORM 1 FROM node n WHERE n.inode = p_parent FOR KEY SHARE;
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_targets) AND n.inode > p_parent ORDER BY n.inode FOR UPDATE;

    -- under the locks: drop the entries and the links they held
    WITH gone AS (
        DELETE FROM edge e WHERE e.parent = p_parent AND e.name = ANY (p_names) AND e.type <> 2
        RETURNING e.name, e.inode
    )
    SELECT array_agg(g.name), array_agg(g.inode), array_agg(_node_space(n.type, n.length)), array_agg(n.length)
      INTO v_done_names, v_done_inodes, v_spaces, v_lengths
      FROM gone g JOIN node n ON n.inode = g.inode;
    IF v_done_inodes IS NOT NULL THEN
        PERFORM _uncharge_entries(array_fill(p_parent, ARRAY[cardinality(v_done_inodes)]), v_spaces, v_lengths);
    END IF;
    PERFORM _drop_links(v_done_inodes, v_now, p_sid, p_open_inodes);
    IF v_done_names IS NOT NULL AND _dir_times_stale(par.mtime, par.ctime, v_now, par.skip_dir_mtime_ns) THEN
        UPDATE node SET mtime = v_now, ctime = v_now WHERE node.inode = p_parent;
    END IF;
    INSERT INTO change (op, inode, parent, name)
    SELECT 'unlink', d.i, p_parent, d.nm FROM unnest(v_done_names, v_done_inodes) d(nm, i);

    RETURN QUERY
        SELECT u.n,
               CASE WHEN u.n = ANY (v_done_names) THEN 0
                    WHEN _check_name(u.n) <> 0 THEN _check_name(u.n)
                    WHEN _is_dot(u.n) THEN 21
                    WHEN EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = u.n) THEN 21
                    ELSE 2 END,
               (SELECT d.i FROM unnest(v_done_names, v_done_inodes) d(nm, i) WHERE d.nm = u.n LIMIT 1)
          FROM unnest(p_names) WITH ORDINALITY u(n, i)
         ORDER BY u.i;
END
$$;

CREATE OR REPLACE FUNCTION rmr(p_parent bigint, p_name bytea, p_limit integer DEFAULT 100000, p_sid bigint DEFAULT 0,
                    p_open_inodes bigint[] DEFAULT '{}')
RETURNS TABLE (errno integer, removed bigint, done boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_root bigint;
    v_root_type smallint;
    v_mode text;
    v_destroying timestamptz;
    v_dirs bigint[];
    v_depths integer[];
    v_files record;
    v_gone bigint[];
    v_parents bigint[];
    v_spaces bigint[];
    v_lengths bigint[];
    v_pqroot bigint;
    v_locked bigint[] := '{}';
    v_removed bigint := 0;
    v_count bigint;
    v_limit integer := greatest(coalesce(p_limit, 100000), 1);
BEGIN
    SELECT e.inode, e.type, s.meta_durability, s.destroying INTO v_root, v_root_type, v_mode, v_destroying
      FROM edge e, setting s WHERE e.parent = p_parent AND e.name = p_name;
    IF v_destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    IF v_root IS NULL THEN
        RETURN QUERY SELECT CASE WHEN _is_dot(p_name) THEN 22 ELSE _missing(p_parent, p_name) END, 0::bigint, true;
        RETURN;
    ELSIF v_root = _trash_inode() THEN
        RETURN QUERY SELECT 1, 0::bigint, true;
        RETURN;
    END IF;
    IF v_root_type <> 2 THEN
        RETURN QUERY SELECT b.errno, (b.errno = 0)::integer::bigint, true
                       FROM batch_unlink(p_parent, ARRAY[p_name], p_sid, p_open_inodes) b;
        RETURN;
    END IF;
    -- with a trash, the whole tree moves there in one step
    IF EXISTS (SELECT 1 FROM setting WHERE trash_days > 0) AND NOT _in_trash(p_parent) THEN
        v_count := (_subtree_usage(v_root)).inodes + 1;
        IF _to_trash(p_parent, p_name) = 0 THEN
            RETURN QUERY SELECT 0, v_count, true;
            RETURN;
        END IF;
    END IF;
    PERFORM _durability(v_mode);

    -- The tree's directories (with their depth below the root) and up to
    -- p_limit non-directories in them, locked together in inode order. A
    -- rename may have changed the tree while we waited for those locks, so
    -- it is read again under them until every directory it has is locked
    -- (what moved out stays locked, harmlessly, to the end of the step).
    LOOP
        v_dirs := _tree_dirs(v_root);
        SELECT array_agg(f.inode) INTO v_gone
          FROM (SELECT e.inode FROM edge e WHERE e.parent = ANY (v_dirs) AND e.type <> 2 LIMIT v_limit) f;
        PERFORM 1 FROM node n
         WHERE n.inode = ANY (v_dirs || coalesce(v_gone, '{}')) AND NOT n.inode = ANY (v_locked)
         ORDER BY n.inode FOR UPDATE;
        v_locked := v_locked || v_dirs || coalesce(v_gone, '{}');
        IF NOT EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = v_root) THEN
            -- the tree was renamed or removed meanwhile: what the name is now
            RETURN QUERY SELECT * FROM rmr(p_parent, p_name, p_limit, p_sid, p_open_inodes);
            RETURN;
        END IF;
        EXIT WHEN _tree_dirs(v_root) <@ v_locked;
    END LOOP;
    -- one row per step: the tree below the entry loses entries
    INSERT INTO change (op, inode, parent, name) VALUES ('rmr', v_root, p_parent, p_name);
    WITH RECURSIVE t(inode, depth) AS (
        SELECT v_root, 0
        UNION ALL
        SELECT e.inode, t.depth + 1 FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
    )
    SELECT array_agg(t.inode ORDER BY t.depth), array_agg(t.depth ORDER BY t.depth) INTO v_dirs, v_depths FROM t;
    SELECT array_agg(f.parent) AS parents, array_agg(f.name) AS names, array_agg(f.inode) AS inodes INTO v_files
      FROM (SELECT e.parent, e.name, e.inode FROM edge e
             WHERE e.parent = ANY (v_dirs) AND e.type <> 2 LIMIT v_limit) f;
    -- (files that came into the locked directories while we waited)
    PERFORM 1 FROM node n WHERE n.inode = ANY (v_files.inodes) AND NOT n.inode = ANY (v_locked)
     ORDER BY n.inode FOR UPDATE;

    IF v_files.inodes IS NOT NULL THEN
        WITH gone AS (
            DELETE FROM edge e
             USING unnest(v_files.parents, v_files.names, v_files.inodes) AS f(parent, name, inode)
             WHERE e.parent = f.parent AND e.name = f.name AND e.inode = f.inode
            RETURNING e.parent, e.inode
        )
        SELECT count(*), array_agg(g.inode), array_agg(g.parent), array_agg(_node_space(n.type, n.length)),
               array_agg(n.length)
          INTO v_count, v_gone, v_parents, v_spaces, v_lengths
          FROM gone g JOIN node n ON n.inode = g.inode;
        v_removed := v_removed + v_count;
        PERFORM _uncharge_entries(v_parents, v_spaces, v_lengths);
        PERFORM _drop_links(v_gone, v_now, p_sid, p_open_inodes);
        IF v_count >= v_limit THEN
            RETURN QUERY SELECT 0, v_removed, false;
            RETURN;
        END IF;
    END IF;

    -- directories that are empty now, deepest first
    FOR d IN REVERSE coalesce(v_depths[cardinality(v_depths)], 0)..1 LOOP
        WITH gone AS (
            DELETE FROM edge e
             WHERE e.inode IN (SELECT u.i FROM unnest(v_dirs, v_depths) u(i, dep) WHERE u.dep = d)
               AND e.type = 2
               AND NOT EXISTS (SELECT 1 FROM edge c WHERE c.parent = e.inode)
            RETURNING e.parent, e.inode
        ), per_parent AS (
            SELECT g.parent, count(*)::integer AS n FROM gone g GROUP BY g.parent
        ), relinked AS (
            UPDATE node x SET nlink = x.nlink - p.n, mtime = v_now, ctime = v_now FROM per_parent p
             WHERE x.inode = p.parent
            RETURNING x.inode
        )
        SELECT array_agg(g.inode), array_agg(g.parent) INTO v_gone, v_parents FROM gone g;
        IF v_gone IS NOT NULL THEN
            PERFORM _uncharge_entries(v_parents, array_fill(4096::bigint, ARRAY[cardinality(v_gone)]));
            PERFORM _free_nodes(v_gone);
            v_removed := v_removed + cardinality(v_gone);
        END IF;
    END LOOP;

    -- the root itself, once empty
    IF NOT _dir_is_empty(v_root) THEN
        RETURN QUERY SELECT 0, v_removed, false;
        RETURN;
    END IF;
    PERFORM 1 FROM node n WHERE n.inode = p_parent FOR NO KEY UPDATE;
    DELETE FROM edge e WHERE e.parent = p_parent AND e.name = p_name AND e.inode = v_root;
    UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent
    RETURNING qroot INTO v_pqroot;
    PERFORM _uncharge_entry(p_parent, v_pqroot, 1, 4096);
    PERFORM _free_nodes(ARRAY[v_root]);
    RETURN QUERY SELECT 0, v_removed + 1, true;
END
$$;

CREATE OR REPLACE FUNCTION clone_node(p_src bigint, p_dst_parent bigint, p_dst_name bytea,
                           p_uid bigint DEFAULT NULL, p_gid bigint DEFAULT NULL)
RETURNS TABLE (errno integer, inode bigint, nodes bigint, space bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v_errno integer := _check_name(p_dst_name);
    par record;
    v_src_type smallint;
    v_res record;
    v_roots bigint[];
    v_quota_errno integer := 0;
    v_owner record;
    v_squash record := _caller_squash();
BEGIN
    IF v_errno = 0 AND (NOT coalesce(_id_ok(p_uid), true) OR NOT coalesce(_id_ok(p_gid), true)) THEN
        v_errno := 22;
    END IF;
    IF v_errno <> 0 THEN
        RETURN QUERY SELECT v_errno, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    ELSIF _is_dot(p_dst_name) OR _reserved_name(p_dst_parent, p_dst_name) THEN
        RETURN QUERY SELECT 17, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    SELECT n.type INTO v_src_type FROM node n WHERE n.inode = p_src AND (n.nlink > 0 OR n.inode = 1);
    IF v_src_type IS NULL THEN
        RETURN QUERY SELECT 2, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    -- the destination directory: stays a directory, gains an entry (and a
    -- link when the clone is a directory)
    SELECT d.type, d.qroot, d.mtime, d.ctime, s.meta_durability, s.skip_dir_mtime_ns, s.quota_limits, s.owner_quotas
      INTO par
      FROM node d, setting s WHERE d.inode = p_dst_parent FOR NO KEY UPDATE OF d;
    IF NOT FOUND OR par.type <> 2 THEN
        RETURN QUERY SELECT CASE WHEN par.type IS NULL THEN 2 ELSE 20 END, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    ELSIF EXISTS (SELECT 1 FROM edge e WHERE e.parent = p_dst_parent AND e.name = p_dst_name) THEN
        RETURN QUERY SELECT 17, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    PERFORM _durability(par.meta_durability);

    -- the one statement: read the source tree and write its copy
    WITH RECURSIVE dirs(inode) AS (
        SELECT p_src WHERE v_src_type = 2
        UNION ALL
        SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2
    ), entries AS (
        SELECT e.parent, e.name, e.inode, e.type FROM edge e WHERE e.parent IN (SELECT d.inode FROM dirs d)
    ), links AS (
        -- entries naming each node inside the clone (the root: the new entry)
        SELECT x.inode, count(*)::integer AS k
          FROM (SELECT en.inode FROM entries en UNION ALL SELECT p_src) x GROUP BY x.inode
    ), numbered AS (
        SELECT l.inode, l.k, row_number() OVER () - 1 AS i FROM links l
    ), ids AS (
        UPDATE counter c SET next = c.next + (SELECT count(*) FROM numbered)
         WHERE c.name = 'inode'
        RETURNING c.next - (SELECT count(*) FROM numbered) AS first
    ), map AS (
        SELECT nb.inode AS old, ids.first + nb.i AS new, nb.k FROM numbered nb, ids
    ), new_nodes AS (
        INSERT INTO node (inode, type, mode, uid, gid, atime, mtime, ctime, nlink, length, rdev, parent, tier, qroot, used)
        SELECT m.new, n.type, n.mode, _squashed(coalesce(p_uid, n.uid), v_squash.kind, v_squash.uid),
               _squashed(coalesce(p_gid, n.gid), v_squash.kind, v_squash.gid), n.atime, n.mtime, v_now,
               CASE WHEN n.type = 2 THEN n.nlink ELSE m.k END, n.length, n.rdev,
               CASE WHEN n.type <> 2 THEN 0 WHEN n.inode = p_src THEN p_dst_parent ELSE mp.new END,
               n.tier, CASE WHEN n.type = 2 THEN par.qroot ELSE 0 END, n.used
          FROM map m JOIN node n ON n.inode = m.old LEFT JOIN map mp ON mp.old = n.parent AND n.type = 2
        RETURNING node.inode, node.type, node.length, node.uid, node.gid
    ), new_entries AS (
        INSERT INTO edge (parent, name, inode, type)
        SELECT mp.new, en.name, mi.new, en.type
          FROM entries en JOIN map mp ON mp.old = en.parent JOIN map mi ON mi.old = en.inode
        UNION ALL
        SELECT p_dst_parent, p_dst_name, m.new, v_src_type FROM map m WHERE m.old = p_src
        RETURNING edge.parent, edge.inode
    ), entry_usage AS (
        -- what the new entries add to each directory holding them
        SELECT ne.parent, count(*) AS inodes, sum(_node_space(nn.type, nn.length)) AS space,
               sum(nn.length) AS length
          FROM new_entries ne JOIN new_nodes nn ON nn.inode = ne.inode GROUP BY ne.parent
    ), owner_usage AS (
        SELECT nn.uid, nn.gid, count(*) AS inodes, sum(_node_space(nn.type, nn.length)) AS space
          FROM new_nodes nn GROUP BY nn.uid, nn.gid
    ), old_slices AS (
        SELECT s.*, m.new FROM slice s JOIN map m ON s.inode = m.old
    ), new_slices AS (
        -- seq is kept: it orders the slices of one chunk, and the inode is new
        INSERT INTO slice (inode, chunk_index, seq, slice_id, slice_size, slice_off, len, pos)
        SELECT o.new, o.chunk_index, o.seq, o.slice_id, o.slice_size, o.slice_off, o.len, o.pos FROM old_slices o
        RETURNING 1
    ), shared AS (
        SELECT o.slice_id, count(*)::integer AS k FROM old_slices o WHERE o.slice_id <> 0 GROUP BY o.slice_id
    ), referenced AS (
        UPDATE slice_ref r SET refs = r.refs + sh.k FROM shared sh WHERE r.slice_id = sh.slice_id
        RETURNING r.slice_id
    ), new_targets AS (
        INSERT INTO symlink (inode, target) SELECT m.new, l.target FROM symlink l JOIN map m ON m.old = l.inode
        RETURNING 1
    ), new_xattrs AS (
        INSERT INTO xattr (inode, name, value) SELECT m.new, x.name, x.value FROM xattr x JOIN map m ON m.old = x.inode
        RETURNING 1
    ), new_acls AS (
        INSERT INTO acl (inode, kind, tag, qualifier, perm)
        SELECT m.new, a.kind, a.tag, a.qualifier, a.perm FROM acl a JOIN map m ON m.old = a.inode
        RETURNING 1
    )
    SELECT (SELECT m.new FROM map m WHERE m.old = p_src) AS root,
           (SELECT count(*) FROM map) AS mapped,
           (SELECT count(*) FROM new_nodes) AS nodes,
           (SELECT coalesce(sum(o.space), 0)::bigint FROM owner_usage o) AS space,
           (SELECT array_agg(o.uid) FROM owner_usage o) AS uids,
           (SELECT array_agg(o.gid) FROM owner_usage o) AS gids,
           (SELECT array_agg(o.inodes) FROM owner_usage o) AS owner_inodes,
           (SELECT array_agg(o.space::bigint) FROM owner_usage o) AS owner_spaces,
           (SELECT array_agg(u.parent) FROM entry_usage u) AS dirs,
           (SELECT array_agg(u.inodes) FROM entry_usage u) AS dir_inodes,
           (SELECT array_agg(u.space::bigint) FROM entry_usage u) AS dir_spaces,
           (SELECT array_agg(u.length::bigint) FROM entry_usage u) AS dir_lengths,
           (SELECT count(*) FROM shared) AS shared,
           (SELECT count(*) FROM referenced) AS referenced,
           (SELECT count(*) FROM new_slices)
             + (SELECT count(*) FROM new_targets) + (SELECT count(*) FROM new_xattrs)
             + (SELECT count(*) FROM new_acls) AS rows
      INTO v_res;

    IF v_res.nodes <> v_res.mapped THEN
        -- the source itself went away between the first look and the copy
        RAISE EXCEPTION USING ERRCODE = 'no_data_found';
    ELSIF v_res.referenced <> v_res.shared THEN
        RAISE EXCEPTION 'jfs.clone: % of the source''s slices were freed while the clone ran', v_res.shared - v_res.referenced
            USING ERRCODE = 'serialization_failure', HINT = 'The source changed under the clone; run it again.';
    END IF;
    UPDATE node SET nlink = nlink + CASE WHEN v_src_type = 2 THEN 1 ELSE 0 END, mtime = v_now, ctime = v_now
     WHERE node.inode = p_dst_parent;

    -- usage: every entry of the clone is under the destination's quota
    -- roots (the new directories have no quota of their own); the new
    -- nodes count for the volume and their owners. Over a limit, the
    -- whole clone is undone.
    v_roots := _quota_roots(par.qroot);
    v_quota_errno := _charge(false, NULL, NULL, v_roots, 0,
                             (SELECT sum(i)::bigint FROM unnest(v_res.dir_inodes) i),
                             (SELECT sum(sp)::bigint FROM unnest(v_res.dir_spaces) sp), par.quota_limits);
    IF v_quota_errno = 0 THEN
        v_quota_errno := _charge(true, NULL, NULL, '{}', 0, v_res.nodes, v_res.space, par.quota_limits);
    END IF;
    IF par.owner_quotas THEN
        FOR v_owner IN SELECT * FROM unnest(v_res.uids, v_res.gids, v_res.owner_inodes, v_res.owner_spaces)
                                     u(uid, gid, inodes, space)
        LOOP
            EXIT WHEN v_quota_errno <> 0;
            v_quota_errno := _charge(false, v_owner.uid, v_owner.gid, '{}', 0, v_owner.inodes, v_owner.space,
                                     par.quota_limits);
        END LOOP;
    END IF;
    IF v_quota_errno <> 0 THEN
        -- what was charged already goes with the rest of the clone
        RAISE EXCEPTION 'over quota' USING ERRCODE = 'JQ000';
    END IF;
    INSERT INTO dir_stats AS d (inode, stripe, space, inodes, length)
    SELECT u.dir, _stripe(), u.space, u.inodes, u.length
      FROM unnest(v_res.dirs, v_res.dir_spaces, v_res.dir_inodes, v_res.dir_lengths) u(dir, space, inodes, length)
        ON CONFLICT ON CONSTRAINT dir_stats_pkey
        DO UPDATE SET space = d.space + excluded.space, inodes = d.inodes + excluded.inodes,
                      length = d.length + excluded.length;
    INSERT INTO change (op, inode, parent, name, inode2, uid, gid)
    SELECT 'clone', n.inode, p_dst_parent, p_dst_name, p_src, n.uid, n.gid FROM node n WHERE n.inode = v_res.root;
    RETURN QUERY SELECT 0, v_res.root, v_res.nodes, v_res.space;
EXCEPTION
    WHEN unique_violation THEN
        -- the name was taken by a create that committed after the check above
        RETURN QUERY SELECT 17, NULL::bigint, 0::bigint, 0::bigint;
    WHEN no_data_found THEN
        RETURN QUERY SELECT 2, NULL::bigint, 0::bigint, 0::bigint;
    WHEN SQLSTATE 'JQ000' THEN
        RETURN QUERY SELECT v_quota_errno, NULL::bigint, 0::bigint, 0::bigint;
END
$$;

CREATE OR REPLACE FUNCTION check_quota(p_kind text DEFAULT NULL, p_key bigint DEFAULT NULL, p_repair boolean DEFAULT false)
RETURNS TABLE (kind text, key bigint, path text, counted_inodes bigint, counted_space bigint,
               recorded_inodes bigint, recorded_space bigint, ok boolean, repaired boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    q record;
    c record;
    u record;
BEGIN
    IF p_repair THEN
        IF NOT _is_admin() THEN
            RAISE EXCEPTION 'jfs: repairing quotas is administration (jfs.grant_admin)'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        LOCK TABLE node IN EXCLUSIVE MODE;
    END IF;
    FOR q IN SELECT x.kind, x.key FROM quota x
              WHERE (p_kind IS NULL OR x.kind = p_kind) AND (p_key IS NULL OR x.key = p_key)
              ORDER BY x.kind, x.key
    LOOP
        c := _quota_count(q.kind, q.key);
        SELECT coalesce(sum(x.inodes), 0) AS inodes, coalesce(sum(x.space), 0) AS space INTO u
          FROM quota_usage x WHERE x.kind = q.kind AND x.key = q.key;
        kind := q.kind; key := q.key;
        path := CASE WHEN q.kind = 'dir' THEN jfs.path(q.key) END;
        counted_inodes := c.inodes; counted_space := c.space;
        recorded_inodes := u.inodes; recorded_space := u.space;
        ok := c.inodes = u.inodes AND c.space = u.space;
        repaired := p_repair AND NOT ok;
        IF repaired THEN
            PERFORM _quota_store(q.kind, q.key, c.inodes, c.space);
            PERFORM _quota_reshare(q.kind, q.key, 0, 0);
        END IF;
        RETURN NEXT;
    END LOOP;
    IF p_repair AND p_kind IS NULL AND p_key IS NULL THEN
        DELETE FROM dir_stats;
        INSERT INTO dir_stats (inode, stripe, space, inodes, length)
        SELECT e.parent, 0, sum(_node_space(n.type, n.length)), count(*), sum(n.length)
          FROM edge e JOIN node n ON n.inode = e.inode GROUP BY e.parent;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION summary_of(p_inode bigint, p_depth integer DEFAULT 0)
RETURNS TABLE (inode bigint, path text, depth integer, dirs bigint, files bigint, length bigint, space bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    n node;
BEGIN
    SELECT * INTO n FROM node x WHERE x.inode = p_inode;
    IF NOT FOUND THEN
        RETURN;
    ELSIF n.type <> 2 THEN
        RETURN QUERY SELECT n.inode, jfs.path(n.inode), 0, 0::bigint, 1::bigint, n.length, _node_space(n.type, n.length);
        RETURN;
    END IF;
    RETURN QUERY
    WITH RECURSIVE t(inode, depth, tops) AS (
        SELECT p_inode, 0, ARRAY[p_inode]
        UNION ALL
        SELECT e.inode, t.depth + 1, CASE WHEN t.depth < greatest(p_depth, 0) THEN t.tops || e.inode ELSE t.tops END
          FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
    ), own AS (
        -- each directory's direct children
        SELECT t.inode, t.tops, coalesce(sum(s.inodes), 0) AS entries, coalesce(sum(s.space), 0) AS space,
               coalesce(sum(s.length), 0) AS length
          FROM t LEFT JOIN dir_stats s ON s.inode = t.inode GROUP BY t.inode, t.tops
    ), rolled AS (
        SELECT top.inode, count(*) AS dirs, sum(o.entries) AS entries, sum(o.space) AS space,
               sum(o.length) AS length
          FROM own o CROSS JOIN LATERAL unnest(o.tops) top(inode) GROUP BY top.inode
    )
    SELECT r.inode, jfs.path(r.inode), t.depth, r.dirs, (r.entries - (r.dirs - 1))::bigint,
           (r.length + 4096 * r.dirs)::bigint, (r.space + 4096)::bigint
      FROM rolled r JOIN t ON t.inode = r.inode
     ORDER BY t.depth, r.length + 4096 * r.dirs DESC, r.inode;
END
$$;

CREATE OR REPLACE FUNCTION summary(p_path text DEFAULT '/', p_depth integer DEFAULT 0)
RETURNS TABLE (path text, depth integer, dirs bigint, files bigint, length bigint, space bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_inode bigint := resolve(p_path);
BEGIN
    IF v_inode IS NULL THEN
        RAISE EXCEPTION 'jfs.summary: % does not exist', coalesce(p_path, 'NULL')
            USING ERRCODE = 'undefined_object', HINT = 'Paths are absolute, from the volume''s root.';
    END IF;
    RETURN QUERY SELECT s.path, s.depth, s.dirs, s.files, s.length, s.space FROM summary_of(v_inode, p_depth) s;
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

CREATE OR REPLACE VIEW dir_usage AS
SELECT s.inode, jfs.path(s.inode) AS path, sum(s.inodes)::bigint AS inodes, sum(s.space)::bigint AS space,
       sum(s.length)::bigint AS length
  FROM dir_stats s GROUP BY s.inode;

-- ---------------------------------------------------------------------------
-- Lookups that read ahead, for mounts whose callers stat a big
-- directory's names one by one.

CREATE OR REPLACE FUNCTION lookup_ahead(p_dir bigint, p_name bytea, p_limit integer DEFAULT 1000)
RETURNS TABLE (name bytea, inode bigint, type smallint, mode integer, uid bigint, gid bigint, atime bigint,
               mtime bigint, ctime bigint, nlink integer, length bigint, rdev bigint, parent bigint,
               tier smallint, used bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH here AS (
        SELECT e.cookie FROM edge e WHERE e.parent = p_dir AND e.name = p_name
    ), ahead AS (
        (SELECT e.name, e.inode FROM edge e, here h
          WHERE e.parent = p_dir AND e.cookie >= h.cookie
          ORDER BY e.cookie LIMIT least(greatest(coalesce(p_limit, 1000), 0), 10000) + 1)
        UNION
        (SELECT e.name, e.inode FROM edge e, here h
          WHERE e.parent = p_dir AND e.name >= p_name
          ORDER BY e.name LIMIT least(greatest(coalesce(p_limit, 1000), 0), 10000) + 1)
    )
    SELECT a.name, n.inode, n.type, n.mode, n.uid, n.gid, n.atime, n.mtime, n.ctime, n.nlink, n.length, n.rdev,
           n.parent, n.tier, n.used
      FROM ahead a JOIN node n ON n.inode = a.inode
$$;

-- ---------------------------------------------------------------------------
-- jfs destroy: destroy_begin marks the volume (setting.destroying), after
-- which no session opens; destroy_finish empties it once its objects are
-- deleted.

ALTER TABLE setting ADD COLUMN destroying timestamptz;

CREATE OR REPLACE FUNCTION _destroyed() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'jfs: the volume is being destroyed (jfs destroy): nothing changes in it any more'
        USING ERRCODE = 'object_not_in_prerequisite_state';
END
$$;

CREATE OR REPLACE FUNCTION _begin() RETURNS setting
LANGUAGE plpgsql AS $$
DECLARE
    s setting;
BEGIN
    SELECT * INTO s FROM setting;
    IF s.destroying IS NOT NULL THEN
        PERFORM _destroyed();
    END IF;
    PERFORM _durability(s.meta_durability);
    RETURN s;
END
$$;

CREATE OR REPLACE FUNCTION _refuse_if_destroying() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_destroying timestamptz;
BEGIN
    SELECT s.destroying INTO v_destroying FROM setting s FOR SHARE;
    IF NOT FOUND THEN
        -- (a destroy_finish that emptied the volume while this waited)
        RAISE EXCEPTION 'jfs: the database holds no volume: no session opens'
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'jfs format makes one.';
    ELSIF v_destroying IS NOT NULL THEN
        RAISE EXCEPTION 'jfs: the volume is being destroyed (jfs destroy): no session opens'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('jfs destroy began at %s.', v_destroying),
                  HINT = 'Run jfs destroy again to finish removing it, then jfs format a new volume.';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION session_register(p_host text DEFAULT '', p_pid integer DEFAULT 0, p_info jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
BEGIN
    PERFORM _refuse_if_destroying();
    INSERT INTO session (host, pid, info) VALUES (coalesce(p_host, ''), coalesce(p_pid, 0), coalesce(p_info, '{}'))
    RETURNING sid INTO v_sid;
    RETURN v_sid;
END
$$;

CREATE OR REPLACE FUNCTION session_open(p_host text, p_pid integer, p_info jsonb, p_timeout interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_sid bigint;
BEGIN
    PERFORM _refuse_if_destroying();
    INSERT INTO session (host, pid, info, session_timeout)
    VALUES (coalesce(p_host, ''), coalesce(p_pid, 0), coalesce(p_info, '{}'),
            greatest(coalesce(p_timeout, '5 minutes'), '1 second'))
    RETURNING sid INTO v_sid;
    RETURN v_sid;
END
$$;

CREATE OR REPLACE FUNCTION destroy_begin(p_uuid uuid, p_force boolean DEFAULT false, OUT errno integer, OUT message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting;
    v_live bigint;
BEGIN
    -- the row lock orders this with session_open (which reads it FOR SHARE)
    SELECT * INTO s FROM setting FOR UPDATE;
    IF NOT FOUND THEN
        errno := 2; message := 'the database holds no volume';
        RETURN;
    ELSIF s.uuid IS DISTINCT FROM p_uuid THEN
        errno := 22;
        message := pg_catalog.format('the volume here is %s (uuid %s), not %s: give its uuid (jfs status shows it)',
                                     s.name, s.uuid, coalesce(p_uuid::text, 'NULL'));
        RETURN;
    END IF;
    SELECT count(*) INTO v_live FROM session x
     WHERE x.heartbeat > now() - coalesce(x.session_timeout, interval '5 minutes');
    IF v_live > 0 AND NOT coalesce(p_force, false) THEN
        errno := 16;
        message := pg_catalog.format('%s session(s) of the volume are live (see jfs status): unmount it everywhere '
                                     'first, or pass --force to end them', v_live);
        RETURN;
    END IF;
    DELETE FROM lock_wait; DELETE FROM plock; DELETE FROM sustained; DELETE FROM session;
    UPDATE setting SET destroying = coalesce(destroying, now());
    errno := 0;
END
$$;

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
     WHERE c.relnamespace = 'jfs'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname <> 'client_role';
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

CREATE OR REPLACE FUNCTION admin_procedures() RETURNS name[]
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp
RETURN ARRAY['format', 'set_quota', 'set_user_quota', 'set_group_quota', 'set_volume_quota',
             'delete_quota', 'delete_user_quota', 'delete_group_quota',
             'set_tier_class', 'set_tier', 'enable_acl', 'set_changelog_retention',
             'load_begin', 'load_staged', 'fsck_repair', 'set_retain_deleted', 'destroy_begin',
             'destroy_finish']::name[];

REVOKE EXECUTE ON FUNCTION _dir_stats_add(bigint, bigint, bigint, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _charge(boolean, bigint, bigint, bigint[], bigint, bigint, bigint, boolean, bigint)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _uncharge_entry(bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _charge_space(bigint, bigint, bigint, bigint, boolean, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _uncharge_entries(bigint[], bigint[], bigint[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION summary_of(bigint, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION summary(text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _refuse_if_destroying() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _destroyed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION lookup_ahead(bigint, bytea, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION _write_slice(bigint, integer, integer, bigint, integer, integer, integer, bigint, boolean)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION destroy_begin(uuid, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION destroy_finish(uuid) FROM PUBLIC;
