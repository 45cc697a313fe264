#!/usr/bin/env bash
# Install pywb, if absent, in its own virtualenv: .pywb/venv in the repository (pywb pins versions
# of warcio and others that archiver's venv must not share). The WACZ replay test
# (tests/integration/store/test_exports_pywb.py) runs its wb-manager and wayback, and
# tools/interop_pywb.sh uses it when present. Part of the README's test command; needs python3
# and PyPI. A venv is taken as installed once it holds the marker file written last, so an
# install cut short is done again, from scratch.
set -euo pipefail
PYWB_VERSION=2.10.0
VENV=$(cd "$(dirname "$0")/.." && pwd)/.pywb/venv
MARKER=$VENV/installed-pywb-$PYWB_VERSION
[[ -f $MARKER ]] && exit 0
echo "installing pywb $PYWB_VERSION into $VENV for the WACZ replay test" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "pywb==$PYWB_VERSION"
"$VENV/bin/wayback" --version >/dev/null
touch "$MARKER"
