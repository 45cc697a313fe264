"""``archiver dns``: keeps the DNS history fresh for the sites the crawlers will visit.

Each pass collects the hosts of every site not yet done in the site queues and of the sites whose
revisit falls before the next pass (plus any names given), asks DNS for those that are due, and
records the answers. Names in the hosts file are the operator's override: they are not asked (the
crawler records them, as ``hosts``, when it uses them).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from pathlib import Path

import trio

from archiver.config import Config
from archiver.dns.lookup import parse_hosts
from archiver.dns.resolver import RefreshStats, Resolver, refresh
from archiver.logs import event
from archiver.service import Service
from archiver.store.interfaces import DnsHistoryStore
from archiver.stores import Stores, open_stores
from archiver.web import urls

log = logging.getLogger("archiver.dns")


def queued_hosts(stores: Stores, revisits_due_by: float = 0.0) -> list[str]:
    """Hosts of the sites waiting, active, retrying or deferred in the site queues (every
    crawler's own in the embedded mode, the one shared queue with PostgreSQL), and of the finished
    sites whose revisit is due by ``revisits_due_by``."""
    return list(dict.fromkeys(urls.origin_parts(origin)[1]
                              for origin in stores.queued_origins(revisits_due_by)))


def read_names(path: Path) -> list[str]:
    """Host names from a file, one a line (blank lines and ``#`` comments allowed)."""
    names = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0])
    return names


async def refresh_pass(config: Config, history: DnsHistoryStore, extra: Iterable[str] = (), *,
                       force: bool = False) -> RefreshStats:
    """One pass over the queued sites' hosts and ``extra``, with a progress line per few seconds."""
    d = config.dns
    overrides = set()
    if d.hosts_file is not None and d.hosts_file.exists():
        overrides = set(parse_hosts(d.hosts_file.read_text(encoding="utf-8", errors="replace")))
    # A revisit due before the next pass is resolved in this one.
    queued = queued_hosts(open_stores(config), time.time() + d.refresh_interval)
    names = [n for n in [*queued, *extra] if n.lower() not in overrides]
    last = [time.monotonic()]

    def progress(stats: RefreshStats) -> None:
        if time.monotonic() - last[0] >= 5:
            last[0] = time.monotonic()
            event(log, logging.INFO, "dns-progress", asked=stats.asked, ok=stats.ok,
                  changed=stats.changed, failed=sum(stats.failed.values()))

    stats = await refresh(history, Resolver(nameservers=d.nameservers, timeout=d.timeout),
                          names, now=time.time, force=force, concurrency=d.concurrency,
                          min_age=d.min_age, max_age=d.max_age, retry_base=d.retry_base,
                          retry_max=d.retry_max, progress=progress)
    event(log, logging.INFO, "dns-pass", names=len(names), asked=stats.asked, ok=stats.ok,
          changed=stats.changed, failed=",".join(f"{k}:{v}" for k, v in stats.failed.items()) or 0,
          seconds=round(stats.elapsed, 2))
    return stats


async def run_service(config: Config, extra: Iterable[str] = ()) -> None:
    """Refresh every ``dns.refresh_interval`` until SIGINT/SIGTERM, which stop at once (every
    answer is in the history the moment it arrives); SIGHUP's ``[dns]`` settings apply from the next
    pass."""
    extra = list(extra)
    service = Service(config, drain_timeout=lambda _config: 0.0)

    async def passes() -> None:
        while True:
            await refresh_pass(service.config, history, extra)
            await trio.sleep(service.config.dns.refresh_interval)

    with contextlib.closing(open_stores(config).dns_history()) as history:
        await service.run(passes)
