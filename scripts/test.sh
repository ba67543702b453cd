#!/usr/bin/env bash
# Runs every jfs test: Rust checks, then the SQL regression and isolation
# suites against a throw-away PostgreSQL 15 cluster. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/pg.sh
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh

echo "==> cargo fmt --check, clippy"
cargo fmt --all --check
cargo clippy -p jfs-client --all-targets -- -D warnings

echo "==> client builds and answers --help / --version"
cargo build -q -p jfs-client
./target/debug/jfs --help >/dev/null
./target/debug/jfs --version | grep -q '^jfs '

echo "==> building and installing the extension"
install_extension

tmp=$(mktemp -d /tmp/jfs-test.XXXXXX)
chmod 755 "$tmp"
port=$(free_port)
trap 'cluster_stop "$tmp/pg"; rm -rf "$tmp"' EXIT
echo "==> starting a private PostgreSQL 15 in $tmp/pg (socket, port $port)"
cluster_start "$tmp/pg" "$port"
export PGHOST="$tmp/pg" PGPORT=$port PGUSER=postgres PGDUMPFILE="$tmp/dump.pgc"
mkdir -p "$tmp/out"; [ "$(id -u)" -ne 0 ] || chmod 777 "$tmp/out"

# run_suite NAME RUNNER ARGS...: runs a pg_regress-style suite, counts its results
passed=0; failed=0
run_suite() {
  local name=$1; shift
  local log="$tmp/out/$name.log"
  "$@" --bindir="$PGBIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
       --inputdir="tests/$name" --outputdir="$tmp/out/$name" $(grep -v '^#' "tests/$name/schedule") \
    2>&1 | tee "$log" || true
  local ok bad
  ok=$(grep -cE '^(ok|test) .*\.\.\. ok|^ok [0-9]' "$log" || true)
  bad=$(grep -cE 'FAILED|failed \(|^not ok' "$log" || true)
  if [ "$bad" -gt 0 ] || [ "$ok" -eq 0 ]; then
    find "$tmp/out/$name" -name regression.diffs -exec head -300 {} \;
    [ "$bad" -gt 0 ] || bad=1
  fi
  passed=$((passed + ok)); failed=$((failed + bad))
}
echo "==> pg_regress (tests/regress)"
run_suite regress "$PGXS_TEST/regress/pg_regress" --dbname=jfs_regress
echo "==> pg_isolation_regress (tests/isolation)"
run_suite isolation "$PGXS_TEST/isolation/pg_isolation_regress" --dbname=jfs_isolation

echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
