-- Quotas for people: set, delete and check them, and see usage, in SQL.
-- Limits are bytes and inode counts; 0 means no limit. Directory quotas
-- are set by path and cover everything below the directory.

-- A quota's usage recounted from the namespace: the volume and user/group
-- quotas count nodes, a directory quota the entries below its directory.
CREATE FUNCTION _quota_count(p_kind text, p_key bigint, OUT inodes bigint, OUT space bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_kind = 'dir' THEN
        WITH RECURSIVE dirs(inode) AS (
            SELECT p_key
            UNION ALL
            SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2
        )
        SELECT count(*), coalesce(sum(_node_space(n.type, n.length)), 0) INTO inodes, space
          FROM edge e JOIN node n ON n.inode = e.inode
         WHERE e.parent IN (SELECT d.inode FROM dirs d);
    ELSE
        SELECT count(*), coalesce(sum(_node_space(n.type, n.length)), 0) INTO inodes, space
          FROM node n
         WHERE p_kind = 'fs' OR (p_kind = 'user' AND n.uid = p_key) OR (p_kind = 'group' AND n.gid = p_key);
    END IF;
END
$$;

-- Writes a recount into a quota's stripes (stripe 0 holds it, the others 0).
CREATE FUNCTION _quota_store(p_kind text, p_key bigint, p_inodes bigint, p_space bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO quota_usage AS x (kind, key, stripe, space, inodes)
    SELECT p_kind, p_key, s, CASE WHEN s = 0 THEN p_space ELSE 0 END, CASE WHEN s = 0 THEN p_inodes ELSE 0 END
      FROM generate_series(0, 15) s
        ON CONFLICT (kind, key, stripe) DO UPDATE SET space = excluded.space, inodes = excluded.inodes;
END
$$;

-- The directories of p_dir's subtree (itself included) whose nearest quota
-- root is p_root: where a new or removed quota on p_dir changes qroot.
CREATE FUNCTION _qroot_set(p_dir bigint, p_root bigint, p_new bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH RECURSIVE dirs(inode) AS (
        SELECT p_dir
        UNION ALL
        SELECT e.inode FROM dirs d JOIN edge e ON e.parent = d.inode AND e.type = 2
         WHERE NOT EXISTS (SELECT 1 FROM quota q WHERE q.kind = 'dir' AND q.key = e.inode)
    )
    UPDATE node n SET qroot = p_new WHERE n.inode IN (SELECT d.inode FROM dirs d) AND n.qroot = p_root;
END
$$;

-- The keys of the quotas of a kind, for setting.quota_uids/quota_gids: up to
-- 64 of them (NULL for more; the setting row is read by every create).
CREATE FUNCTION _quota_keys(p_kind text) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT CASE WHEN count(*) <= 64 THEN coalesce(array_agg(q.key ORDER BY q.key), '{}') END
              FROM quota q WHERE q.kind = p_kind);
END
$$;

-- Keeps setting.quota_limits / owner_quotas / quota_uids / quota_gids (read
-- by the hot paths) true to the quota table.
CREATE FUNCTION _quota_flags() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE setting SET quota_limits = EXISTS (SELECT 1 FROM quota q WHERE q.max_space > 0 OR q.max_inodes > 0),
                       owner_quotas = EXISTS (SELECT 1 FROM quota q WHERE q.kind IN ('user', 'group')),
                       quota_uids = _quota_keys('user'),
                       quota_gids = _quota_keys('group');
END
$$;

-- Sets the limits of a quota; a new one gets its usage counted once,
-- set-based. Metadata changes wait while it counts (they take row locks on
-- node, which this EXCLUSIVE table lock holds off; reads go on), so the
-- count is exact when it commits.
CREATE FUNCTION _set_quota(p_kind text, p_key bigint, p_space bigint, p_inodes bigint)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_new boolean;
    c record;
    v_old_root bigint;
BEGIN
    IF p_space IS NULL OR p_space < 0 OR p_inodes IS NULL OR p_inodes < 0 THEN
        RAISE EXCEPTION 'jfs: quota limits must be >= 0 (0 = no limit), not % bytes and % inodes', p_space, p_inodes
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOCK TABLE node IN EXCLUSIVE MODE;
    INSERT INTO quota AS q (kind, key, max_space, max_inodes) VALUES (p_kind, p_key, p_space, p_inodes)
        ON CONFLICT ON CONSTRAINT quota_pkey DO UPDATE SET max_space = excluded.max_space, max_inodes = excluded.max_inodes
    RETURNING (q.xmax = 0) INTO v_new;
    IF v_new THEN
        c := _quota_count(p_kind, p_key);
        PERFORM _quota_store(p_kind, p_key, c.inodes, c.space);
        IF p_kind = 'dir' THEN
            SELECT n.qroot INTO v_old_root FROM node n WHERE n.inode = p_key;
            PERFORM _qroot_set(p_key, v_old_root, p_key);
            PERFORM _quota_chains();
        END IF;
    END IF;
    PERFORM _quota_reshare(p_kind, p_key, 0, 0);
    PERFORM _quota_flags();
    RETURN QUERY SELECT q.kind, q.key, q.max_space, q.max_inodes, u.space::bigint, u.inodes::bigint
                   FROM quota q,
                        LATERAL (SELECT sum(x.space) AS space, sum(x.inodes) AS inodes FROM quota_usage x
                                  WHERE x.kind = q.kind AND x.key = q.key) u
                  WHERE q.kind = p_kind AND q.key = p_key;
END
$$;

-- Removes a quota (not the volume's); its directories take the nearest quota above.
CREATE FUNCTION _delete_quota(p_kind text, p_key bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_above bigint;
BEGIN
    LOCK TABLE node IN EXCLUSIVE MODE;
    DELETE FROM quota q WHERE q.kind = p_kind AND q.key = p_key;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM quota_usage x WHERE x.kind = p_kind AND x.key = p_key;
    IF p_kind = 'dir' THEN
        SELECT p.qroot INTO v_above FROM node d JOIN node p ON p.inode = d.parent
         WHERE d.inode = p_key AND d.inode <> 1;
        PERFORM _qroot_set(p_key, p_key, coalesce(v_above, 0));
        PERFORM _quota_chains();
    END IF;
    PERFORM _quota_flags();
    RETURN true;
END
$$;

-- The directory at an absolute path, or an error naming it.
CREATE FUNCTION _quota_dir(p_fn text, p_path text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_inode bigint := resolve(p_path);
BEGIN
    IF v_inode IS NULL THEN
        RAISE EXCEPTION '%: % does not exist', p_fn, coalesce(p_path, 'NULL')
            USING ERRCODE = 'undefined_object', HINT = 'Paths are absolute, from the volume''s root.';
    ELSIF NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = v_inode AND n.type = 2) THEN
        RAISE EXCEPTION '%: % is not a directory', p_fn, p_path USING ERRCODE = 'wrong_object_type';
    END IF;
    RETURN v_inode;
END
$$;

CREATE FUNCTION set_quota(p_path text, p_space bigint, p_inodes bigint DEFAULT 0)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM _set_quota('dir', _quota_dir('jfs.set_quota', p_path), p_space, p_inodes);
END
$$;

CREATE FUNCTION set_user_quota(p_uid bigint, p_space bigint, p_inodes bigint DEFAULT 0)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM _set_quota('user', p_uid, p_space, p_inodes);
END
$$;

CREATE FUNCTION set_group_quota(p_gid bigint, p_space bigint, p_inodes bigint DEFAULT 0)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM _set_quota('group', p_gid, p_space, p_inodes);
END
$$;

-- The volume's capacity and inode limit (format's --capacity / --inodes).
CREATE FUNCTION set_volume_quota(p_space bigint, p_inodes bigint DEFAULT 0)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM setting) THEN
        RAISE EXCEPTION 'jfs.set_volume_quota: the volume is not formatted' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN QUERY SELECT * FROM _set_quota('fs', 0, p_space, p_inodes);
END
$$;

CREATE FUNCTION delete_quota(p_path text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN _delete_quota('dir', _quota_dir('jfs.delete_quota', p_path));
END
$$;

CREATE FUNCTION delete_user_quota(p_uid bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN _delete_quota('user', p_uid);
END
$$;

CREATE FUNCTION delete_group_quota(p_gid bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN _delete_quota('group', p_gid);
END
$$;

-- A directory quota by the directory's inode (administration), for the
-- directories of a shard (sql/shard.sql), which have no path from the
-- volume's root in their own database: `jfs quota set --path` finds the
-- inode across shards. As set_quota otherwise: the quota counts this
-- database's nodes below it and stops at a shard root.
CREATE FUNCTION set_dir_quota(p_inode bigint, p_space bigint, p_inodes bigint DEFAULT 0)
RETURNS TABLE (kind text, key bigint, max_space bigint, max_inodes bigint, used_space bigint, used_inodes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = p_inode AND n.type = 2 AND n.nlink > 0) THEN
        RAISE EXCEPTION 'jfs.set_dir_quota: no directory % in this database', coalesce(p_inode::text, 'NULL')
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN QUERY SELECT * FROM _set_quota('dir', p_inode, p_space, p_inodes);
END
$$;

-- Removes the quota of the directory of inode p_inode (administration;
-- see set_dir_quota): whether there was one.
CREATE FUNCTION delete_dir_quota(p_inode bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN _delete_quota('dir', p_inode);
END
$$;

-- Where the node of inode p_inode is, from the entries of this database:
-- the topmost directory above it here (1, the volume's root; on a shard,
-- the shard root its entries lead to, whose own entry is in its parent's
-- database) and its path below that ('' for that directory itself).
CREATE FUNCTION place(p_inode bigint, OUT top bigint, OUT below text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    WITH RECURSIVE up(at, path, depth) AS (
        SELECT p_inode, ''::text, 0
        UNION ALL
        SELECT e.parent, '/' || _name_text(e.name) || u.path, u.depth + 1
          FROM up u
          JOIN LATERAL (SELECT x.parent, x.name FROM edge x WHERE x.inode = u.at
                         ORDER BY x.parent, x.name LIMIT 1) e ON true
         WHERE u.at <> 1 AND u.depth < 100000
    )
    SELECT u.at, u.path INTO top, below FROM up u ORDER BY u.depth DESC LIMIT 1;
END
$$;

-- The directory quotas of this database by inode, with where each
-- directory is (see place): what `jfs quota list` shows of a shard.
CREATE FUNCTION dir_quotas()
RETURNS TABLE (key bigint, top bigint, below text, max_space bigint, used_space bigint, max_inodes bigint,
               used_inodes bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT q.key, p.top, p.below, q.max_space, coalesce(u.space, 0)::bigint, q.max_inodes,
           coalesce(u.inodes, 0)::bigint
      FROM quota q
      CROSS JOIN LATERAL place(q.key) p
      LEFT JOIN LATERAL (SELECT sum(x.space) AS space, sum(x.inodes) AS inodes FROM quota_usage x
                          WHERE x.kind = 'dir' AND x.key = q.key) u ON true
     WHERE q.kind = 'dir'
     ORDER BY q.key
$$;

-- Recounts quotas (all, or one kind, or one key) from the namespace beside
-- their counters; with p_repair (administration: it locks every writer
-- out while it counts), writes the recount where they differ (and,
-- when checking all, recounts every directory's dir_stats too). Metadata
-- changes wait while a repair counts.
CREATE FUNCTION check_quota(p_kind text DEFAULT NULL, p_key bigint DEFAULT NULL, p_repair boolean DEFAULT false)
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

-- Usage of everything below a directory (from dir_stats, set-based): the
-- entries and their space, and how many of them are directories.
CREATE FUNCTION du(p_path text DEFAULT '/', OUT path text, OUT inodes bigint, OUT space bigint, OUT dirs bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_dir bigint := _quota_dir('jfs.du', p_path);
BEGIN
    path := jfs.path(v_dir);
    WITH RECURSIVE t(inode) AS (
        SELECT v_dir
        UNION ALL
        SELECT e.inode FROM t JOIN edge e ON e.parent = t.inode AND e.type = 2
    )
    SELECT coalesce(sum(s.inodes), 0), coalesce(sum(s.space), 0), (SELECT count(*) - 1 FROM t)
      INTO inodes, space, dirs
      FROM dir_stats s WHERE s.inode IN (SELECT t.inode FROM t);
END
$$;

-- Sizes and counts of the tree at node p_inode, from dir_stats (a walk of
-- its directories, none of its files): one row for it and one for each
-- directory down to p_depth levels below it, each with its whole subtree.
-- dirs counts the directories (itself included), files every other entry;
-- length is the apparent size, as `du --apparent-size` counts it (each
-- file's length, each symlink's target, 4096 per directory), and space is
-- what quotas count (4 KiB units). An entry with n names in the tree counts
-- n times (du counts a file with several names once). A node that is not a
-- directory: its own figures; none that is gone: no row.
CREATE FUNCTION summary_of(p_inode bigint, p_depth integer DEFAULT 0)
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

-- summary_of for the node at path p_path (absolute, from the volume's root).
CREATE FUNCTION summary(p_path text DEFAULT '/', p_depth integer DEFAULT 0)
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

-- The volume: limits and usage.
CREATE VIEW usage AS
SELECT q.max_space AS capacity, u.space AS used_space,
       CASE WHEN q.max_space > 0 THEN round(100.0 * u.space / q.max_space, 1) END AS space_percent,
       q.max_inodes AS max_inodes, u.inodes AS used_inodes,
       CASE WHEN q.max_inodes > 0 THEN round(100.0 * u.inodes / q.max_inodes, 1) END AS inodes_percent
  FROM quota q,
       LATERAL (SELECT sum(x.space)::bigint AS space, sum(x.inodes)::bigint AS inodes
                  FROM quota_usage x WHERE x.kind = q.kind AND x.key = q.key) u
 WHERE q.kind = 'fs' AND q.key = 0;

-- Every quota: which, limits, usage (exact as of the last commit).
CREATE VIEW quotas AS
SELECT q.kind,
       CASE WHEN q.kind = 'dir' THEN jfs.path(q.key) WHEN q.kind = 'fs' THEN '/' END AS path,
       CASE WHEN q.kind = 'user' THEN q.key END AS uid,
       CASE WHEN q.kind = 'group' THEN q.key END AS gid,
       q.max_space, u.space AS used_space,
       CASE WHEN q.max_space > 0 THEN round(100.0 * u.space / q.max_space, 1) END AS space_percent,
       q.max_inodes, u.inodes AS used_inodes,
       CASE WHEN q.max_inodes > 0 THEN round(100.0 * u.inodes / q.max_inodes, 1) END AS inodes_percent
  FROM quota q,
       LATERAL (SELECT sum(x.space)::bigint AS space, sum(x.inodes)::bigint AS inodes
                  FROM quota_usage x WHERE x.kind = q.kind AND x.key = q.key) u;

-- The rows of view quotas, for a client role (`jfs quota get|list|set`),
-- which reads no table or view itself.
CREATE FUNCTION list_quotas() RETURNS SETOF quotas
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT * FROM quotas
$$;

-- Every directory's direct children: entries, their space and the sum of
-- their lengths.
CREATE VIEW dir_usage AS
SELECT s.inode, jfs.path(s.inode) AS path, sum(s.inodes)::bigint AS inodes, sum(s.space)::bigint AS space,
       sum(s.length)::bigint AS length
  FROM dir_stats s GROUP BY s.inode;
