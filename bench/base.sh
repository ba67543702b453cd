# bench/base.sh: what the benches share, sourced by each bench/*/run right
# after it changes to the repository's root (`cd "$(dirname "$0")/../.."`).
# It sources scripts/pg.sh (cluster_start, cluster_stop, cluster_standby,
# free_port, install_extension) and puts ~/.cargo/bin on PATH. A bench
# that measures this tree's release build on a private PostgreSQL with a
# file store runs, in this order:
#
#   bench_build [--tests] [--no-client]   setup.sh, extension, client: $JFS
#   bench_cluster WORKDIR                 a fresh $WORKDIR, PostgreSQL in
#                                         $WORKDIR/pg, cleaned up on exit
#   bench_volume DB NAME [FORMAT_ARGS...] a fresh database DB with volume
#                                         NAME on $WORKDIR/blocks-DB: $url
#   bench_mount "$url" DIR LOG [OPTIONS...]
#
# and bench_at_exit CMD [ARGS...] adds to the cleanup. For comparisons with
# other versions: build_base REV (a git revision's release build) and
# two_version_dbs VERSION (databases on two extension versions). q DB SQL
# runs one statement. Every function says what it sets; all keep
# `set -euo pipefail` (a failing step ends the bench).
# shellcheck source=scripts/pg.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/pg.sh"
export PATH="$HOME/.cargo/bin:$PATH"
BENCH_AT_EXIT=()

# bench_build [--tests] [--no-client]: runs scripts/setup.sh (with --tests
# also the test tools: moto, rsync, ...), builds the extension (release)
# and installs it into the system PostgreSQL, and, unless --no-client,
# builds the release client. Sets JFS to the client's binary
# ($PWD/target/release/jfs; left alone with --no-client).
# shellcheck disable=SC2120 # (its options are optional)
bench_build() {
  local setup=() client=true
  while [ $# -gt 0 ]; do
    case $1 in
      --tests) setup=(--tests) ;;
      --no-client) client=false ;;
      *) echo "bench_build: unknown option $1" >&2; return 2 ;;
    esac
    shift
  done
  bash scripts/setup.sh "${setup[@]}" >/dev/null
  if $client; then
    echo "==> building (release) and installing the extension"
  else
    echo "==> installing the extension (release build)"
  fi
  install_extension --release >/dev/null 2>&1
  if $client; then
    cargo build -q --release -p jfs-client
    JFS=$PWD/target/release/jfs
  fi
}

# bench_cluster WORKDIR [--remove] [--pg DIR] | bench_cluster --temp [--pg DIR]:
# makes WORKDIR afresh (removed first if there; mode 755, so that the
# postgres user reaches the cluster's directory in it) or, with --temp, a
# new temporary /tmp/jfs-bench.XXXXXX; starts a private PostgreSQL 15 in
# DIR (default WORKDIR/pg) on a free port; and arranges the cleanup on
# exit (bench_cleanup). Sets work (WORKDIR), port, and exports PGHOST (DIR),
# PGPORT and PGUSER=postgres. With --remove (implied by --temp) the cleanup
# removes WORKDIR as well.
bench_cluster() {
  local temp=false dir=
  BENCH_REMOVE_WORK=false
  while [ $# -gt 0 ]; do
    case $1 in
      --temp) temp=true; BENCH_REMOVE_WORK=true ;;
      --remove) BENCH_REMOVE_WORK=true ;;
      --pg) dir=$2; shift ;;
      -*) echo "bench_cluster: unknown option $1" >&2; return 2 ;;
      *) work=$1 ;;
    esac
    shift
  done
  if $temp; then
    work=$(mktemp -d /tmp/jfs-bench.XXXXXX)
  else
    [ -n "${work:-}" ] || { echo "bench_cluster: no WORKDIR" >&2; return 2; }
    rm -rf "$work"; mkdir -p "$work"
  fi
  chmod 755 "$work"
  BENCH_PG=${dir:-$work/pg}
  trap bench_cleanup EXIT
  port=$(free_port)
  cluster_start "$BENCH_PG" "$port"
  export PGHOST=$BENCH_PG PGPORT=$port PGUSER=postgres
}

# bench_at_exit CMD [ARGS...]: has the cleanup on exit run CMD ARGS (the
# arguments as they are now; a shell function named as CMD reads its
# variables then). Such commands run last registered first, after the
# mounts are gone and before the cluster stops; their errors are ignored.
bench_at_exit() {
  BENCH_AT_EXIT=("$(printf '%q ' "$@")" "${BENCH_AT_EXIT[@]}")
}

# bench_cleanup: the EXIT trap bench_cluster sets (call it from a trap of
# your own if you replace that). Unmounts every jfs mount under $work
# (whichever binary made it: nothing to register), runs the bench_at_exit
# commands, stops the cluster, and removes $work if asked to. Sets nothing;
# the bench's exit status stays as it was.
bench_cleanup() {
  local m cmd
  while IFS= read -r m; do
    [ -n "$m" ] || continue
    fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(bench_mounts)
  for cmd in "${BENCH_AT_EXIT[@]}"; do
    eval "$cmd" 2>/dev/null || true
  done
  cluster_stop "$BENCH_PG"
  if $BENCH_REMOVE_WORK; then rm -rf "$work"; fi
}

# bench_mounts: prints the jfs FUSE mounts under $work, one a line, the
# deepest first (from /proc/self/mountinfo; \040 and such decoded).
bench_mounts() {
  local m
  awk '{
      for (i = 7; i < NF && $i != "-"; i++) {}
      if ($(i + 1) ~ /^fuse/ && $(i + 2) ~ /^jfs:/) print $5
    }' /proc/self/mountinfo | while IFS= read -r m; do
      m=$(printf '%b' "$m")
      case $m in "$work"/*) printf '%s\n' "$m" ;; esac
    done | sort -r
}

# bench_url DB [HOST PORT]: prints the postgres:// URL of database DB as
# user postgres over the unix socket in HOST (default $PGHOST, the bench's
# cluster; percent-encoded) on PORT (default $PGPORT). Sets nothing.
bench_url() {
  local host=${2:-$PGHOST} at=${3:-$PGPORT}
  host=${host//%/%25}; host=${host// /%20}; host=${host//\//%2F}
  printf 'postgres://postgres@%s:%s/%s\n' "$host" "$at" "$1"
}

# bench_volume [--jfs BIN] [--version VERSION] [--storage TYPE --bucket B]
#              DB NAME [FORMAT_ARGS...]:
# a fresh volume NAME in a fresh database DB of the bench's cluster: DB
# dropped (if there) and created, with extension VERSION if given (else
# `jfs format` installs this tree's), its bucket (the directory
# $work/blocks-DB, emptied; or TYPE and B as given) and `BIN format` (BIN:
# default $JFS) with FORMAT_ARGS (e.g. --compress zstd), its output
# dropped. Sets url (the volume's URL, see bench_url) and bucket.
bench_volume() {
  local bin=${JFS:-} version='' storage=file
  bucket=
  while [ $# -gt 0 ]; do
    case $1 in
      --jfs) bin=$2; shift 2 ;;
      --version) version=$2; shift 2 ;;
      --storage) storage=$2; shift 2 ;;
      --bucket) bucket=$2; shift 2 ;;
      *) break ;;
    esac
  done
  local db=$1 name=$2; shift 2
  PGOPTIONS="-c client_min_messages=warning" psql -qX -d postgres \
    -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  if [ -n "$version" ]; then
    psql -qX -d "$db" -c "CREATE EXTENSION jfs VERSION '$version'"
  fi
  if [ -z "$bucket" ]; then
    bucket=$work/blocks-$db
  fi
  if [ "$storage" = file ]; then
    rm -rf "$bucket"; mkdir -p "$bucket"
  fi
  url=$(bench_url "$db")
  "$bin" format "$url" "$name" --storage "$storage" --bucket "$bucket" "$@" >/dev/null
}

# bench_mount URL DIR LOG [OPTIONS...]: mounts URL on DIR (made if missing)
# with $JFS in the background (-d), its log in LOG, with OPTIONS (e.g.
# --attr-cache 0); what it prints is dropped. Sets nothing; the cleanup
# unmounts it.
bench_mount() {
  local u=$1 dir=$2 log=$3; shift 3
  mkdir -p "$dir"
  "$JFS" mount "$u" "$dir" -d --log "$log" "$@" >/dev/null
}

# build_base REV: builds git revision REV's client (release, in
# /var/tmp/jfs-bench-base, kept between runs so that the next build is
# incremental). Sets JFS_BEFORE (its binary) and before_version (its
# extension version).
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
# directory (bench_cluster --temp: removed on exit; PGHOST and PGPORT point
# at it), with volume databases bench_before (extension version BEFORE)
# and bench_after (this tree's), each formatted in SQL on a file bucket of
# its own. Sets tmp (that directory) and after (this tree's version).
two_version_dbs() {
  local before=$1 side
  bench_cluster --temp
  tmp=$work
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

# q DB SQL: runs one statement in database DB (unaligned, tuples only, the
# first error fatal). Sets nothing. (Some benches define a q of their own.)
q() { psql -qXAt -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
