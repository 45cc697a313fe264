"""Crawler processes' status in either mode, for the status tests.

:func:`register` does what a crawler does when it starts with the shared stores: it inserts its
row of table ``crawlers`` (process, epoch, host, pid, started, heartbeat now(), here made older by
``heartbeat_ago`` seconds); in the embedded mode there is nothing to register. :func:`status_of`
is a status as a crawler reports it (archiver.crawl.stats).
"""

from __future__ import annotations

from typing import Any

import psycopg

from archiver.crawl.stats import Stats
from archiver.stores import Stores


def register(stores: Stores, process: int, host: str, *, pid: int,
             heartbeat_ago: float = 0.0) -> None:
    if stores.cluster is None:
        return
    with psycopg.connect(stores.cluster.url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO crawlers (process, epoch, host, pid, started, heartbeat)"
            " VALUES (%s, 1, %s, %s, extract(epoch FROM now()), now() - make_interval(secs => %s))",
            (process, host, pid, heartbeat_ago))


def status_of(process: int, pages: int, *, active: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    stats = Stats(process=process, pages=pages, bytes=pages * 1000, active=dict(active or {}))
    stats.errors["timeout"] = 2
    return stats.snapshot({"waiting": 3, "done": 1})
