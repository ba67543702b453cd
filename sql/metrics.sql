-- The volume's figures for monitoring, as rows (metric, key, value): one
-- query for a SQL exporter (postgres_exporter's queries file,
-- sql_exporter; with the README's postgres_exporter query each row is
-- jfs_volume_value{metric="...",key="..."}). What a mount does is in its
-- own metrics (`jfs mount --metrics`); what the volume holds is the same
-- for every mount, so it is here, once. `key` names the quota
-- ('dir:/projects/a', 'user:1000', 'group:100'), the tier ('1'), or is ''.
-- Reading it costs a scan of the files (tier_usage): scrape it every
-- minute or so, not every second.
CREATE VIEW metrics AS
SELECT f.metric, ''::text AS key, f.value
  FROM usage u
 CROSS JOIN LATERAL (VALUES ('capacity_bytes'::text, u.capacity::float8), ('used_bytes', u.used_space),
                            ('max_inodes', u.max_inodes), ('used_inodes', u.used_inodes)) f (metric, value)
UNION ALL
SELECT 'quota_' || f.metric, q.kind || ':' || coalesce(q.path, q.uid::text, q.gid::text, '?'), f.value
  FROM quotas q
 CROSS JOIN LATERAL (VALUES ('max_bytes', q.max_space::float8), ('used_bytes', q.used_space),
                            ('max_inodes', q.max_inodes), ('used_inodes', q.used_inodes)) f (metric, value)
 WHERE q.kind <> 'fs'
UNION ALL
SELECT f.metric, t.tier::text, f.value
  FROM tier_usage t
 CROSS JOIN LATERAL (VALUES ('tier_files', t.files::float8), ('tier_bytes', t.bytes)) f (metric, value)
UNION ALL
SELECT f.metric, '', f.value
  FROM (SELECT count(*) AS sessions, extract(epoch FROM now() - min(s.heartbeat)) AS oldest FROM session s) s
 CROSS JOIN LATERAL (VALUES ('sessions', s.sessions::float8),
                            ('oldest_heartbeat_seconds', coalesce(s.oldest, 0)::float8)) f (metric, value)
UNION ALL
SELECT 'trash_entries', '', count(*)
  FROM edge h JOIN edge e ON e.parent = h.inode
 WHERE h.parent = _trash_inode()
UNION ALL SELECT 'locks', '', count(*) FROM plock
UNION ALL
SELECT f.metric, '', f.value
  FROM (SELECT coalesce(sum(u.slices), 0) AS slices, coalesce(sum(u.bytes), 0) AS bytes FROM delete_usage u) d
 CROSS JOIN LATERAL (VALUES ('delete_queue_slices', d.slices::float8),
                            ('delete_queue_bytes', d.bytes::float8)) f (metric, value);
