#!/usr/bin/env bash
# The main job: installs what is missing, builds and installs the jfs
# extension and client, starts a private PostgreSQL 15 cluster, creates
# database "jfs" with the extension, formats a volume whose blocks live in a
# local directory, and mounts it at ./mnt. Safe to run again: it reuses what
# is there.
#
#   JFS_HOME (default /var/tmp/jfs)  cluster, socket and block directory
#   JFS_PGPORT (default 15432)       TCP port on 127.0.0.1 of the private cluster
#   JFS_VOLUME (default myjfs)       volume name for a new format
#   JFS_MOUNTPOINT (default ./mnt)   where to mount
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
step "installing /sbin/mount.jfs (mount -t jfs, fstab)"
install_mount_helper ./target/release/jfs
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
JFS=./target/release/jfs
META_URL="postgres://postgres@127.0.0.1:$JFS_PGPORT/jfs"
step "formatting volume '$JFS_VOLUME' (blocks in $JFS_HOME/blocks)"
if ! out=$($JFS format "$META_URL" "$JFS_VOLUME" --storage file --bucket "$JFS_HOME/blocks" 2>&1); then
  case "$out" in
    *"already formatted"*) echo "already formatted: reusing it" ;;
    *) echo "$out" >&2; exit 1 ;;
  esac
else
  echo "$out"
fi
MNT=${JFS_MOUNTPOINT:-$PWD/mnt}
mkdir -p "$MNT"
if grep -q " $MNT fuse" /proc/self/mounts; then
  step "already mounted at $MNT"
else
  step "mounting at $MNT"
  $JFS mount "$META_URL" "$MNT" -d --log "$JFS_HOME/jfs.log"
fi
step "SELECT * FROM jfs.ls('/')"
psql -X -d jfs -c "SELECT * FROM jfs.ls('/')"
$JFS status "$META_URL"
cat <<EOF2

jfs is mounted at $MNT (log: $JFS_HOME/jfs.log).
  META_URL   $META_URL
  psql       psql -h 127.0.0.1 -p $JFS_PGPORT -U postgres jfs
  unmount    $JFS umount $MNT
  stop PG    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D $JFS_HOME/pg/data stop
EOF2
