"""``archiver status``: the crawler processes' progress, or every site of the site queues."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Any, cast

from archiver import config
from archiver.commands.common import Verbs, add_config, add_json, iso, load_config, verb
from archiver.stores import Stores, lock_held, open_stores

if TYPE_CHECKING:
    from archiver.queues.models import SiteRow

EXITS = {0: "the status was printed: each crawler process, running or stopped (and when last seen)",
         2: "bad usage, or the shared store is away (this machine's local status files are "
            "printed instead)"}


def add(verbs: Verbs) -> None:
    status = verb(verbs, "status", "print the crawler processes' progress", exits=EXITS, run=run)
    add_config(status)
    add_json(status, "a JSON array of the processes' statuses, each with running (true, false, or "
                     "null: cannot tell) and last_seen_s (with --sites: one JSON object a site)")
    status.add_argument("--sites", action="store_true",
                        help="list every site of the site queues: state (and why, for a paused "
                             "site), next visit, change rate, gatekeeper answers")


def run(args: argparse.Namespace) -> int:
    from archiver.store.status import format_status

    cfg = load_config(args)
    if args.sites:
        return _site_status(open_stores(cfg), as_json=args.json)
    if config.database_url(cfg.store.url) is not None:  # the cluster's status lives in its database
        from archiver.store.postgres.schema import StoreError

        try:
            stores = open_stores(cfg)
            with contextlib.closing(stores.status()) as status:
                statuses = status.read_all()
        except StoreError as e:
            return _local_status(cfg, e, as_json=args.json)
    else:
        stores = open_stores(cfg)
        with contextlib.closing(stores.status()) as status:
            statuses = status.read_all()
    with_running(statuses, cfg, by_heartbeat=stores.cluster is not None)
    if args.json:
        print(json.dumps(statuses, indent=1, sort_keys=True))
    elif not statuses:
        print(f"no crawler status in {stores.status_location}")
    else:
        print("\n".join(format_status(s, stale_after=cfg.crawl.lease_ttl) for s in statuses))
    return 0


def _local_status(cfg: config.Config, error: Exception, *, as_json: bool) -> int:
    """``status`` while the cluster's database is away: what this machine's crawlers last wrote
    to their local copies (each says ``waiting_for=database`` while it waits); status 2, as for
    every store that cannot be used."""
    from archiver.store.status import StatusFiles, format_status

    print(f"archiver status: {error}; this machine's crawlers, from their local status files:",
          file=sys.stderr)
    statuses = with_running(StatusFiles(cfg.root).read_all(), cfg, by_heartbeat=False)
    if as_json:
        print(json.dumps(statuses, indent=1, sort_keys=True))
    elif not statuses:
        print(f"no crawler status in {cfg.root / 'state'}")
    else:
        print("\n".join(format_status(s, stale_after=cfg.crawl.lease_ttl) for s in statuses))
    return 2


def with_running(statuses: list[dict[str, Any]], cfg: config.Config, *, by_heartbeat: bool,
                 now: float | None = None) -> list[dict[str, Any]]:
    """Each status with ``running`` (None: this machine cannot tell) and ``last_seen_s`` (seconds
    since it last wrote its status or heartbeat). A shared store's heartbeat older than
    ``crawl.lease_ttl`` means stopped; on one machine the kernel tells whether the process holds
    its lock (``stores.lock_held``: probed, not taken)."""
    now = time.time() if now is None else now
    for s in statuses:
        if by_heartbeat and "heartbeat_age" in s:
            s["running"] = s["heartbeat_age"] <= cfg.crawl.lease_ttl
            s["last_seen_s"] = s["heartbeat_age"]
        else:
            s["running"] = lock_held(cfg.root, "crawl", s["process"])
            s["last_seen_s"] = round(max(now - s["time"], 0.0), 1) if "time" in s else None
    return statuses


def _site_status(stores: Stores, *, as_json: bool) -> int:
    """``status --sites``: every site of the site queues, with its next visit and change rate."""
    now = time.time()
    for number, queue in stores.site_queues():  # one at a time
        with contextlib.closing(queue):
            for row in queue.rows():
                described = describe_site(row, now)
                if number is not None:
                    described["process"] = number
                print(json.dumps(described, sort_keys=True) if as_json else site_line(described))
    return 0


def describe_site(row: SiteRow, now: float) -> dict[str, object]:
    """One site of a site queue, as ``status --sites --json`` prints it (a paused site's note is
    why it is paused; it has no due time, it waits for ``archiver site resume``)."""
    rate = row.history.rate()
    return {"origin": row.origin, "state": row.state, "visits": row.visits, "inlinks": row.inlinks,
            "hops": row.hops, "priority": row.priority,
            "due": iso(row.due) if row.state not in ("done", "paused") and row.due else None,
            "next_visit": iso(row.next_visit) if row.next_visit else None,
            "next_visit_in_days": round((row.next_visit - now) / 86400, 2) if row.next_visit else None,
            "change_rate_per_day": None if rate is None else round(rate * 86400, 4),
            "pages_compared": round(row.history.compared, 2),
            "pages_changed": round(row.history.changed, 2), "note": row.note,
            "gatekeepers": dict(row.gatekeepers)}


def site_line(site: dict[str, object]) -> str:
    """The text form of ``describe_site``."""
    parts = [str(site["origin"]), str(site["state"]), f"visits={site['visits']}",
             f"inlinks={site['inlinks']}", f"hops={site['hops']}", f"priority={site['priority']}"]
    if site["next_visit"]:
        parts.append(f"next_visit={site['next_visit']} (in {site['next_visit_in_days']} days)")
    elif site["due"]:
        parts.append(f"due={site['due']}")
    if site["change_rate_per_day"] is not None:
        parts.append(f"change_rate={site['change_rate_per_day']}/day "
                     f"({site['pages_changed']} of {site['pages_compared']} pages compared changed)")
    if gatekeepers := cast("dict[str, int]", site["gatekeepers"]):
        parts.append("gatekeepers=" + ",".join(f"{kind}:{n}" for kind, n in gatekeepers.items()))
    if site["note"]:
        parts.append(f"note={site['note']!r}")
    return "  ".join(parts)
