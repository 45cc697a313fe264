#!/usr/bin/env bash
# Interop check: pywb replays our WARC files, indexed by our CDXJ export and by our /cdx endpoint.
#
# usage: tools/interop_pywb.sh [ARCHIVE_ROOT]
#   ARCHIVE_ROOT  an archive root (warcs/ and catalog/ inside); without it the demo web is crawled
#                 first (python -m tools.demo) into the work folder.
# environment:
#   PYTHON     interpreter with archiver's dependencies (default: the repository's .venv/bin/python)
#   PYWB_VENV  a virtualenv that already has pywb (default: the repository's .pywb/venv, which
#              tools/install_pywb.sh installs, if there; else a new one in the work folder)
#   SAMPLE     how many captures to check in each collection (default 12)
#   KEEP=1     keep the work folder (its path is printed)
#
# Our replay service (archiver.replay.app) runs on two free ports (its pages, and archived content),
# and three pywb collections use it:
#   file    index: our `archiver catalog export-cdxj` file; records read from our warcs/ folder
#   remote  index: `cdx+http://127.0.0.1:PORT/cdx`, our CDX endpoint (pywb sends url, closest,
#           sort=closest, limit and matchType); records read from warcs/ by the filename, offset
#           and length we answer
#   web     the same index without archive_paths: pywb loads each record through our
#           /web/<timestamp>id_/<url> instead (the " /web" after the endpoint names that prefix),
#           which redirects it to the content origin
# For a sample of archived HTML pages (status 200) pywb must answer 200 in mp_ mode (rewritten)
# with the page's <title> text and the capture's Memento-Datetime, and in id_ mode with the
# archived body byte for byte. Everything listens on 127.0.0.1 only. Prints a result line; exits
# 1 on any failure.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$REPO/.venv/bin/python}
SAMPLE=${SAMPLE:-12}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/archiver-pywb.XXXXXX")
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    done
    if [[ ${KEEP:-0} == 1 ]]; then echo "work folder kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() {  # wait_http URL PID LOG: until URL answers (any status), or fail if PID died or 60 s went by
    for _ in $(seq 300); do
        if "$PY" -c '
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass' "$1" 2>/dev/null; then
            return 0
        fi
        kill -0 "$2" 2>/dev/null || { echo "process $2 exited; log:" >&2; tail -20 "$3" >&2; return 1; }
        sleep 0.2
    done
    echo "no answer from $1 after 60 s" >&2
    return 1
}

cd "$REPO"

# 1. The archive: given, or crawled from the demo web.
if [[ $# -ge 1 ]]; then
    ROOT=$(cd "$1" && pwd)
    SHARDS=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["shards"])' "$ROOT/catalog/catalog.json")
    CONFIG=$WORK/archiver.toml
    printf '[archive]\nroot = "%s"\n[catalog]\nshards = %s\n' "$ROOT" "$SHARDS" > "$CONFIG"
else
    echo "crawling the demo web into $WORK/demo ..." >&2
    "$PY" -m tools.demo --dir "$WORK/demo" --sites 4 --pages 12 > "$WORK/demo.log" 2>&1 \
        || { tail -20 "$WORK/demo.log" >&2; exit 1; }
    ROOT=$WORK/demo/archive
    CONFIG=$WORK/demo/archiver.toml
fi

# 2. pywb, in its own virtualenv.
if [[ -z ${PYWB_VENV:-} ]] && compgen -G "$REPO/.pywb/venv/installed-pywb-*" >/dev/null; then
    PYWB_VENV=$REPO/.pywb/venv
elif [[ -z ${PYWB_VENV:-} ]]; then
    PYWB_VENV=$WORK/pywb-venv
    echo "installing pywb into $PYWB_VENV ..." >&2
    python3 -m venv "$PYWB_VENV"
    "$PYWB_VENV/bin/pip" install -q pywb > "$WORK/pip.log" 2>&1 || { tail -20 "$WORK/pip.log" >&2; exit 1; }
fi
PYWB_VERSION=$("$PYWB_VENV/bin/wayback" --version 2>&1 | awk '{print $NF}')

# 3. Our CDXJ export, and our replay service on two free ports (its pages, archived content).
"$PY" -m archiver catalog export-cdxj --config "$CONFIG" -o "$WORK/index.cdxj" 2> "$WORK/export.log"
REPLAY_PORT=$(free_port)
CONTENT_PORT=$(free_port)
"$PY" -u - "$CONFIG" "$REPLAY_PORT" "$CONTENT_PORT" > "$WORK/replay.log" 2>&1 <<'EOF' &
import dataclasses
import sys
from functools import partial

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from archiver import config
from archiver.replay.app import create_apps

# pywb asks /cdx on the replay's own pages; the web collection's /web/<timestamp>id_/<url> there
# redirects it to the content origin, which serves the record.
loaded = config.load(sys.argv[1])
public = {"base_url": f"http://127.0.0.1:{sys.argv[2]}", "content_origin": f"http://127.0.0.1:{sys.argv[3]}"}
apps = create_apps(dataclasses.replace(loaded, replay=dataclasses.replace(loaded.replay, **public)))


def hypercorn(port: str) -> Config:
    hyper = Config()
    hyper.bind = [f"127.0.0.1:{port}"]
    hyper.accesslog = "-"  # to replay.log: the queries pywb sent are counted below
    hyper.access_log_format = '"%(m)s %(U)s?%(q)s" %(s)s "%(a)s"'
    return hyper


async def main() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve, apps.app, hypercorn(sys.argv[2])))
        nursery.start_soon(partial(serve, apps.content, hypercorn(sys.argv[3])))


trio.run(main)
EOF
PIDS+=($!)
wait_http "http://127.0.0.1:$REPLAY_PORT/cdx?url=example.org" "${PIDS[-1]}" "$WORK/replay.log"
wait_http "http://127.0.0.1:$CONTENT_PORT/" "${PIDS[-1]}" "$WORK/replay.log"

# 4. pywb's wayback with the three collections.
mkdir -p "$WORK/pywb"
cat > "$WORK/pywb/config.yaml" <<EOF
collections:
  file:
    index: $WORK/index.cdxj
    archive_paths: $ROOT/warcs/
  remote:
    index: cdx+http://127.0.0.1:$REPLAY_PORT/cdx
    archive_paths: $ROOT/warcs/
  web:
    index: cdx+http://127.0.0.1:$REPLAY_PORT/cdx /web
EOF
PYWB_PORT=$(free_port)
"$PYWB_VENV/bin/wayback" -d "$WORK/pywb" -b 127.0.0.1 -p "$PYWB_PORT" > "$WORK/wayback.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$PYWB_PORT/" "${PIDS[-1]}" "$WORK/wayback.log"

# 5. The sample, checked in each collection; then, that pywb did ask our /cdx.
"$PY" - "$WORK/index.cdxj" "$ROOT/warcs" "http://127.0.0.1:$PYWB_PORT" "$SAMPLE" "$PYWB_VERSION" <<'EOF'
import re
import sys
import urllib.error
import urllib.request
from email.utils import parsedate_to_datetime
from pathlib import Path

from archiver.store.embedded.catalog import Capture
from archiver.store.warcindex import WarcError, read_record
from archiver.web.http import decode_body
from archiver.web.timestamps import from_datetime

index, warcs, pywb, sample, version = sys.argv[1:]
pages = []
for line in open(index, encoding="utf-8"):
    c = Capture.from_cdxj(line)
    if c.status == 200 and c.mime == "text/html":
        pages.append(c)
step = max(1, len(pages) // int(sample))
chosen = pages[::step][: int(sample)]
if not chosen:
    sys.exit(f"interop_pywb: FAIL: no archived HTML page with status 200 in {index}")


def header(head: bytes, name: str) -> str | None:
    found = re.search(rb"^" + name.encode() + rb":[ \t]*(.*?)\r?$", head, re.IGNORECASE | re.MULTILINE)
    return found and found[1].decode("latin-1").strip()


def get(url: str) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


failures = []
for c in chosen:
    try:
        stored = read_record(Path(warcs), c.filename, c.offset, c.length)
    except WarcError as e:
        failures.append(f"our own copy is unreadable: {str(e)[:200]}")
        continue
    body = decode_body(stored.payload, header(stored.http_head, "Content-Encoding"), 50 * 2**20)
    # Text pywb leaves alone: the <title>, or else the longest run of text between two tags.
    title = re.search(rb"<title>([^<]+)</title>", body, re.IGNORECASE)
    snippet = title[1] if title else max(re.findall(rb">([^<>]{20,})<", body), key=len, default=b"")
    for coll in ("file", "remote", "web"):
        status, headers, text = get(f"{pywb}/{coll}/{c.timestamp}mp_/{c.url}")
        when = headers.get("Memento-Datetime")
        stamp = when and from_datetime(parsedate_to_datetime(when))
        if status != 200 or stamp != c.timestamp or snippet not in text:
            failures.append(f"{coll} mp_ {c.timestamp} {c.url}: status {status}, memento {stamp}, "
                            f"text {snippet[:40]!r} {'found' if snippet in text else 'missing'}")
        status, _, raw = get(f"{pywb}/{coll}/{c.timestamp}id_/{c.url}")
        if status != 200 or raw != stored.payload:
            failures.append(f"{coll} id_ {c.timestamp} {c.url}: status {status}, "
                            f"{len(raw)} bytes, archived {len(stored.payload)}")
for failure in failures:
    print("  " + failure, file=sys.stderr)
verdict = "FAIL" if failures else "OK"
print(f"interop_pywb: {verdict}: pywb {version}, {len(chosen)} archived HTML pages (of {len(pages)}) in mp_ and "
      f"id_ modes, in collections file, remote and web: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
EOF
QUERIES=$(grep -c '"GET /cdx?.*" 200 "python-requests' "$WORK/replay.log" || true)
if [[ $QUERIES -eq 0 ]]; then
    echo "interop_pywb: FAIL: pywb never queried our /cdx endpoint" >&2
    exit 1
fi
echo "interop_pywb: our /cdx answered $QUERIES queries from pywb, e.g. $(grep -m1 -o '"GET /cdx?[^"]*" 200 "python-requests' "$WORK/replay.log" | cut -d'"' -f2 | cut -c5-)"
