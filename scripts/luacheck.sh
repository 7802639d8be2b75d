#!/usr/bin/env bash
# luacheck.sh — make sure luacheck is on PATH: installs Debian's lua-check
# where missing (the Redis store's scripts are linted with it).
set -euo pipefail
if command -v luacheck >/dev/null 2>&1; then
  exit 0
fi
echo "luacheck missing: installing Debian's lua-check"
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq lua-check >/dev/null
