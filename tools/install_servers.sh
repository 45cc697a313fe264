#!/usr/bin/env bash
# Install the servers the test suite starts on 127.0.0.1, if absent: Debian's PostgreSQL (the
# store contract tests, tests/support/postgres.py), and the tools it runs against them: wget (the
# WARC files `archiver import` takes in). Part of the README's test command; needs root or sudo
# and Debian's package archive.
set -euo pipefail
run() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
install() {
    echo "installing Debian's $1 for the tests" >&2
    run apt-get install -y -q "$1" >/dev/null 2>&1 || { run apt-get update -q >/dev/null && run apt-get install -y -q "$1" >/dev/null; }
}
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || install postgresql
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
command -v wget >/dev/null || install wget
command -v wget >/dev/null
