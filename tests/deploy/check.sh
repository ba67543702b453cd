#!/usr/bin/env bash
# What can be checked here of the container deployment without pulling
# images (this machine has no registry access): docker-compose.yml is valid
# for docker-compose (Debian's package), the Dockerfile builds with the very
# steps scripts/run.sh (the README's main command) takes, and the scripts the
# images run are valid shell. Building and running the images was not done
# here (README, "Docker Compose").
#   tests/deploy/check.sh   (scripts/test.sh runs it as the suite "deploy")
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAILED: $*" >&2; exit 1; }

echo "-- docker-compose config"
docker-compose -f docker-compose.yml config -q || fail "docker-compose.yml does not validate"
services=$(docker-compose -f docker-compose.yml config --services | sort | tr '\n' ' ')
[ "$services" = "client postgres s3 " ] || fail "services are '$services', not client, postgres and s3"
config=$(docker-compose -f docker-compose.yml config)
for want in "target: postgres" "target: client" "- /dev/fuse" "- SYS_ADMIN" "condition: service_healthy" \
            "127.0.0.1:9567:9567"; do
  grep -qF -- "$want" <<<"$config" || fail "docker-compose.yml lacks '$want'"
done

echo "-- the Dockerfile builds as scripts/run.sh does"
# each build step of run.sh, and how the Dockerfile must say it
steps=(
  "bash scripts/setup.sh|RUN bash scripts/setup.sh"
  "install_extension|RUN bash scripts/install-extension.sh"
  "cargo build --release -p jfs-client|RUN cargo build --release -p jfs-client"
)
for s in "${steps[@]}"; do
  in_run=${s%%|*}; in_docker=${s#*|}
  grep -qE "^${in_run}\$" scripts/run.sh || fail "scripts/run.sh no longer runs '$in_run': update deploy/Dockerfile and this check"
  grep -qxF "$in_docker" deploy/Dockerfile || fail "deploy/Dockerfile does not run '$in_docker' as scripts/run.sh does"
done
grep -q '^install_extension() {' scripts/pg.sh && grep -q 'bash scripts/install-extension.sh' scripts/pg.sh \
  || fail "install_extension in scripts/pg.sh no longer runs scripts/install-extension.sh"
# what the images copy from the build must be what it installs
for f in jfs.so jfs.control 'jfs--\*.sql' target/release/jfs; do
  grep -q -- "$f" deploy/Dockerfile || fail "deploy/Dockerfile does not copy $f"
done

echo "-- the images' scripts"
for f in deploy/initdb-jfs.sh deploy/client.sh; do
  sh -n "$f" || fail "$f is not valid shell"
done
grep -q -- '--metrics 0.0.0.0:9567' deploy/client.sh || fail "deploy/client.sh does not serve the metrics the compose file publishes"
echo "deploy: ok"
