-- Trash: with format's trash_days > 0, what unlink, rmdir, rename-over and
-- rmr remove is moved (not deleted) into /.trash/YYYY-MM-DD-HH (UTC hour of
-- the removal) under the name PARENT-INODE-NAME, by the same rename a mount
-- uses. So the trash stays charged to the volume and to the user/group
-- quotas, but leaves the directory quota it was under (JuiceFS's rule).
-- Hours older than trash_days are purged (jfs.trash_purge, called by the
-- mounts in the background); jfs.restore puts entries back. A name cut to
-- fit the 255 bytes of an entry keeps its whole self in trash_name.

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

-- The name entry p_name of trash hour p_hour had where it came from: the
-- whole name kept in trash_name when its trash name was cut, else parsed.
CREATE FUNCTION _trash_original(p_hour bigint, p_name bytea) RETURNS bytea
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, jfs, pg_temp AS $$
BEGIN
    RETURN coalesce((SELECT t.original FROM trash_name t WHERE t.hour = p_hour AND t.name = p_name),
                    (_trash_parse(p_name)).name);
END
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
