-- SQL for people: paths in, paths out. Paths are text (UTF-8 names); a name
-- that is not valid UTF-8 shows as its escaped bytes (\x...).

-- A name as text.
CREATE FUNCTION _name_text(p_name bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN convert_from(p_name, 'UTF8');
EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
    RETURN encode(p_name, 'escape');
END
$$;

CREATE FUNCTION _type_name(p_type smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (ARRAY['file', 'dir', 'symlink', 'fifo', 'blockdev', 'chardev', 'socket'])[p_type]
$$;

-- ls -l style mode: type letter and rwx triplets with s/S and t/T.
CREATE FUNCTION _mode_string(p_type smallint, p_mode integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (ARRAY['-', 'd', 'l', 'p', 'b', 'c', 's'])[p_type]
        || CASE WHEN p_mode & 256 <> 0 THEN 'r' ELSE '-' END
        || CASE WHEN p_mode & 128 <> 0 THEN 'w' ELSE '-' END
        || CASE WHEN p_mode & 2048 <> 0 THEN (CASE WHEN p_mode & 64 <> 0 THEN 's' ELSE 'S' END)
                WHEN p_mode & 64 <> 0 THEN 'x' ELSE '-' END
        || CASE WHEN p_mode & 32 <> 0 THEN 'r' ELSE '-' END
        || CASE WHEN p_mode & 16 <> 0 THEN 'w' ELSE '-' END
        || CASE WHEN p_mode & 1024 <> 0 THEN (CASE WHEN p_mode & 8 <> 0 THEN 's' ELSE 'S' END)
                WHEN p_mode & 8 <> 0 THEN 'x' ELSE '-' END
        || CASE WHEN p_mode & 4 <> 0 THEN 'r' ELSE '-' END
        || CASE WHEN p_mode & 2 <> 0 THEN 'w' ELSE '-' END
        || CASE WHEN p_mode & 512 <> 0 THEN (CASE WHEN p_mode & 1 <> 0 THEN 't' ELSE 'T' END)
                WHEN p_mode & 1 <> 0 THEN 'x' ELSE '-' END
$$;

-- The inode at an absolute path (symlinks are not followed), or NULL.
CREATE FUNCTION resolve(p_path text) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_cur bigint := 1;
    v_part text;
BEGIN
    IF p_path IS NULL OR NOT EXISTS (SELECT 1 FROM node WHERE inode = 1) THEN
        RETURN NULL;
    END IF;
    FOREACH v_part IN ARRAY string_to_array(p_path, '/') LOOP
        CONTINUE WHEN v_part = '' OR v_part = '.';
        IF v_part = '..' THEN
            SELECT n.parent INTO v_cur FROM node n WHERE n.inode = v_cur AND n.type = 2;
        ELSE
            SELECT e.inode INTO v_cur FROM edge e WHERE e.parent = v_cur AND e.name = convert_to(v_part, 'UTF8');
        END IF;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    END LOOP;
    RETURN v_cur;
END
$$;

-- A path of an inode ('/' for the root). A file with several links shows
-- the first by (parent, name); NULL for an inode with no name.
CREATE FUNCTION path(p_inode bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
    WITH RECURSIVE up(parent, name, depth) AS (
        SELECT e.parent, e.name, 0
          FROM (SELECT parent, name FROM edge WHERE inode = p_inode ORDER BY parent, name LIMIT 1) e
        UNION ALL
        SELECT e.parent, e.name, up.depth + 1
          FROM up JOIN edge e ON e.inode = up.parent
         WHERE up.parent <> 1 AND up.depth < 100000
    )
    SELECT CASE WHEN p_inode = 1 AND EXISTS (SELECT 1 FROM node WHERE inode = 1) THEN '/'
                ELSE (SELECT '/' || string_agg(_name_text(name), '/' ORDER BY depth DESC) FROM up)
           END
$$;

-- ls -l of a directory (its entries by name) or of a single file.
CREATE FUNCTION ls(p_path text DEFAULT '/')
RETURNS TABLE (name text, type text, size bigint, mode text, uid bigint, gid bigint,
               mtime timestamptz, nlink integer, inode bigint, tier smallint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_inode bigint := resolve(p_path);
    v_type smallint;
BEGIN
    IF v_inode IS NULL THEN
        RAISE EXCEPTION 'jfs.ls: % does not exist', p_path
            USING ERRCODE = 'undefined_object', HINT = 'Paths are absolute, from the volume''s root: jfs.ls(''/'').';
    END IF;
    SELECT n.type INTO v_type FROM node n WHERE n.inode = v_inode;
    IF v_type = 2 THEN
        RETURN QUERY
            SELECT _name_text(e.name), _type_name(n.type), n.length, _mode_string(n.type, n.mode), n.uid, n.gid,
                   to_timestamp(n.mtime / 1e9), n.nlink, n.inode, n.tier
              FROM edge e JOIN node n ON n.inode = e.inode
             WHERE e.parent = v_inode
             ORDER BY e.name;
    ELSE
        RETURN QUERY
            SELECT regexp_replace(p_path, '^.*/', ''), _type_name(n.type), n.length, _mode_string(n.type, n.mode),
                   n.uid, n.gid, to_timestamp(n.mtime / 1e9), n.nlink, n.inode, n.tier
              FROM node n WHERE n.inode = v_inode;
    END IF;
END
$$;

-- The message of an errno returned by the procedures.
CREATE FUNCTION _errno_text(p_errno integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_errno
        WHEN 2 THEN 'No such file or directory' WHEN 17 THEN 'File exists'
        WHEN 20 THEN 'Not a directory' WHEN 21 THEN 'Is a directory'
        WHEN 22 THEN 'Invalid argument' WHEN 28 THEN 'No space left on device'
        WHEN 36 THEN 'File name too long' WHEN 39 THEN 'Directory not empty'
        WHEN 122 THEN 'Disk quota exceeded'
        WHEN 18 THEN 'Invalid cross-device link (across shards of the volume)'
        ELSE 'errno ' || p_errno END
$$;

-- An absolute path split into its directory's inode and its last name
-- (as bytes); an error for '/' or a missing directory.
CREATE FUNCTION _split_path(p_fn text, p_path text, OUT parent bigint, OUT name bytea)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_path text := rtrim(p_path, '/');
    v_dir text;
BEGIN
    IF p_path IS NULL OR left(p_path, 1) <> '/' OR v_path = '' THEN
        RAISE EXCEPTION '%: % is not an absolute path below the root', p_fn, coalesce(p_path, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Paths start at the volume''s root, e.g. ''/data/x''.';
    END IF;
    v_dir := regexp_replace(v_path, '/[^/]*$', '');
    parent := resolve(CASE WHEN v_dir = '' THEN '/' ELSE v_dir END);
    name := convert_to(regexp_replace(v_path, '^.*/', ''), 'UTF8');
    IF parent IS NULL THEN
        RAISE EXCEPTION '%: %: No such file or directory', p_fn, CASE WHEN v_dir = '' THEN '/' ELSE v_dir END
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;

-- Removes the tree at p_path (or the file) in one transaction; returns the
-- number of entries removed. For huge trees, call jfs.rmr(parent, name,
-- limit) repeatedly (each call its own transaction) or use `jfs rmr`.
CREATE FUNCTION rmr(p_path text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    p record := _split_path('jfs.rmr', p_path);
    r record;
BEGIN
    SELECT * INTO r FROM rmr(p.parent, p.name, 2147483647);
    IF r.errno <> 0 THEN
        RAISE EXCEPTION 'jfs.rmr: %: %', p_path, _errno_text(r.errno) USING ERRCODE = 'undefined_object';
    END IF;
    RETURN r.removed;
END
$$;

-- Clones the file or tree at p_src to the new path p_dst in one transaction
-- (see jfs.clone_node: a snapshot of the source, data shared copy-on-write).
CREATE FUNCTION clone(p_src text, p_dst text, OUT inode bigint, OUT nodes bigint, OUT space bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_src bigint := resolve(p_src);
    d record;
    r record;
BEGIN
    IF v_src IS NULL THEN
        RAISE EXCEPTION 'jfs.clone: %: No such file or directory', coalesce(p_src, 'NULL')
            USING ERRCODE = 'undefined_object', HINT = 'Paths are absolute, from the volume''s root.';
    END IF;
    d := _split_path('jfs.clone', p_dst);
    SELECT * INTO r FROM clone_node(v_src, d.parent, d.name);
    IF r.errno <> 0 THEN
        RAISE EXCEPTION 'jfs.clone: %: %', p_dst, _errno_text(r.errno)
            USING ERRCODE = CASE r.errno WHEN 17 THEN 'duplicate_object' WHEN 2 THEN 'undefined_object'
                                         ELSE 'invalid_parameter_value' END;
    END IF;
    inode := r.inode; nodes := r.nodes; space := r.space;
END
$$;
