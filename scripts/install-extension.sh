#!/usr/bin/env bash
# Builds the jfs extension and installs it into a PostgreSQL: the library,
# the control file, the current version's install script (generated from
# sql/ by cargo pgrx), and every script of migrations/ (the current
# release and every upgrade), so that ALTER EXTENSION jfs UPDATE finds its
# way from any released version; in a git clone also the old releases'
# install scripts, rebuilt from its history (scripts/old-releases.sh), so
# that CREATE EXTENSION jfs VERSION 'OLD' works (tests make such volumes).
#
#   bash scripts/install-extension.sh [--release]      into /usr/bin/pg_config's PostgreSQL
#   PG_CONFIG=/path/to/pg_config bash scripts/install-extension.sh --release
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
pg_config=${PG_CONFIG:-/usr/bin/pg_config}
cargo pgrx install -p jfs --pg-config "$pg_config" "$@"
extdir="$("$pg_config" --sharedir)/extension"
# a released version names one schema: this build's SQL must be its
# frozen script's (pgrx orders the files' blocks as it likes, so lines are
# compared as sets; comment lines, such as the load order pgrx writes, are
# not the schema)
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$extdir/jfs.control")
statements() { grep -v '^[[:space:]]*--' "$1" | sort; }
if [ -f "migrations/jfs--$version.sql" ] &&
   ! cmp -s <(statements "$extdir/jfs--$version.sql") <(statements "migrations/jfs--$version.sql"); then
  diff <(statements "migrations/jfs--$version.sql") <(statements "$extdir/jfs--$version.sql") | head -20 >&2 || true
  echo "sql/ differs from the released jfs $version (migrations/jfs--$version.sql): a version names one schema;" \
       "move the workspace version on in Cargo.toml and put the change into a new upgrade script" >&2
  exit 1
fi
SUDO=""; [ -w "$extdir" ] || SUDO=sudo
$SUDO install -m 644 migrations/jfs--*.sql "$extdir/"
old=$(mktemp -d); trap 'rm -rf "$old"' EXIT
if bash scripts/old-releases.sh "$old" >/dev/null; then
  $SUDO install -m 644 "$old"/jfs--*.sql "$extdir/"
else
  echo "(old releases not installed: CREATE EXTENSION jfs VERSION of one will not work here; updates do)" >&2
fi
echo "installed jfs $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$extdir/jfs.control"), $(ls migrations/jfs--*.sql | wc -l) script(s) of migrations/ and $(ls "$old" | wc -l) old release(s) into $extdir"
