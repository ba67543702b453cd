#!/usr/bin/env bash
# The main job: installs what is missing, builds and installs the jfs
# extension, starts a private PostgreSQL 15 cluster, creates database "jfs"
# with the extension, formats a volume whose blocks live in a local
# directory, and shows it. Safe to run again: it reuses what is there.
#
#   JFS_HOME (default /var/tmp/jfs)  cluster, socket and block directory
#   JFS_PGPORT (default 15432)       TCP port on 127.0.0.1 of the private cluster
#   JFS_VOLUME (default myjfs)       volume name for a new format
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
export PATH="$HOME/.cargo/bin:$PATH"
JFS_HOME=${JFS_HOME:-/var/tmp/jfs}
JFS_PGPORT=${JFS_PGPORT:-15432}
JFS_VOLUME=${JFS_VOLUME:-myjfs}

step() { printf '\n==> %s\n' "$*"; }

bash scripts/setup.sh
step "building and installing the jfs extension into PostgreSQL 15"
install_extension
step "building the jfs client"
cargo build --release -p jfs-client
step "starting the private PostgreSQL cluster in $JFS_HOME/pg (127.0.0.1:$JFS_PGPORT)"
mkdir -p "$JFS_HOME"; chmod 755 "$JFS_HOME"
cluster_start "$JFS_HOME/pg" "$JFS_PGPORT" 127.0.0.1
export PGHOST=127.0.0.1 PGPORT=$JFS_PGPORT PGUSER=postgres
if ! psql -qXAt -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'jfs'" | grep -q 1; then
  psql -qX -d postgres -c 'CREATE DATABASE jfs'
fi
psql -qX -v ON_ERROR_STOP=1 -d jfs <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS jfs;
ALTER EXTENSION jfs UPDATE;
SQL
step "formatting volume '$JFS_VOLUME' (blocks in $JFS_HOME/blocks)"
mkdir -p "$JFS_HOME/blocks"
psql -qXAt -v ON_ERROR_STOP=1 -d jfs -c \
  "SELECT CASE errno WHEN 0 THEN message WHEN 17 THEN 'already formatted: ' || message ELSE 'format failed: ' || message END
     FROM jfs.format('$JFS_VOLUME', 'file', '$JFS_HOME/blocks')"
step "SELECT * FROM jfs.ls('/')"
psql -X -d jfs -c "SELECT * FROM jfs.ls('/')"
psql -X -d jfs -c "SELECT * FROM jfs.statfs()"
cat <<EOF2

jfs is ready.
  META_URL   postgres://postgres@127.0.0.1:$JFS_PGPORT/jfs
  psql       psql -h 127.0.0.1 -p $JFS_PGPORT -U postgres jfs
  client     ./target/release/jfs --help   (mounting arrives with the client; see README.md)
  stop       runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D $JFS_HOME/pg/data stop
EOF2
