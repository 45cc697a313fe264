"""``archiver dns ...``: the DNS history service and its queries."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from archiver import config, logs
from archiver.commands.common import (
    InputError,
    Verbs,
    add_config,
    add_json,
    date,
    fail,
    group,
    iso,
    load_config,
    verb,
)
from archiver.stores import open_stores
from archiver.web.timestamps import to_datetime

if TYPE_CHECKING:
    from archiver.dns.resolver import RefreshStats
    from archiver.store.models import DnsRow

SERVICE_EXITS = {0: "the service stopped on a signal"}
REFRESH_EXITS = {0: "the names were asked (failures are counted in the report)"}
FOUND = {0: "the host has a record", 1: "none"}


def add(verbs: Verbs) -> None:
    dns_verbs = group(verbs, "dns", "the DNS history service (`dns run` runs it) and its queries",
                      "dns_verb")

    def sub(name: str, description: str, exits: dict[int, str]) -> argparse.ArgumentParser:
        parser = verb(dns_verbs, name, description, exits=exits, run=run)
        add_config(parser)
        return parser

    service = sub("run", "run the DNS history service: resolve the queued sites' hosts ahead of "
                  "the crawl", SERVICE_EXITS)
    service.add_argument("--hosts", metavar="FILE", help="also keep these names fresh (one a line)")
    refresh_ = sub("refresh", "resolve the queued sites' hosts that are due", REFRESH_EXITS)
    refresh_.add_argument("--once", action="store_true", help="one pass, then exit")
    refresh_.add_argument("--hosts", metavar="FILE", help="also these names (one a line)")
    refresh_.add_argument("--force", action="store_true", help="every name, due or not")
    lookup = sub("lookup", "a host's addresses, canonical name and aliases as of a date", FOUND)
    lookup.add_argument("host", metavar="HOST", help="the host name")
    lookup.add_argument("--at", metavar="DATE", help="ISO 8601 or 4 to 14 digits (default: now)")
    add_json(lookup)
    history_ = sub("history", "every row ever recorded for a host", FOUND)
    history_.add_argument("host", metavar="HOST", help="the host name")
    add_json(history_)


def when(text: str | None) -> float:
    if text is None:
        return time.time()
    return to_datetime(date(text)).timestamp()


def row_json(row: DnsRow) -> dict[str, object]:
    return {"id": row.id, "value": row.value, "type": row.type, "entered": iso(row.entered),
            "superseded": iso(row.superseded) if row.superseded else None, "source": row.source}


def print_rows(rows: list[DnsRow]) -> None:
    for r in rows:
        print(f"{r.id:>6} {r.type:<9} {r.value:<40} {iso(r.entered)}  {iso(r.superseded)}  "
              f"{r.source}")


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    logs.setup(cfg.log.level)
    try:
        extra = _host_names(Path(args.hosts)) if getattr(args, "hosts", None) else []
    except OSError as e:
        return fail(f"{args.hosts}: cannot read host names: {e.strerror}")
    if args.dns_verb in ("run", "refresh"):
        cfg.root.mkdir(parents=True, exist_ok=True)
        return _dns_service(cfg, args, extra)
    try:
        at = when(getattr(args, "at", None))
    except InputError as e:
        return fail(str(e))
    try:
        history = open_stores(cfg).dns_history(readonly=True)
    except FileNotFoundError as e:
        return fail(f"{e} (run `archiver dns refresh --once` first)")
    with contextlib.closing(history):
        if args.dns_verb == "history":
            rows = history.history(args.host)
            if args.json:
                print(json.dumps([row_json(r) for r in rows], indent=1))
            else:
                print_rows(rows)
            return 0 if rows else 1
        found = history.at(args.host, at)
        state = history.state(args.host)
    if args.json:
        print(json.dumps({
            "host": args.host, "at": iso(at),
            "canonical": found.canonical if found else None,
            "addresses": list(found.addresses) if found else [],
            "aliases": list(found.aliases) if found else [],
            "rows": [row_json(r) for r in found.rows] if found else [],
            "last_outcome": state.outcome if state else None}, indent=1))
    elif found is None:
        outcome = f" (last answer: {state.outcome})" if state else ""
        print(f"{args.host}: no record as of {iso(at)}{outcome}")
    else:
        print(f"{args.host} as of {iso(at)}: canonical {found.canonical}, "
              f"address {', '.join(found.addresses) or '-'}")
        print_rows(list(found.rows))
    return 0 if found else 1


def _host_names(path: Path) -> list[str]:
    """The host names of ``--hosts``, one a line (OSError if the file cannot be read)."""
    from archiver.dns.service import read_names

    return read_names(path)


def _dns_service(cfg: config.Config, args: argparse.Namespace, extra: list[str]) -> int:
    """``dns run`` and ``dns refresh``: run the DNS service, or one refresh pass with ``--once``."""
    import trio

    from archiver.dns.service import refresh_pass, run_service

    if args.dns_verb == "run" or not args.once:
        trio.run(run_service, cfg, extra)
        return 0

    async def once() -> RefreshStats:
        history = open_stores(cfg).dns_history()
        try:
            return await refresh_pass(cfg, history, extra, force=args.force)
        finally:
            history.close()

    stats = trio.run(once)
    failed = ", ".join(f"{k} {v}" for k, v in sorted(stats.failed.items())) or "none"
    print(f"dns refresh: {stats.asked} asked, {stats.ok} ok, {stats.changed} changed, "
          f"failed: {failed} ({stats.elapsed:.2f}s)")
    return 0
