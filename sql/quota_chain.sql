-- Directory quotas' chains: each directory quota knows the quota roots at
-- and above it (mknod reads the chain with the parent, so a create charges
-- without walking up the tree), and a rename moves an entry's usage from
-- the quotas of its old place to those of its new one. See usage.sql for
-- the accounting as a whole.

-- The directory quotas charged for an entry of a directory whose qroot is
-- p_qroot: that root, then the roots above it, nearest first (the root's
-- chain, kept by _quota_chains).
CREATE FUNCTION _quota_roots(p_qroot bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_qroot > 0 THEN
        RETURN coalesce((SELECT q.chain FROM quota q WHERE q.kind = 'dir' AND q.key = p_qroot), '{}');
    END IF;
    RETURN '{}'::bigint[];
END
$$;

-- Sets the chain of every directory quota (itself, then the roots above it,
-- nearest first) from the namespace; after a directory quota comes or goes
-- and after a directory moves from one quota root to another.
CREATE FUNCTION _quota_chains() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH RECURSIVE up(key, root, chain) AS (
        SELECT q.key, q.key, ARRAY[q.key] FROM quota q WHERE q.kind = 'dir'
        UNION ALL
        SELECT u.key, p.qroot, u.chain || p.qroot
          FROM up u JOIN node r ON r.inode = u.root JOIN node p ON p.inode = r.parent
         WHERE r.inode <> 1 AND p.qroot > 0 AND cardinality(u.chain) < 10000
    )
    UPDATE quota q SET chain = c.chain
      FROM (SELECT DISTINCT ON (u.key) u.key, u.chain FROM up u ORDER BY u.key, cardinality(u.chain) DESC) c
     WHERE q.kind = 'dir' AND q.key = c.key AND q.chain IS DISTINCT FROM c.chain;
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
