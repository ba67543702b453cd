# Shell functions for private PostgreSQL 15 clusters (sourced by run.sh,
# test.sh and bench/). A cluster lives in one directory: data/, the unix
# socket and log. It never touches the system's own cluster.
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGXS_TEST=${PGXS_TEST:-/usr/lib/postgresql/15/lib/pgxs/src/test}

# Runs a command as the postgres OS user (initdb and postgres refuse root).
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# private_dir DIR [OWNER [MODE]]: makes DIR (MODE, 0700 by default; owned
# by OWNER when run as root), or checks that an existing DIR is a real
# directory of this user (or OWNER): never a symbolic link, never another
# user's, so nothing planted in a shared place (/var/tmp) is followed or
# written into.
private_dir() {
  local dir=$1 owner=${2:-} mode=${3:-700}
  if [ -L "$dir" ]; then
    echo "$dir is a symbolic link: refusing to use it (remove it, or choose another directory)" >&2
    return 1
  fi
  if [ -e "$dir" ]; then
    local uid
    uid=$(stat -c %u "$dir")
    if [ "$uid" != "$(id -u)" ] && { [ -z "$owner" ] || [ "$uid" != "$(id -u "$owner")" ]; }; then
      echo "$dir belongs to uid $uid, not to you: refusing to use it (choose another directory)" >&2
      return 1
    fi
  else
    mkdir -p -m 0700 "$dir"
  fi
  if [ -n "$owner" ] && [ "$(id -u)" -eq 0 ]; then
    chown "$owner:$owner" "$dir"
  fi
  chmod "$mode" "$dir"
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# cluster_start DIR PORT [LISTEN]: initdb DIR/data if needed, start it on the
# unix socket in DIR (and on LISTEN, e.g. 127.0.0.1, if given). The settings
# live in DIR/data/jfs.conf, so a plain `pg_ctl -D DIR/data start` (as the
# fault tests do) comes back on the same socket and port.
#
# Private to the postgres user (and root): DIR is 0700, and so is the
# socket, which trusts whoever reaches it; TCP asks for a password
# (scram-sha-256), never trust. A DIR that is a symbolic link, or that
# another user owns, is refused.
cluster_start() {
  local dir=$1 port=$2 listen=${3:-}
  private_dir "$dir" postgres || return 1
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_postgres "$PGBIN/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; echo "initdb of $dir/data failed" >&2; return 1; }
    echo "include 'jfs.conf'" | as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
  fi
  # (written at every start: a cluster made by an older jfs trusted TCP)
  as_postgres tee "$dir/data/pg_hba.conf" >/dev/null <<HBA
local all all trust
local replication all trust
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
host replication all 127.0.0.1/32 scram-sha-256
host replication all ::1/128 scram-sha-256
HBA
  as_postgres tee "$dir/data/jfs.conf" >/dev/null <<CONF
port = $port
unix_socket_directories = '$dir'
unix_socket_permissions = 0700
listen_addresses = '$listen'
password_encryption = 'scram-sha-256'
max_connections = 200
shared_buffers = 256MB
# batches (rmr, clone) write ~100 MB of WAL per 100,000 files: room for it
wal_buffers = 64MB
max_wal_size = 4GB
CONF
  if as_postgres "$PGBIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    # running already: the access rules above apply from now on
    as_postgres "$PGBIN/pg_ctl" -D "$dir/data" reload >/dev/null
    return 0
  fi
  as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null \
    || { tail -20 "$dir/postgres.log" >&2; echo "PostgreSQL in $dir did not start (log: $dir/postgres.log)" >&2; return 1; }
}

# cluster_standby PRIMARY_DIR PRIMARY_PORT DIR PORT: a streaming hot standby
# of the cluster in PRIMARY_DIR (pg_basebackup over its socket), started on
# the unix socket in DIR and PORT. It replicates as application_name
# DIR's base name (its cluster_name), which synchronous_standby_names names.
cluster_standby() {
  local primary=$1 primary_port=$2 dir=$3 port=$4
  private_dir "$dir" postgres || return 1
  as_postgres "$PGBIN/pg_basebackup" -D "$dir/data" -h "$primary" -p "$primary_port" -U postgres \
    -R -X stream --checkpoint=fast >"$dir/basebackup.log" 2>&1 \
    || { cat "$dir/basebackup.log" >&2; echo "pg_basebackup of $primary failed" >&2; return 1; }
  # its own socket and port: the copy has the primary's
  as_postgres sed -i -e "s|^port = .*|port = $port|" \
    -e "s|^unix_socket_directories = .*|unix_socket_directories = '$dir'|" "$dir/data/jfs.conf"
  echo "cluster_name = '$(basename "$dir")'" | as_postgres tee -a "$dir/data/jfs.conf" >/dev/null
  as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null \
    || { tail -20 "$dir/postgres.log" >&2; echo "the standby in $dir did not start (log: $dir/postgres.log)" >&2; return 1; }
}

cluster_stop() {
  local dir=$1
  [ -f "$dir/data/PG_VERSION" ] || return 0
  as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

# Builds the extension and installs it (with migrations/) into the system
# PostgreSQL 15's extension directory, where every cluster of it finds it.
install_extension() {
  PG_CONFIG=/usr/bin/pg_config bash scripts/install-extension.sh "$@"
}

# install_mount_helper BIN: /sbin/mount.jfs -> BIN, so that `mount -t jfs`
# and fstab lines of type jfs mount with it (the binary acts as mount(8)'s
# helper when run under that name).
install_mount_helper() {
  local bin
  bin=$(realpath "$1")
  if [ "$(id -u)" -eq 0 ]; then ln -sfn "$bin" /sbin/mount.jfs; else sudo ln -sfn "$bin" /sbin/mount.jfs; fi
}
