-- jfs 0.2.5 -> 0.2.6.
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.6 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit

-- Nothing changes in the schema: 0.2.6 loads sql/ in the order its files
-- call each other (functions moved between files: chunk_data.sql,
-- acl_rules.sql, remove.sql; the trash's moves in rename.sql), and its
-- install script says so.
