#!/usr/bin/env bash
# The main job: installs what is missing, builds and installs the jfs
# extension and client, starts a private PostgreSQL 15 cluster, creates
# database "jfs" with the extension, formats a volume whose blocks live in a
# local directory, and mounts it at ./mnt. Safe to run again: it reuses what
# is there.
#
# Safe on a shared machine: the cluster takes connections on its unix socket
# only, which only root and the postgres user reach (no TCP, so no trust on
# TCP); the volume is formatted as role jfs_admin (jfs.grant_admin) and
# mounted as role jfs_client (jfs.grant_client), not as a superuser; and
# JFS_HOME must be a directory of yours (made 0711 if missing; a symbolic
# link or another user's directory is refused), so nothing planted there
# is followed.
#
#   JFS_HOME (default /var/tmp/jfs)  cluster, socket and block directory
#   JFS_PGPORT (default 15432)       port number of the cluster's socket
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
step "starting the private PostgreSQL cluster in $JFS_HOME/pg (its socket only)"
# (0711: the postgres user passes through to its own directory below)
private_dir "$JFS_HOME" "" 711
cluster_start "$JFS_HOME/pg" "$JFS_PGPORT"
export PGHOST=$JFS_HOME/pg PGPORT=$JFS_PGPORT PGUSER=postgres
if ! psql -qXAt -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'jfs'" | grep -q 1; then
  psql -qX -d postgres -c 'CREATE DATABASE jfs'
fi
psql -qX -v ON_ERROR_STOP=1 -d jfs <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS jfs;
ALTER EXTENSION jfs UPDATE;
DO $$ BEGIN CREATE ROLE jfs_admin LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE jfs_client LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
-- (again after every update: a grant covers the procedures that existed)
SELECT jfs.grant_admin('jfs_admin'), jfs.grant_client('jfs_client');
SQL
JFS=./target/release/jfs
SOCKET=$(printf %s "$JFS_HOME/pg" | sed 's|/|%2F|g')
ADMIN_URL="postgres://jfs_admin@$SOCKET:$JFS_PGPORT/jfs"
META_URL="postgres://jfs_client@$SOCKET:$JFS_PGPORT/jfs"
step "formatting volume '$JFS_VOLUME' as jfs_admin (blocks in $JFS_HOME/blocks)"
if ! out=$($JFS format "$ADMIN_URL" "$JFS_VOLUME" --storage file --bucket "$JFS_HOME/blocks" 2>&1); then
  case "$out" in
    *"already formatted"*) echo "already formatted: reusing it" ;;
    *) echo "$out" >&2; exit 1 ;;
  esac
else
  echo "$out"
fi
MNT=${JFS_MOUNTPOINT:-$PWD/mnt}
if grep -q " $MNT fuse" /proc/self/mounts; then
  owner=$(psql -qXAt -d jfs -v mnt="$MNT" <<'SQL'
SELECT role FROM jfs.session WHERE info->>'mountpoint' = :'mnt' ORDER BY sid DESC LIMIT 1;
SQL
)
  if [ "$owner" = jfs_client ]; then
    step "already mounted at $MNT"
  else
    step "unmounting $MNT: an older run.sh mounted it as a superuser"
    $JFS umount "$MNT" || fusermount3 -uz "$MNT"
  fi
fi
if ! grep -q " $MNT fuse" /proc/self/mounts; then
  mkdir -p "$MNT"
  step "mounting at $MNT as jfs_client"
  $JFS mount "$META_URL" "$MNT" -d --log "$JFS_HOME/jfs.log"
fi
step "SELECT * FROM jfs.ls('/')"
psql -X -d jfs -c "SELECT * FROM jfs.ls('/')"
$JFS status "$META_URL"
cat <<EOF2

jfs is mounted at $MNT (log: $JFS_HOME/jfs.log).
  META_URL   $META_URL   (jfs_client: mounts and the CLI)
  admin      $ADMIN_URL   (jfs_admin: jfs format, config, quota set)
  psql       psql -h $JFS_HOME/pg -p $JFS_PGPORT -U postgres jfs   (as root or postgres)
  unmount    $JFS umount $MNT
  stop PG    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D $JFS_HOME/pg/data stop
EOF2
