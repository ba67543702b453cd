-- The volume's figures for monitoring, as rows (metric, key, value): one
-- query for a SQL exporter (postgres_exporter's queries file,
-- sql_exporter), each row a gauge jfs_volume_<metric>{key="..."}. What a
-- mount does is in its own metrics (`jfs mount --metrics`); what the
-- volume holds is the same for every mount, so it is here, once. `key`
-- names the quota ('dir:/projects/a', 'user:1000', 'group:100'), the tier
-- ('1'), or is ''. Reading it costs a scan of the files (tier_usage): scrape
-- it every minute or so, not every second.
CREATE VIEW metrics AS
SELECT 'capacity_bytes'::text AS metric, ''::text AS key, u.capacity::float8 AS value FROM usage u
UNION ALL SELECT 'used_bytes', '', u.used_space FROM usage u
UNION ALL SELECT 'max_inodes', '', u.max_inodes FROM usage u
UNION ALL SELECT 'used_inodes', '', u.used_inodes FROM usage u
UNION ALL SELECT 'quota_' || f.metric, q.kind || ':' || coalesce(q.path, q.uid::text, q.gid::text), f.value
  FROM quotas q
 CROSS JOIN LATERAL (VALUES ('max_bytes', q.max_space::float8), ('used_bytes', q.used_space),
                            ('max_inodes', q.max_inodes), ('used_inodes', q.used_inodes)) f (metric, value)
 WHERE q.kind <> 'fs'
UNION ALL SELECT 'tier_files', t.tier::text, t.files FROM tier_usage t
UNION ALL SELECT 'tier_bytes', t.tier::text, t.bytes FROM tier_usage t
UNION ALL SELECT 'sessions', '', count(*) FROM session
UNION ALL SELECT 'oldest_heartbeat_seconds', '', coalesce(extract(epoch FROM now() - min(s.heartbeat)), 0)
  FROM session s
UNION ALL SELECT 'trash_entries', '', count(*) FROM trash
UNION ALL SELECT 'locks', '', count(*) FROM plock
UNION ALL SELECT 'delete_queue_slices', '', count(*) FROM delslice
UNION ALL SELECT 'delete_queue_bytes', '', coalesce(sum(d.size), 0) FROM delslice d;
