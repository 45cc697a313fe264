"""The counters of one crawler process, and the JSON status they make (written by archiver.store.status)."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from archiver.crawl.loopwatch import LoopWatch
from archiver.logs import event


@dataclass
class Stats:
    """Counters of one crawler process."""

    process: int = 0
    started: float = field(default_factory=time.time)
    pages: int = 0
    bytes: int = 0
    revisits: int = 0  # revisit records written (of both profiles)
    not_modified: int = 0  # of them, answers 304 to a conditional request
    bytes_saved: int = 0  # payload bytes a revisit record spared the WARC files (see crawl.visit)
    sites_done: int = 0
    sites_retried: int = 0
    sites_lost: int = 0  # visits stopped because another process took the site's lease
    sites_paused: int = 0  # visits that paused their site (session lost, login failed)
    robots_excluded: int = 0
    links_local: int = 0
    links_external: int = 0
    rendered: int = 0  # pages rendered in the browser (archiver.crawl.rendering)
    catalog_batch_max_ms: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    gatekeepers: Counter[str] = field(default_factory=Counter)  # gatekeepers' answers by kind
    # Faults of the cluster's parts and recoveries from them, by event name (``fault``).
    faults: Counter[str] = field(default_factory=Counter)
    # What fetching waits for now ("store", "objects", "disk", ...), None while it goes on.
    waiting_for: str | None = None
    bundles_waiting: int = 0  # closed bundles the object store has not taken yet (cluster)
    active: dict[str, dict[str, Any]] = field(default_factory=dict)
    loop: LoopWatch = field(default_factory=LoopWatch)  # the crawler adds it to its trio run
    _last_pages: int = 0
    _last_time: float = field(default_factory=time.monotonic)

    def snapshot(self, queue: dict[str, int]) -> dict[str, Any]:
        """A JSON-able status, with the pages/s since the previous snapshot."""
        now = time.monotonic()
        rate = (self.pages - self._last_pages) / max(now - self._last_time, 1e-6)
        self._last_pages, self._last_time = self.pages, now
        return {
            "process": self.process, "pid": os.getpid(), "time": time.time(),
            "started": self.started, "pages": self.pages, "bytes": self.bytes,
            "revisits": self.revisits, "not_modified": self.not_modified,
            "bytes_saved": self.bytes_saved,
            "pages_per_s": round(rate, 1), "sites_done": self.sites_done,
            "sites_retried": self.sites_retried, "sites_lost": self.sites_lost,
            "sites_paused": self.sites_paused,
            "robots_excluded": self.robots_excluded,
            "links_local": self.links_local, "links_external": self.links_external,
            "rendered": self.rendered,
            "catalog_batch_max_ms": round(self.catalog_batch_max_ms, 1),
            "loop_stall_max_ms": round(self.loop.longest * 1000, 1),
            "loop_stall_task": self.loop.longest_task,
            "loop_stalls_over_100ms": self.loop.long_steps,
            "queued_urls": sum(a.get("queued", 0) for a in self.active.values()),
            "errors": dict(self.errors), "skipped": dict(self.skipped),
            "gatekeepers": dict(self.gatekeepers),
            "faults": dict(self.faults), "waiting_for": self.waiting_for,
            "bundles_waiting": self.bundles_waiting,
            "sites": queue,
            "active": {site: dict(info) for site, info in sorted(self.active.items())},
        }

    def fault(self, log: logging.Logger, level: int, name: str, **fields: Any) -> None:
        """One fault or recovery (``store-unavailable``, ``lease-lost``...): logged as event
        ``name`` with its cause in ``fields``, and counted (the status's ``faults``, and
        ``archiver_faults_total`` on the replay's /metrics)."""
        self.faults[name] += 1
        event(log, level, name, **fields)
