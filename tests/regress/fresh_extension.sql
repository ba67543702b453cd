SET client_min_messages = warning;
DROP EXTENSION IF EXISTS jfs CASCADE;
CREATE EXTENSION jfs;
