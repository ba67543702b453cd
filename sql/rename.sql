-- rename(2) and renameat2(2) in one transaction: replace, RENAME_NOREPLACE
-- (flag 1), RENAME_EXCHANGE (flag 2), the loop check for directories, nlink
-- and times of both parents.

-- True if p_anc is p_dir or one of its ancestors.
CREATE FUNCTION _is_ancestor(p_anc bigint, p_dir bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_cur bigint := p_dir;
BEGIN
    FOR depth IN 1..100000 LOOP
        IF v_cur = p_anc THEN
            RETURN true;
        ELSIF v_cur = 1 OR v_cur IS NULL THEN
            RETURN false;
        END IF;
        SELECT parent INTO v_cur FROM node WHERE inode = v_cur;
    END LOOP;
    RAISE EXCEPTION 'jfs: directory % is more than 100000 levels deep (or the tree has a cycle)', p_dir;
END
$$;

-- Moves (p_parent, p_name) to (p_new_parent, p_new_name). A replaced
-- non-directory loses that link and, at zero links, is freed unless the
-- session p_sid has it open (p_open_inodes). Directories that move between
-- parents take a volume-wide transaction lock first (as Linux takes its
-- per-superblock rename mutex), so two renames can never build a cycle.
-- Nothing moves to /.trash or /.jfs.control, and the trash does not move
-- (EPERM). Returns errno, the moved inode, and the replaced (or exchanged)
-- inode with its nlink after the call (0 and NULL when nothing was replaced).
CREATE FUNCTION rename(
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
    v_shard integer;
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
        SELECT se.inode, se.type, de.inode, de.type, st.meta_durability, st.skip_dir_mtime_ns, st.destroying,
               st.shard
          INTO v_src, v_src_type, v_dst, v_dst_type, v_mode, v_skip, v_destroying, v_shard
          FROM setting st
          LEFT JOIN edge se ON se.parent = p_parent AND se.name = p_name
          LEFT JOIN edge de ON de.parent = p_new_parent AND de.name = p_new_name;
        IF v_destroying IS NOT NULL THEN
            PERFORM _destroyed();
        ELSIF v_src IS NULL THEN
            errno := _missing(p_parent, p_name); RETURN;
        ELSIF v_src = _trash_inode() THEN
            errno := 1; RETURN;
        ELSIF (v_src >> 48) NOT IN (32767, v_shard) OR (v_dst >> 48) NOT IN (32767, v_shard) THEN
            -- a shard root moves or is replaced only where its node is
            errno := 18; RETURN;
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

-- ---------------------------------------------------------------------------
-- Moving into the trash (sql/trash.sql says what the trash is): what
-- rename-over, unlink, rmdir and rmr remove goes there by rename, and
-- rename moves what it replaces there, so both live in this file.

-- Whether directory p_dir is the trash or one of its hours: removing from
-- there really deletes.
CREATE FUNCTION _in_trash(p_dir bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN p_dir = _trash_inode()
        OR EXISTS (SELECT 1 FROM node n WHERE n.inode = p_dir AND n.parent = _trash_inode());
END
$$;

-- The trash's hour directory for now, made (with /.trash) when missing.
CREATE FUNCTION _trash_hour() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_name bytea := convert_to(to_char(pg_catalog.now() AT TIME ZONE 'UTC', 'YYYY-MM-DD-HH24'), 'UTF8');
    v_hour bigint;
    r attr;
BEGIN
    SELECT e.inode INTO v_hour FROM edge e WHERE e.parent = _trash_inode() AND e.name = v_name;
    IF FOUND THEN
        RETURN v_hour;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM node WHERE inode = _trash_inode()) THEN
        r := mknod(1, '\x2e7472617368'::bytea, 2, 448, 0, 0, 0, NULL, _trash_inode());  -- '.trash', 0700
        IF r.errno = 17 AND NOT EXISTS (SELECT 1 FROM node WHERE inode = _trash_inode()) THEN
            RAISE EXCEPTION 'jfs: cannot make /.trash: the root has an entry .trash that is not the trash'
                USING HINT = 'Rename it (a volume made before jfs 0.2.2 let anyone make one), then remove again.';
        ELSIF r.errno NOT IN (0, 17) THEN
            RAISE EXCEPTION 'jfs: cannot make /.trash (errno %)', r.errno;
        END IF;
    END IF;
    r := mknod(_trash_inode(), v_name, 2, 448, 0, 0);
    IF r.errno = 17 THEN
        SELECT e.inode INTO v_hour FROM edge e WHERE e.parent = _trash_inode() AND e.name = v_name;
        RETURN v_hour;
    ELSIF r.errno <> 0 THEN
        RAISE EXCEPTION 'jfs: cannot make the trash hour % (errno %)', convert_from(v_name, 'UTF8'), r.errno;
    END IF;
    RETURN r.inode;
END
$$;

-- The name of entry p_name of p_parent (node p_inode) in the trash (cut to
-- 255 bytes: see trash_name).
CREATE FUNCTION _trash_name(p_parent bigint, p_inode bigint, p_name bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(convert_to(p_parent || '-' || p_inode || '-', 'UTF8') || p_name FROM 1 FOR 255)
$$;

-- The original directory and name of a trash entry's name.
CREATE FUNCTION _trash_parse(p_name bytea, OUT parent bigint, OUT name bytea)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_dash1 integer := position('\x2d'::bytea IN p_name);
    v_rest bytea;
    v_dash2 integer;
BEGIN
    IF v_dash1 < 2 THEN
        RETURN;
    END IF;
    v_rest := substring(p_name FROM v_dash1 + 1);
    v_dash2 := position('\x2d'::bytea IN v_rest);
    IF v_dash2 < 2 OR convert_from(substring(p_name FROM 1 FOR v_dash1 - 1), 'SQL_ASCII') !~ '^[0-9]{1,19}$' THEN
        RETURN;
    END IF;
    parent := convert_from(substring(p_name FROM 1 FOR v_dash1 - 1), 'SQL_ASCII')::bigint;
    name := substring(v_rest FROM v_dash2 + 1);
END
$$;

-- Moves entry p_name of p_parent into the trash if the volume has one and
-- p_parent is not in it; returns errno (0 moved), or NULL when the caller
-- should delete as usual.
CREATE FUNCTION _to_trash(p_parent bigint, p_name bytea) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_inode bigint;
    v_hour bigint;
    v_trash_name bytea;
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM setting WHERE trash_days > 0) OR _in_trash(p_parent) THEN
        RETURN NULL;
    END IF;
    SELECT e.inode INTO v_inode FROM edge e WHERE e.parent = p_parent AND e.name = p_name;
    IF v_inode IS NULL THEN
        RETURN NULL;
    END IF;
    v_hour := _trash_hour();
    v_trash_name := _trash_name(p_parent, v_inode, p_name);
    SELECT * INTO r FROM rename(p_parent, p_name, v_hour, v_trash_name, 1);
    IF r.errno = 0 AND (_trash_parse(v_trash_name)).name IS DISTINCT FROM p_name THEN
        INSERT INTO trash_name (hour, name, original) VALUES (v_hour, v_trash_name, p_name)
            ON CONFLICT (hour, name) DO UPDATE SET original = EXCLUDED.original;
    ELSIF r.errno = 0 THEN
        DELETE FROM trash_name t WHERE t.hour = v_hour AND t.name = v_trash_name;  -- left by an entry removed
    END IF;
    RETURN r.errno;
END
$$;
