-- The change log (table change, sql/schema.sql) for people and programs:
-- jfs.changes shows every row kept, with paths; jfs.changes_since(id) gives
-- a consumer that keeps its own bookmark each change exactly once, in an
-- order that is final; changelog_prune keeps the log within its age and
-- size (the mounts call it in the background). The procedures that change
-- the file system write the rows, each in its own transaction.
--
-- Ops: create, mkdir, symlink, mknod, link, unlink, rmdir, rename,
-- exchange, setattr, truncate, write, compact, setxattr, removexattr,
-- setacl, rmr (one row per step of a tree's removal), clone, tier,
-- tier_tree (a tier set on a whole tree).

-- The path of entry p_name of directory p_parent as far as it resolves now
-- (NULL once the directory is gone). Qualified names: a view inlines it in
-- the reader's search_path.
CREATE FUNCTION _entry_path(p_parent bigint, p_name bytea) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_parent = 1 THEN '/' ELSE jfs.path(p_parent) || '/' END || jfs._name_text(p_name)
$$;

-- Every change kept, with its paths as they resolve now: path is the entry
-- made, removed or renamed (or the node's path when the change is to a
-- node), path2 where a rename or clone put it; xattr names the extended
-- attribute of setxattr/removexattr. Order by id (insertion) or use
-- changes_since.
CREATE VIEW changes AS
SELECT c.id, c.at, c.op,
       CASE WHEN c.parent IS NOT NULL THEN _entry_path(c.parent, c.name) ELSE path(c.inode) END AS path,
       _entry_path(c.parent2, c.name2) AS path2,
       CASE WHEN c.parent IS NULL THEN _name_text(c.name) END AS xattr,
       c.inode, c.inode2, c.uid, c.gid, c.session
  FROM change c;

-- The changes after change p_after (0: from the oldest kept), at most
-- p_limit, for a consumer that keeps the last id it saw as its bookmark.
-- Transactions commit in another order than their rows' ids, so a change
-- is given only once every transaction that could still add a row before it
-- is over (the row's transaction is older than the snapshot's xmin), and in
-- the order (xid, id), which such late rows cannot enter: a consumer sees
-- every change once, none later than its successors. A long-running writing
-- transaction holds the feed back (not the mounts, which read the log
-- themselves) until it ends. A bookmark that was pruned is an error: the
-- changes in between are lost to that consumer.
CREATE FUNCTION changes_since(p_after bigint DEFAULT 0, p_limit integer DEFAULT 10000)
RETURNS SETOF changes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_horizon xid8 := pg_snapshot_xmin(pg_current_snapshot());
    v_after_xid xid8;
BEGIN
    IF coalesce(p_after, 0) > 0 THEN
        SELECT c.xid INTO v_after_xid FROM change c WHERE c.id = p_after;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jfs.changes_since: change % is not in the change log', p_after
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'It was pruned (the log keeps jfs.setting.changelog_max_age and changelog_max_rows) '
                             'or never committed: the changes after it are lost to this bookmark; '
                             'start again from 0 or from an id of jfs.changes.';
        END IF;
    END IF;
    RETURN QUERY
        SELECT v.*
          FROM (SELECT c.id, c.xid FROM change c
                 WHERE c.xid < v_horizon
                   AND (v_after_xid IS NULL OR (c.xid, c.id) > (v_after_xid, p_after))
                 ORDER BY c.xid, c.id
                 LIMIT greatest(coalesce(p_limit, 10000), 1)) k
          JOIN changes v ON v.id = k.id
         ORDER BY k.xid, k.id;
END
$$;

-- Deletes, oldest first and at most p_limit per call, the rows older than
-- setting.changelog_max_age and those more than changelog_max_rows ids
-- below the newest (so at most that many are kept). Returns the rows deleted.
CREATE FUNCTION changelog_prune(p_limit integer DEFAULT 100000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_max_age interval;
    v_max_rows bigint;
    v_newest bigint;
    v_count bigint;
BEGIN
    SELECT s.changelog_max_age, s.changelog_max_rows INTO v_max_age, v_max_rows FROM setting s;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT max(c.id) INTO v_newest FROM change c;
    DELETE FROM change c
     WHERE c.id IN (SELECT o.id FROM change o ORDER BY o.id LIMIT greatest(coalesce(p_limit, 100000), 1))
       AND (c.at < now() - v_max_age OR c.id <= v_newest - v_max_rows);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Sets how long and how many rows the change log keeps (NULL: unchanged).
-- Administration (jfs config --changelog-max-age / --changelog-max-rows).
CREATE FUNCTION set_changelog_retention(p_max_age interval DEFAULT NULL, p_max_rows bigint DEFAULT NULL,
                                        OUT max_age interval, OUT max_rows bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    IF p_max_age < interval '1 minute' THEN
        RAISE EXCEPTION 'jfs.set_changelog_retention: the change log keeps changes at least a minute, not %', p_max_age
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Mounts read the log behind its newest rows; a feed consumer needs time to catch up.';
    ELSIF p_max_rows < 1000 THEN
        RAISE EXCEPTION 'jfs.set_changelog_retention: the change log keeps at least 1000 changes, not %', p_max_rows
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE setting s SET changelog_max_age = coalesce(p_max_age, s.changelog_max_age),
                         changelog_max_rows = coalesce(p_max_rows, s.changelog_max_rows)
    RETURNING s.changelog_max_age, s.changelog_max_rows INTO max_age, max_rows;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jfs.set_changelog_retention: the volume is not formatted'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;

-- For mounts, which keep the kernel's caches in step with the others: the
-- changes of the transactions that the snapshot p_horizon (an earlier
-- call's; NULL: none, just the horizon) did not see, that the session p_sid
-- did not make or made where its kernel cannot know (trees removed or cloned
-- server-side, tiers, moves into the trash, /.trash made), and the new horizon: this call's snapshot. Each change comes exactly
-- once. Only the transactions running at p_horizon and those begun after
-- it are read, so a long transaction that writes nothing to the volume
-- (another application's, or one in another database) costs nothing; a
-- horizon of transaction ids (changes_for_mount) re-read everything since
-- such a transaction at every poll. The first row carries only the horizon.
CREATE FUNCTION mount_changes(p_sid bigint, p_horizon pg_snapshot)
RETURNS TABLE (horizon pg_snapshot, id bigint, op text, inode bigint, parent bigint, name bytea,
               parent2 bigint, name2 bytea, inode2 bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH h AS (SELECT pg_current_snapshot() AS now)
    SELECT h.now, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::bytea, NULL::bigint,
           NULL::bytea, NULL::bigint
      FROM h
    UNION ALL
    SELECT h.now, c.id, c.op, c.inode, c.parent, c.name, c.parent2, c.name2, c.inode2
      FROM h, change c
     WHERE p_horizon IS NOT NULL
       AND (c.xid >= pg_snapshot_xmax(p_horizon)
            OR c.xid = ANY (ARRAY(SELECT pg_snapshot_xip(p_horizon))))
       AND (c.session IS DISTINCT FROM p_sid OR c.op IN ('rmr', 'clone', 'tier', 'tier_tree')
            OR _in_trash(coalesce(c.parent2, c.parent)) OR c.inode = _trash_inode())
$$;

-- For mounts of jfs 0.2.1 and older (see mount_changes): the
-- changes of transactions from p_horizon on (a horizon an earlier call
-- returned; NULL: none, just the horizon) that the session p_sid did not
-- make, or made where its kernel cannot know (trees removed or cloned
-- server-side, tiers, moves into the trash, /.trash made), and the new horizon. Every
-- change of a transaction older than the horizon is in this answer or an
-- earlier one; those of transactions running at it come again in the next
-- (a mount skips ids it applied; applying twice is harmless anyway). The
-- first row carries only the horizon.
CREATE FUNCTION changes_for_mount(p_sid bigint, p_horizon bigint)
RETURNS TABLE (horizon bigint, id bigint, xid bigint, op text, inode bigint, parent bigint, name bytea,
               parent2 bigint, name2 bytea, inode2 bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x)
    SELECT h.x, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::bytea, NULL::bigint,
           NULL::bytea, NULL::bigint
      FROM h
    UNION ALL
    SELECT h.x, c.id, c.xid::text::bigint, c.op, c.inode, c.parent, c.name, c.parent2, c.name2, c.inode2
      FROM h, change c
     WHERE p_horizon IS NOT NULL AND c.xid >= p_horizon::text::xid8
       AND (c.session IS DISTINCT FROM p_sid OR c.op IN ('rmr', 'clone', 'tier', 'tier_tree')
            OR _in_trash(coalesce(c.parent2, c.parent)) OR c.inode = _trash_inode())
$$;
