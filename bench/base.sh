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
