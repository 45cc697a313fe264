"""``archiver why URL``: captured (when, which record) or why not, from the archive's records."""

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
    date,
    fail,
    load_config,
    url,
    verb,
)
from archiver.stores import open_stores
from archiver.web.timestamps import from_datetime

EXITS = {0: "the URL was captured at or before the date", 1: "it was not (the answer says why)"}


def add(verbs: Verbs) -> None:
    why = verb(verbs, "why", "was a URL captured (when, which record), and if not, why not: "
               "robots.txt, a guard, its site failing, not reached yet...", exits=EXITS, run=run)
    why.add_argument("url", metavar="URL", help="the URL (example.org/x means http://example.org/x)")
    add_at(why)
    add_json(why)
    add_config(why)


def run(args: argparse.Namespace) -> int:
    from archiver.replay import why

    cfg = load_config(args)
    try:
        wanted = url(args.url)
        at = date(args.at, upper=True) if args.at else from_datetime(datetime.now(UTC))
    except InputError as e:
        return fail(str(e))
    stores = open_stores(cfg)
    with contextlib.closing(catalog(cfg)) as opened:
        answer = why.explain(why.gather(stores, opened, stores.warcs(), cfg, wanted, at))
    if args.json:
        print(json.dumps(answer.to_json(), indent=1))
    else:
        print(f"{answer.url} at {answer.at}: {answer.kind}")
        print(f"  {answer.reason}")
    return 0 if answer.captured else 1
