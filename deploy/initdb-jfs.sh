#!/bin/sh
# Run once by the postgres image on a new data directory: the jfs extension
# in $POSTGRES_DB, and a role for mounts with jfs.grant_client only.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v client_password="$JFS_CLIENT_PASSWORD" <<'SQL'
CREATE EXTENSION jfs;
CREATE ROLE jfs_client LOGIN PASSWORD :'client_password';
SELECT jfs.grant_client('jfs_client');
SQL
