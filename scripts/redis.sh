#!/usr/bin/env bash
# redis.sh PORT — make sure a redis-server answers on 127.0.0.1:PORT.
# Installs Debian's redis-server where missing; starts a throwaway server with
# no persistence, its files under .redis/ in the repository.
set -euo pipefail
port=${1:-6390}
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server missing: installing Debian's redis-server"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
if redis-cli -p "$port" ping >/dev/null 2>&1; then
  exit 0
fi
dir="$(pwd)/.redis"
mkdir -p "$dir"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
for _ in $(seq 1 50); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && { echo "redis-server on 127.0.0.1:$port"; exit 0; }
  sleep 0.1
done
echo "redis-server did not start on port $port; see $dir/redis.log" >&2
exit 1
