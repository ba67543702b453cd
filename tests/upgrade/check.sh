#!/usr/bin/env bash
# Upgrade equals install: for every release (migrations/RELEASES; the old
# ones' install scripts rebuilt from git history by scripts/old-releases.sh),
# CREATE EXTENSION jfs VERSION 'X' then ALTER EXTENSION jfs UPDATE must give
# exactly the schema of a fresh CREATE EXTENSION jfs of the current version:
# the same members, config-dump registrations, DDL, privileges (initial ones
# too: pg_dump leaves those out) and seed rows.
# Also checks that frozen scripts are unchanged (migrations/SHA256SUMS), the
# ones rebuilt from git history included.
#
# Roles granted with jfs.grant_client / grant_reader before the upgrade and
# again after it (as README's "Upgrading" says) must hold what the same
# grants give on a fresh install (the dumps' GRANTs).
#
# Usage: tests/upgrade/check.sh OUTDIR   (PGHOST, PGPORT, PGUSER of a cluster
# where the current build of the extension is installed; scripts/test.sh
# runs it as the suite "upgrade")
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/upgrade/check.sh OUTDIR}
mkdir -p "$out"
q() { psql -XAtq -v ON_ERROR_STOP=1 "$@"; }

echo "-- frozen scripts are unchanged (old releases rebuilt from git history)"
old="$out/old-releases"; rm -rf "$old"
bash scripts/old-releases.sh "$old"
(cd migrations && sha256sum --quiet --ignore-missing -c SHA256SUMS) || {
  echo "FAILED: a frozen script in migrations/ differs from migrations/SHA256SUMS:" \
       "released scripts are never edited; put the change in a new upgrade script" >&2
  exit 1
}
while read -r sum script; do
  [ -e "migrations/$script" ] || [ -e "$old/$script" ] || {
    echo "FAILED: $script is listed in migrations/SHA256SUMS but neither in migrations/ nor a release of migrations/RELEASES" >&2
    exit 1
  }
done < migrations/SHA256SUMS
for f in migrations/jfs--*.sql; do
  grep -q "  ${f#migrations/}\$" migrations/SHA256SUMS || {
    case "$f" in
      migrations/jfs--*--*.sql) ;;   # upgrade scripts: the newest one may still change before its release
      *) echo "FAILED: $f is not listed in migrations/SHA256SUMS" >&2; exit 1 ;;
    esac
  }
done

# what lands is released: the workspace version is frozen, so no two
# volumes that report one version can have different schemas
workspace_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
grep -q "  jfs--$workspace_version.sql\$" migrations/SHA256SUMS || {
  echo "FAILED: jfs $workspace_version (the workspace version) is not released: freeze" \
       "migrations/jfs--$workspace_version.sql and list it in migrations/SHA256SUMS before the change lands" \
       "(README, Upgrading)" >&2
  exit 1
}

current=$(q -d postgres -c "SELECT default_version FROM pg_available_extensions WHERE name = 'jfs'")
workspace=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$current" ] || { echo "FAILED: the jfs extension is not installed in this PostgreSQL" >&2; exit 1; }
[ "$current" = "$workspace" ] || {
  echo "FAILED: installed jfs default_version $current is not the workspace version $workspace: reinstall the extension" >&2
  exit 1
}

# snapshot DB PREFIX: the extension's members and registrations, then (with
# the members detached so that pg_dump prints them) its DDL and its rows
snapshot() {
  local db=$1 prefix=$2
  q -d "$db" >"$prefix.extension" <<'SQL'
SELECT extname, extversion, extrelocatable, extnamespace::regnamespace FROM pg_extension WHERE extname = 'jfs';
SQL
  q -d "$db" >"$prefix.config" <<'SQL'
SELECT c::regclass::text || ' ' || coalesce(e.extcondition[u.i], '')
FROM pg_extension e, unnest(e.extconfig) WITH ORDINALITY AS u(c, i)
WHERE e.extname = 'jfs' ORDER BY 1;
SQL
  q -d "$db" >"$prefix.members" <<'SQL'
SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'jfs'
ORDER BY 1;
SQL
  # initial privileges: pg_dump leaves out what they hold, so a grant
  # recorded there by an upgrade script (inside ALTER EXTENSION UPDATE) is
  # lost by a dump and restore
  q -d "$db" >"$prefix.init_privs" <<'SQL'
SELECT pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' ' || i.privtype::text || ' ' || i.initprivs::text
FROM pg_init_privs i
WHERE EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
               WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'jfs'
                 AND d.classid = i.classoid AND d.objid = i.objoid)
   OR (i.classoid = 'pg_namespace'::regclass AND i.objoid = 'jfs'::regnamespace)
ORDER BY 1;
SQL
  q -d "$db" <<'SQL'
DO $$
DECLARE member text;
BEGIN
  FOR member IN
    SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'jfs'
  LOOP
    EXECUTE 'ALTER EXTENSION jfs DROP ' || member;
  END LOOP;
END $$;
SQL
  # pg_dump 15.14+ prints \restrict lines with a random key
  pg_dump --schema-only -n jfs -d "$db" | grep -v -e '^\\restrict' -e '^\\unrestrict' >"$prefix.schema.sql"
  pg_dump --data-only -n jfs -d "$db" | grep -v -e '^\\restrict' -e '^\\unrestrict' >"$prefix.data.sql"
}

fresh_db() {
  q -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)"
  q -d postgres -c "CREATE DATABASE $1"
}

# roles are the cluster's: made once, granted in each database
for role in jfs_upgrade_client jfs_upgrade_reader; do
  q -d postgres -c "DO \$\$BEGIN CREATE ROLE $role; EXCEPTION WHEN duplicate_object THEN NULL; END\$\$"
done
grants="SELECT jfs.grant_client('jfs_upgrade_client'); SELECT jfs.grant_reader('jfs_upgrade_reader');"

fresh_db jfs_upgrade_fresh
q -d jfs_upgrade_fresh -c "SET client_min_messages = warning; CREATE EXTENSION jfs" -c "$grants" >/dev/null
snapshot jfs_upgrade_fresh "$out/fresh"

failed=0; checked=0
# compare_with_fresh PREFIX WHAT: a snapshot of jfs_upgrade_from, updated
# from WHAT, against the fresh install's
compare_with_fresh() {
  local prefix=$1 what=$2 part
  snapshot jfs_upgrade_from "$out/$prefix"
  for part in extension config members init_privs schema.sql data.sql; do
    if ! diff -u "$out/fresh.$part" "$out/$prefix.$part" >"$out/$prefix.$part.diff"; then
      echo "FAILED: $what upgraded to $current differs from a fresh install ($part; - fresh, + upgraded):"
      head -100 "$out/$prefix.$part.diff"
      failed=$((failed + 1))
    fi
  done
  checked=$((checked + 1))
}
extdir="$(q -d postgres -c "SELECT setting FROM pg_config WHERE name = 'SHAREDIR'")/extension"
[ -d "$extdir" ] || {
  echo "FAILED: the server's extension directory $extdir is not on this machine: run the upgrade suite against a local cluster" >&2
  exit 1
}
SUDO=""; [ -w "$extdir" ] || SUDO=sudo
# the old releases' install scripts as rebuilt and checked here
$SUDO install -m 644 "$old"/jfs--*.sql "$extdir/"
releases=$(sed -e '/^#/d' -e '/^$/d' migrations/RELEASES | cut -d' ' -f1)
for name in $releases; do
  [ "$name" != "$current" ] || continue
  echo "-- $name -> $current"
  fresh_db jfs_upgrade_from
  q -d jfs_upgrade_from -c "SET client_min_messages = warning; CREATE EXTENSION jfs VERSION '$name'" -c "$grants" >/dev/null
  q -d jfs_upgrade_from -c "SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE" -c "$grants" >/dev/null
  compare_with_fresh "from-$name" "jfs $name"
done

# withdrawn releases: a version name once used for another schema (never
# landed, but on main for a while, so a development cluster may hold it).
# tests/upgrade/withdrawn/jfs--A--B.sql is the update script of that B as
# it was: a volume of A takes it (as version B-withdrawn, from the
# extension directory), reports B as such a volume did, and every update
# from there must give a fresh install's schema too
installed=""
trap '[ -z "$installed" ] || $SUDO rm -f "$installed"' EXIT
for script in tests/upgrade/withdrawn/jfs--*--*.sql; do
  [ -e "$script" ] || continue
  step=${script#tests/upgrade/withdrawn/jfs--}; step=${step%.sql}
  from=${step%%--*}; to=${step#*--}
  installed="$extdir/jfs--$from--$to-withdrawn.sql"
  echo "-- $to (withdrawn) -> $current"
  $SUDO cp "$script" "$installed"
  fresh_db jfs_upgrade_from
  q -d jfs_upgrade_from -c "SET client_min_messages = warning; CREATE EXTENSION jfs VERSION '$from'" -c "$grants" >/dev/null
  update_ok=0
  q -d jfs_upgrade_from -c "SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE TO '$to-withdrawn'" \
    -c "UPDATE pg_extension SET extversion = '$to' WHERE extname = 'jfs'" -c "$grants" >/dev/null && update_ok=1
  $SUDO rm -f "$installed"; installed=""
  [ "$update_ok" = 1 ] || { echo "FAILED: the withdrawn $script does not apply to $from" >&2; exit 1; }
  q -d jfs_upgrade_from -c "SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE" >/dev/null
  # what the role could call it still may, before it is granted again
  lost=$(q -d jfs_upgrade_from -c "SELECT p.oid::regprocedure FROM pg_proc p
      WHERE p.pronamespace = 'jfs'::regnamespace AND p.proname = 'write_slices'
        AND NOT has_function_privilege('jfs_upgrade_client', p.oid, 'EXECUTE')")
  [ -z "$lost" ] || { echo "FAILED: the withdrawn jfs $to updated to $current took $lost from its client role" >&2; failed=$((failed + 1)); }
  q -d jfs_upgrade_from -c "$grants" >/dev/null
  compare_with_fresh "withdrawn-$to" "the withdrawn jfs $to"
done
q -d postgres -c "DROP DATABASE IF EXISTS jfs_upgrade_fresh WITH (FORCE)"
q -d postgres -c "DROP DATABASE IF EXISTS jfs_upgrade_from WITH (FORCE)"
[ "$checked" -gt 0 ] || { echo "FAILED: no release older than $current in migrations/RELEASES" >&2; exit 1; }
[ "$failed" -eq 0 ] || exit 1
echo "ok: $checked release(s) upgrade to $current exactly as a fresh install"
