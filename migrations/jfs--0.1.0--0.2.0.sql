-- jfs 0.1.0 -> 0.2.0 (unreleased: this script grows with the changes of
-- sql/ until 0.2.0 is released, then it is frozen like every other here).
--
-- Runs inside ALTER EXTENSION jfs UPDATE, as the extension's owner, with
-- search_path set to the extension's schema (jfs). What it must leave is
-- exactly what a fresh CREATE EXTENSION jfs of 0.2.0 makes from sql/:
-- tests/upgrade/check.sh compares the two.
\echo Use "ALTER EXTENSION jfs UPDATE" to load this file. \quit
