#!/usr/bin/env bash
# Rebuilds the install scripts of old releases of the extension from git
# history (migrations/RELEASES names the commit of each), checks each
# against migrations/SHA256SUMS, and writes them into DIR: what the upgrade
# suite and tests that make volumes of old releases install. The current
# release's script is in migrations/ itself.
#
#   bash scripts/old-releases.sh DIR      (exit 1 with the cause when a
#                                          release cannot be rebuilt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/old-releases.sh DIR}
mkdir -p "$out"
git rev-parse --git-dir >/dev/null 2>&1 || {
  echo "old-releases: $PWD is not a git clone: old releases are rebuilt from its history" \
       "(the current release and every upgrade are in migrations/ and need none)" >&2
  exit 1
}
n=0
while read -r version commit; do
  case "$version" in ''|'#'*) continue ;; esac
  script=jfs--$version.sql
  [ -e "migrations/$script" ] && continue
  git show "$commit:migrations/$script" >"$out/$script" 2>/dev/null || {
    echo "old-releases: git history has no migrations/$script at $commit (a shallow clone? git fetch --unshallow)" >&2
    exit 1
  }
  sum=$(sha256sum "$out/$script" | cut -d' ' -f1)
  grep -q "^$sum  $script\$" migrations/SHA256SUMS || {
    echo "old-releases: $script rebuilt from $commit does not match migrations/SHA256SUMS" >&2
    exit 1
  }
  n=$((n + 1))
done < migrations/RELEASES
echo "rebuilt $n old release(s) from git history into $out"
