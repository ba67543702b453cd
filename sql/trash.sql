-- Trash: with format's trash_days > 0, what unlink, rmdir, rename-over and
-- rmr remove is moved (not deleted) into /.trash/YYYY-MM-DD-HH (UTC hour of
-- the removal) under the name PARENT-INODE-NAME, by the same rename a mount
-- uses. So the trash stays charged to the volume and to the user/group
-- quotas, but leaves the directory quota it was under (JuiceFS's rule).
-- Hours older than trash_days are purged (jfs.trash_purge, called by the
-- mounts in the background); jfs.restore puts entries back. A name cut to
-- fit the 255 bytes of an entry keeps its whole self in trash_name.

-- Whether directory p_dir is the trash or one of its hours: removing from
-- there really deletes.
CREATE FUNCTION _in_trash(p_dir bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_dir = _trash_inode() OR EXISTS (SELECT 1 FROM node n WHERE n.inode = p_dir AND n.parent = _trash_inode())
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

-- When trash hour p_hour (its name, 'YYYY-MM-DD-HH', in UTC) began, as a
-- UTC time whatever the session's time zone; NULL for another name.
CREATE FUNCTION _trash_hour_start(p_name bytea) RETURNS timestamp
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_text text := convert_from(p_name, 'SQL_ASCII');
BEGIN
    IF v_text !~ '^\d{4}-\d\d-\d\d-\d\d$' THEN
        RETURN NULL;
    END IF;
    RETURN (left(v_text, 10) || ' ' || right(v_text, 2) || ':00')::timestamp;
EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
    RETURN NULL;
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

-- Purges trash hours older than trash_days, at most p_limit entries per call
-- (each hour removed like jfs.rmr, children first); returns the entries removed.
CREATE FUNCTION trash_purge(p_limit integer DEFAULT 100000) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    v_days integer;
    v_removed bigint := 0;
    h record;
    r record;
BEGIN
    SELECT trash_days INTO v_days FROM setting;
    IF v_days IS NULL THEN
        RETURN 0;
    END IF;
    FOR h IN
        SELECT e.name, e.inode FROM edge e
         WHERE e.parent = _trash_inode()
           AND _trash_hour_start(e.name)
               < (pg_catalog.now() AT TIME ZONE 'UTC') - make_interval(days => v_days) - interval '1 hour'
         ORDER BY e.name
    LOOP
        EXIT WHEN v_removed >= p_limit;
        SELECT * INTO r FROM rmr(_trash_inode(), h.name, (p_limit - v_removed)::integer);
        v_removed := v_removed + r.removed;
        IF r.done THEN
            DELETE FROM trash_name t WHERE t.hour = h.inode;
        END IF;
    END LOOP;
    RETURN v_removed;
END
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

-- The name entry p_name of trash hour p_hour had where it came from: the
-- whole name kept in trash_name when its trash name was cut, else parsed.
CREATE FUNCTION _trash_original(p_hour bigint, p_name bytea) RETURNS bytea
LANGUAGE sql STABLE SET search_path = pg_catalog, jfs, pg_temp AS $$
    SELECT coalesce((SELECT t.original FROM trash_name t WHERE t.hour = p_hour AND t.name = p_name),
                    (_trash_parse(p_name)).name)
$$;

-- What is in the trash: the hour it was removed in, where from, what.
CREATE VIEW trash AS
SELECT convert_from(h.name, 'UTF8') AS hour, t.parent, jfs.path(t.parent) AS parent_path,
       _name_text(_trash_original(h.inode, e.name)) AS name,
       e.inode, _type_name(n.type) AS type, n.length AS size, to_timestamp(n.ctime / 1e9) AS removed_at
  FROM edge h
  JOIN edge e ON e.parent = h.inode
  JOIN node n ON n.inode = e.inode
  CROSS JOIN LATERAL _trash_parse(e.name) t
 WHERE h.parent = _trash_inode();

-- Puts trash entries back where they were (all, or those of hour p_hour,
-- 'YYYY-MM-DD-HH'), by rename: an entry whose directory is gone or whose
-- name is taken again stays in the trash. One row per entry: errno 0
-- restored, else why not.
CREATE FUNCTION restore(p_hour text DEFAULT NULL)
RETURNS TABLE (hour text, path text, errno integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, jfs, pg_temp AS $$
DECLARE
    t record;
    r record;
BEGIN
    FOR t IN
        SELECT convert_from(h.name, 'UTF8') AS hour, p.parent, _trash_original(h.inode, e.name) AS name,
               h.inode AS hour_dir, e.name AS trash_name
          FROM edge h
          JOIN edge e ON e.parent = h.inode
          CROSS JOIN LATERAL _trash_parse(e.name) p
         WHERE h.parent = _trash_inode() AND p.parent IS NOT NULL
           AND (p_hour IS NULL OR convert_from(h.name, 'UTF8') = p_hour)
         ORDER BY 1, 2, 3
    LOOP
        hour := t.hour;
        path := coalesce(jfs.path(t.parent), '(gone)') || CASE WHEN t.parent = 1 THEN '' ELSE '/' END
                || _name_text(t.name);
        IF NOT EXISTS (SELECT 1 FROM node n WHERE n.inode = t.parent AND n.type = 2) THEN
            errno := 2;
        ELSE
            SELECT * INTO r FROM rename(t.hour_dir, t.trash_name, t.parent, t.name, 1);
            errno := r.errno;
            IF errno = 0 THEN
                DELETE FROM trash_name n WHERE n.hour = t.hour_dir AND n.name = t.trash_name;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
