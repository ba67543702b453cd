#!/usr/bin/env bash
# Runs the jfs tests: Rust checks, the SQL regression and isolation suites,
# the upgrade check, the deployment check (docker-compose.yml, deploy/), the
# client's unit tests and the end-to-end tests, against
# a throw-away PostgreSQL 15 cluster. Safe to run again.
#
#   bash scripts/test.sh                 every suite (what CI runs)
#   bash scripts/test.sh SUITE...        only these: lint regress isolation
#                                        upgrade deploy unit e2e, or e2e:NAME for one
#                                        file of tests/e2e/tests (e2e:quota)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/pg.sh
export PATH="$HOME/.cargo/bin:$PATH"

all_suites="lint regress isolation upgrade deploy unit e2e"
selected=("$@")
for s in "${selected[@]}"; do
  case " $all_suites " in
    *" ${s%%:*} "*) ;;
    *) echo "unknown suite '$s'; suites: $all_suites (or e2e:NAME)" >&2; exit 2 ;;
  esac
done
# wants SUITE: whether SUITE runs (all of them when none is named)
wants() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local s
  for s in "${selected[@]}"; do [ "${s%%:*}" = "$1" ] && return 0; done
  return 1
}

bash scripts/setup.sh --tests

if wants lint; then
  echo "==> cargo fmt --check, clippy"
  cargo fmt --all --check
  cargo clippy -p jfs-client -p jfs-python -p jfs-e2e --all-targets -- -D warnings
  echo "==> sql/ calls only what loads before it (extension/src/lib.rs)"
  python3 tests/lint/sql_call_order.py
  python3 scripts/gen-reference.py procedures --check
  echo "==> CONTRIBUTING.md's layout names every folder and SQL file"
  python3 tests/lint/layout.py
  echo "==> no Rust file over 600 lines"
  python3 tests/lint/file_size.py
fi

echo "==> building the client and the end-to-end tests"
cargo build -p jfs-client
cargo test -p jfs-e2e --no-run
bash scripts/python-package.sh --install
./target/debug/jfs --help >/dev/null
./target/debug/jfs --version | grep -q '^jfs '
python3 scripts/gen-reference.py cli ./target/debug/jfs --check
install_mount_helper ./target/debug/jfs

echo "==> building and installing the extension"
install_extension

tmp=$(mktemp -d /tmp/jfs-test.XXXXXX)
chmod 755 "$tmp"
port=$(free_port)
cleanup() {
  # mounts left by a failed end-to-end test would keep their directories busy
  grep -o " $tmp/[^ ]*" /proc/self/mounts 2>/dev/null | xargs -r -n1 fusermount3 -uz 2>/dev/null || true
  cluster_stop "$tmp/pg"
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "==> starting a private PostgreSQL 15 in $tmp/pg (socket, port $port)"
cluster_start "$tmp/pg" "$port"
export PGHOST="$tmp/pg" PGPORT=$port PGUSER=postgres PGDUMPFILE="$tmp/dump.pgc"
export JFS_TEST_PGDATA="$tmp/pg/data" JFS_BIN="$root/target/debug/jfs"
# (the results: root and the server's postgres user write there, nobody else)
mkdir -p -m 0700 "$tmp/out"; [ "$(id -u)" -ne 0 ] || chown postgres "$tmp/out"

# run_suite NAME RUNNER ARGS...: runs a pg_regress-style suite, counts its results
passed=0; failed=0
run_suite() {
  local name=$1; shift
  local log="$tmp/out/$name.log"
  local status=0
  "$@" --bindir="$PGBIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
       --inputdir="tests/$name" --outputdir="$tmp/out/$name" $(grep -v '^#' "tests/$name/schedule") \
    2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  local ok bad
  ok=$(grep -cE '^(ok|test) .*\.\.\. ok|^ok [0-9]' "$log" || true)
  bad=$(grep -cE 'FAILED|failed \(|^not ok|diff command failed' "$log" || true)
  # (the runner's own exit status counts too: it fails without a line to grep)
  if [ "$bad" -gt 0 ] || [ "$ok" -eq 0 ] || [ "$status" -ne 0 ]; then
    find "$tmp/out/$name" -name regression.diffs -exec head -300 {} \;
    [ "$bad" -gt 0 ] || bad=1
  fi
  passed=$((passed + ok)); failed=$((failed + bad))
}
if wants regress; then
  echo "==> pg_regress (tests/regress)"
  run_suite regress "$PGXS_TEST/regress/pg_regress" --dbname=jfs_regress
fi
if wants isolation; then
  echo "==> pg_isolation_regress (tests/isolation)"
  run_suite isolation "$PGXS_TEST/isolation/pg_isolation_regress" --dbname=jfs_isolation
fi
if wants upgrade; then
  echo "==> upgrade equals install (tests/upgrade)"
  if bash tests/upgrade/check.sh "$tmp/out/upgrade" 2>&1 | tee "$tmp/out/upgrade.log"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
fi
if wants deploy; then
  echo "==> docker-compose.yml and deploy/ (tests/deploy)"
  if bash tests/deploy/check.sh 2>&1 | tee "$tmp/out/deploy.log"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
fi

# cargo_tests LABEL ARGS...: runs cargo test, adds its counts
cargo_tests() {
  local label=$1; shift
  local log="$tmp/out/$label.log"
  echo "==> cargo test $*"
  local status=0
  cargo test "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  local p f
  p=$(grep -oE 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
  f=$(grep -oE '[0-9]+ failed;' "$log" | awk '{s += $1} END {print s + 0}')
  # (cargo's own exit status counts too: a crash of a test binary leaves no count)
  if [ "$f" -eq 0 ] && { [ "$status" -ne 0 ] || ! grep -q 'test result:' "$log" ||
                         grep -qE '^error(\[|:)' "$log"; }; then
    f=1
  fi
  passed=$((passed + p)); failed=$((failed + f))
}
if wants unit; then
  cargo_tests unit -p jfs-client
fi
# end-to-end: real mounts of the jfs binary; one test binary at a time (the
# fault test stops and starts PostgreSQL)
if wants e2e; then
  e2e_files=()
  for s in "${selected[@]}"; do
    case "$s" in e2e:*) e2e_files+=(--test "${s#e2e:}") ;; esac
  done
  cargo_tests e2e -p jfs-e2e --no-fail-fast "${e2e_files[@]}" -- --test-threads=2
fi

echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
