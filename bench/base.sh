# bench/base.sh (sourced by benches): build_base REV builds git revision
# REV's client (release, in /var/tmp/jfs-bench-base, kept between runs so
# that the next build is incremental) and sets JFS_BEFORE (its binary) and
# before_version (its extension version).
build_base() {
  local rev=$1 src=/var/tmp/jfs-bench-base/src
  echo "==> building $rev (release; in /var/tmp/jfs-bench-base)"
  rm -rf "$src"; mkdir -p "$src"
  git archive "$rev" | tar -x -C "$src"
  (cd "$src" && CARGO_TARGET_DIR=/var/tmp/jfs-bench-base/target cargo build -q --release -p jfs-client)
  JFS_BEFORE=/var/tmp/jfs-bench-base/target/release/jfs
  before_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$src/Cargo.toml")
}

# two_version_dbs BEFORE: starts a private PostgreSQL in a new temporary
# directory ($tmp, removed on exit; PGHOST and PGPORT point at it), with
# volume databases bench_before (extension version BEFORE) and bench_after
# (this tree's, whose version it sets in $after), each formatted on a
# file bucket of its own; q DB SQL runs a statement there.
two_version_dbs() {
  local before=$1 side
  tmp=$(mktemp -d /tmp/jfs-bench.XXXXXX); chmod 755 "$tmp"
  trap 'cluster_stop "$tmp/pg"; rm -rf "$tmp"' EXIT
  local port; port=$(free_port)
  cluster_start "$tmp/pg" "$port"
  export PGHOST="$tmp/pg" PGPORT=$port PGUSER=postgres
  for side in before after; do
    q postgres "CREATE DATABASE bench_$side"
    if [ "$side" = before ]; then
      q bench_before "CREATE EXTENSION jfs VERSION '$before'"
    else
      q bench_after "CREATE EXTENSION jfs"
    fi
    q "bench_$side" "SELECT errno FROM jfs.format('bench', 'file', '$tmp/blocks-$side')" >/dev/null
  done
  after=$(q bench_after "SELECT extversion FROM pg_extension WHERE extname = 'jfs'")
}
q() { psql -qXAt -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
