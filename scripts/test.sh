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

failed=0
regress_tests=$(grep -v '^#' tests/regress/schedule | xargs)
echo "==> pg_regress: $regress_tests"
if ! "$PGXS_TEST/regress/pg_regress" --bindir="$PGBIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
      --dbname=jfs_regress --inputdir=tests/regress --outputdir="$tmp/out/regress" $regress_tests; then
  failed=1
  cat "$tmp/out/regress/regression.diffs" 2>/dev/null | head -200 || true
fi
isolation_tests=$(grep -v '^#' tests/isolation/schedule | xargs)
echo "==> pg_isolation_regress: $isolation_tests"
if ! "$PGXS_TEST/isolation/pg_isolation_regress" --bindir="$PGBIN" --host="$PGHOST" --port="$PGPORT" \
      --user=postgres --dbname=jfs_isolation --inputdir=tests/isolation --outputdir="$tmp/out/isolation" \
      $isolation_tests; then
  failed=1
  cat "$tmp/out/isolation/output_iso/regression.diffs" "$tmp/out/isolation/regression.diffs" 2>/dev/null | head -200 || true
fi

n_regress=$(echo $regress_tests | wc -w); n_iso=$(echo $isolation_tests | wc -w)
total=$((n_regress + n_iso))
if [ $failed -ne 0 ]; then
  f=$(grep -hc 'FAILED\|failed (' "$tmp"/out/*/regression.out 2>/dev/null | paste -sd+ | bc 2>/dev/null || echo 1)
  echo "tests: $((total - f)) passed, $f failed"
  exit 1
fi
echo "tests: $total passed, 0 failed"
