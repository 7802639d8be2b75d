#!/usr/bin/env bash
# chromium.sh — make sure Chromium is installed, for the test that opens the
# demo's HTML report in headless Chromium (samples/assistant-batch).
# Installs Debian's chromium where missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "chromium missing: installing Debian's chromium"
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
chromium --version
