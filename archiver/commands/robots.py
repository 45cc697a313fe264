"""``archiver robots HOST``: the robots.txt in force at a date, and every change of it."""

from __future__ import annotations

import argparse
import contextlib
import json
from datetime import UTC, datetime

from archiver.commands.common import (
    InputError,
    Verbs,
    add_at,
    add_config,
    add_json,
    catalog,
    count,
    date,
    fail,
    load_config,
    url,
    verb,
)
from archiver.stores import open_stores
from archiver.web import urls
from archiver.web.timestamps import from_datetime

EXITS = {0: "a robots.txt was in force at the date", 1: "no capture of it at or before the date"}


def add(verbs: Verbs) -> None:
    robots = verb(verbs, "robots", "the robots.txt that governed a host at a date, and every "
                  "change of it, from the archive's captures", exits=EXITS, run=run)
    robots.add_argument("host", metavar="HOST", help="a host name or an origin (http://host:port)")
    add_at(robots)
    add_json(robots)
    add_config(robots)


def run(args: argparse.Namespace) -> int:
    from archiver.store import robotstxt

    cfg = load_config(args)
    try:
        origin = urls.origin(url(args.host))
        at = date(args.at, upper=True) if args.at else from_datetime(datetime.now(UTC))
    except InputError as e:
        return fail(str(e))
    stores = open_stores(cfg)
    with contextlib.closing(catalog(cfg)) as opened:
        found = robotstxt.history(opened, stores.warcs(), origin)
    current = robotstxt.governing(found, at)
    changes = [r for r in found if r.changed]
    if args.json:
        print(json.dumps({
            "origin": origin, "at": at,
            "in_force": None if current is None else current.to_json(text=True),
            "changes": [r.to_json(text=False) for r in changes],
            "captures": len(found)}, indent=1))
        return 0 if current is not None else 1
    if current is None:
        print(f"no capture of {origin}/robots.txt at or before {at}"
              + (f" (the first is at {found[0].capture.timestamp})" if found else ""))
    else:
        c = current.capture
        print(f"in force at {at}: the capture of {c.url} at {c.timestamp} "
              f"({c.filename}:{c.offset}): {current.meaning()}")
        if current.via:
            print("  redirected through " + " -> ".join(current.via))
        if current.status is not None and 200 <= current.status < 300:
            print(current.text.decode("utf-8", errors="replace").rstrip("\n"))
    print(f"\n{count(len(changes), 'version')} in {count(len(found), 'capture')}:")
    for r in changes:
        print(f"  {r.capture.timestamp}  {r.meaning()}  {len(r.text)} bytes  {r.capture.digest}")
    return 0 if current is not None else 1
