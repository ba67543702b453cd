-- Removing one name: unlink and rmdir (into the trash when the volume has
-- one: sql/rename.sql). Whole trees: rmr, sql/batch.sql.

-- Removes the name p_name (not a directory) from p_parent. At zero links
-- the node is freed, unless p_open_inodes (the inodes the calling session
-- p_sid has open) holds it: then it stays (nlink 0) until that session releases it.
-- Returns the node as it is after the call (nlink 0 when it lost its last link).
CREATE FUNCTION unlink(p_parent bigint, p_name bytea, p_sid bigint DEFAULT 0, p_open_inodes bigint[] DEFAULT '{}')
RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_now bigint := _now();
    v record;
    par record;
    c node;
    v_trashed integer;
BEGIN
    PERFORM _unleased(ARRAY[p_parent]);
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

-- Removes the empty directory p_name from p_parent.
CREATE FUNCTION rmdir(p_parent bigint, p_name bytea) RETURNS attr
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    s setting := _begin();
    v_now bigint := _now();
    v_child bigint;
    v_type smallint;
    v_pqroot bigint;
    n node;
BEGIN
    IF p_name = '\x2e'::bytea THEN
        RETURN _err(22);
    ELSIF p_name = '\x2e2e'::bytea THEN
        RETURN _err(39);
    END IF;
    FOR attempt IN 1..5 LOOP
        SELECT e.inode, e.type INTO v_child, v_type FROM edge e WHERE e.parent = p_parent AND e.name = p_name;
        IF NOT FOUND THEN
            RETURN _err(_missing(p_parent, p_name));
        ELSIF v_child = _trash_inode() THEN
            RETURN _err(1);
        ELSIF v_type <> 2 THEN
            RETURN _err(20);
        ELSIF (v_child >> 48) NOT IN (32767, s.shard) THEN
            -- a shard root: its node and entries are its shard's
            RETURN _err(18);
        END IF;
        -- (the directory removed is read: it must not be leased elsewhere either)
        PERFORM _unleased(ARRAY[p_parent, v_child]);
        PERFORM _lock_nodes(ARRAY[p_parent, v_child], ARRAY['nokey', 'update']);
        IF EXISTS (SELECT 1 FROM edge WHERE parent = p_parent AND name = p_name AND inode = v_child) THEN
            IF NOT _dir_is_empty(v_child) THEN
                RETURN _err(39);
            END IF;
            -- with a trash, the directory moves there instead
            IF s.trash_days > 0 AND _to_trash(p_parent, p_name) = 0 THEN
                RETURN _attr(v_child);
            END IF;
            DELETE FROM edge WHERE parent = p_parent AND name = p_name;
            DELETE FROM node WHERE inode = v_child RETURNING * INTO n;
            DELETE FROM xattr WHERE inode = v_child;
            DELETE FROM acl WHERE inode = v_child;
            PERFORM _forget_dirs(ARRAY[v_child]);
            UPDATE node SET nlink = nlink - 1, mtime = v_now, ctime = v_now WHERE inode = p_parent
            RETURNING qroot INTO v_pqroot;
            PERFORM _uncharge_entry(p_parent, v_pqroot, 1, 4096);
            PERFORM _uncharge_nodes(ARRAY[n.uid], ARRAY[n.gid], ARRAY[4096::bigint]);
            n.nlink := 0;
            INSERT INTO change (op, inode, parent, name, uid, gid)
            VALUES ('rmdir', n.inode, p_parent, p_name, n.uid, n.gid);
            RETURN _to_attr(n);
        END IF;
    END LOOP;
    RAISE EXCEPTION 'rmdir: entry kept changing under concurrent renames; retry'
        USING ERRCODE = 'serialization_failure';
END
$$;
