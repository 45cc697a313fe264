#!/usr/bin/env bash
# Install Debian's Chromium for the replay's browser test (tests/integration/replay/test_replay_browser.py), if absent.
# Part of the README's test command; needs root or sudo and Debian's package archive.
set -euo pipefail
command -v chromium >/dev/null && exit 0
run() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
echo "installing Debian's chromium for the browser test" >&2
run apt-get install -y -q chromium >/dev/null 2>&1 || { run apt-get update -q >/dev/null && run apt-get install -y -q chromium >/dev/null; }
command -v chromium >/dev/null
