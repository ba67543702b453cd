#!/bin/sh
# The client container: formats the volume (as the database owner, once;
# "already formatted" is fine), then mounts it at /mnt/jfs as the client
# role, in the foreground. Passwords come from the environment.
set -eu
admin="postgres://$POSTGRES_USER@postgres:5432/$POSTGRES_DB"
client="postgres://jfs_client@postgres:5432/$POSTGRES_DB"
out=$(META_PASSWORD="$POSTGRES_PASSWORD" jfs format "$admin" "$JFS_VOLUME" \
        --storage s3 --bucket "http://s3:9000/$JFS_BUCKET" 2>&1) || case "$out" in
  *"already formatted"*) echo "volume $JFS_VOLUME already formatted" ;;
  *) echo "$out" >&2; exit 1 ;;
esac
mkdir -p /mnt/jfs
# metrics on every interface of the container: the compose file publishes
# the port on the host's loopback only
exec env META_PASSWORD="$JFS_CLIENT_PASSWORD" jfs mount "$client" /mnt/jfs --allow-other --log /dev/stderr \
    --metrics 0.0.0.0:9567
