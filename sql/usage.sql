-- Usage accounting, done by the procedure that makes a change, in its
-- transaction (no client keeps counts):
--   per node   the volume ('fs', 0) and the owner's quotas ('user', uid) and
--              ('group', gid): a node counts one inode and its space once,
--              however many names it has;
--   per entry  dir_stats of the directory holding the entry and every
--              directory quota ('dir', r) at or above that directory: a file
--              with two names in two directories counts under both
--              (dir_stats also sums the entries' lengths, for jfs.summary).
-- Space is whole 4 KiB units of a file's length (at least one), one unit for
-- the other types (_node_space). Counters are striped: a transaction writes
-- the stripe its session claimed (16 rows per quota and per directory),
-- readers sum.
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
--
-- This file: space units, stripes, and the figures of each directory's
-- direct children. quota_chain.sql keeps each directory quota's chain of
-- roots and moves usage with a renamed entry; charge.sql charges and
-- uncharges the quotas.

-- Space charged for a node of this length: whole 4 KiB units, at least one.
CREATE FUNCTION _space(p_length bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN p_length <= 0 THEN 4096 ELSE ((p_length + 4095) / 4096) * 4096 END $$;

-- Claims a stripe for this session: the first of the 16, counting from its
-- backend's pid, that no other session of the database holds (a session
-- advisory lock, gone with the session), so up to 16 writing sessions never
-- share a counter row; pid % 16 when all are held. Kept for the session in
-- the setting jfs.stripe. (Declared STABLE though it takes a lock and sets
-- a setting: it gives the same answer for the rest of the session, and a
-- volatile call would keep PostgreSQL from inlining _stripe.)
CREATE FUNCTION _claim_stripe() RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_slot integer := pg_catalog.pg_backend_pid() % 16;
BEGIN
    FOR i IN 0 .. 15 LOOP
        -- 0x6a667300: 'jfs\0', the advisory lock space of jfs's stripes
        IF pg_catalog.pg_try_advisory_lock(1785099008, (pg_catalog.pg_backend_pid() + i) % 16) THEN
            v_slot := (pg_catalog.pg_backend_pid() + i) % 16;
            EXIT;
        END IF;
    END LOOP;
    PERFORM pg_catalog.set_config('jfs.stripe', v_slot::text, false);
    RETURN v_slot;
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
CREATE FUNCTION _last_version(p_slot text, p_row text) RETURNS tid
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := pg_catalog.current_setting('jfs.v_' || p_slot, true);
BEGIN
    RETURN CASE WHEN pg_catalog.split_part(v, '@', 1) = p_row THEN pg_catalog.split_part(v, '@', 2)::tid END;
END
$$;

-- Notes p_ctid as the version this transaction last wrote of row p_row in
-- slot p_slot (see _last_version).
CREATE FUNCTION _note_version(p_slot text, p_row text, p_ctid tid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('jfs.v_' || p_slot, p_row || '@' || p_ctid::text, true);
END
$$;

-- This transaction's stripe: the session's (see _claim_stripe), one of 16,
-- or of jfs.stripes (a setting, 1..16; 1 turns striping off, for
-- comparisons).
CREATE FUNCTION _stripe() RETURNS smallint
LANGUAGE sql STABLE AS $$
    SELECT (abs(coalesce(nullif(pg_catalog.current_setting('jfs.stripe', true), '')::integer, _claim_stripe()))
            % least(greatest(coalesce(nullif(pg_catalog.current_setting('jfs.stripes', true), '')::integer, 16), 1), 16)
           )::smallint
$$;

-- Space charged for a node of type p_type and length p_length.
CREATE FUNCTION _node_space(p_type smallint, p_length bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN p_type = 1 THEN _space(p_length) ELSE 4096 END $$;

-- Whether p_used may grow by p_add within p_share (NULL: no limit).
CREATE FUNCTION _fits(p_used bigint, p_share bigint, p_add bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT p_add <= 0 OR p_share IS NULL OR p_used + p_add <= p_share $$;

-- An owner's id when it may have a quota (p_owners: some user or group
-- quota exists; p_ids: the ids that have one, NULL when too many to list),
-- else NULL: nothing to charge.
CREATE FUNCTION _owner_key(p_owners boolean, p_ids bigint[], p_id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN p_owners AND (p_ids IS NULL OR p_id = ANY (p_ids)) THEN p_id END $$;

-- Adds to the direct-children figures of directory p_dir (p_length: to the
-- sum of their lengths).
CREATE FUNCTION _dir_stats_add(p_dir bigint, p_inodes bigint, p_space bigint, p_length bigint DEFAULT 0)
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
