"""Crawl progress: counters kept by a crawler process, its status file, and their text form.

Each process rewrites ``<root>/state/crawl-<process>.json`` every few seconds (write, then rename, so
a reader never sees half a file), or, with the shared stores, its row of table ``crawlers``
(archiver.store.postgres.status); ``archiver status`` and the log's progress line print the same.
``loop_stall_max_ms`` is the longest the process's event loop was held by one task step since start
(see :mod:`archiver.crawl.loopwatch`), ``loop_stall_task`` the task that held it, and
``loop_stalls_over_100ms`` how many steps took 100 ms or more.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def status_path(root: Path, process: int) -> Path:
    return root / "state" / f"crawl-{process}.json"


def write_status(path: Path, status: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(status, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def read_statuses(root: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((root / "state").glob("crawl-*.json")):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def summary_line(s: dict[str, Any]) -> str:
    """The one-line progress summary used in the log and by ``archiver status``."""
    errors, skipped = _counts(s["errors"]), _counts(s.get("skipped", {}))
    sites = s["sites"]
    return (f"pages={s['pages']} bytes={s['bytes']} pages/s={s['pages_per_s']} "
            f"active={len(s['active'])} done={s['sites_done']} "
            f"waiting={sites.get('waiting', 0) + sites.get('retry', 0)} "
            f"deferred={sites.get('deferred', 0)} revisit={sites.get('revisit', 0)} "
            + (f"paused={sites['paused']} " if sites.get("paused") else "") +
            f"revisits={s.get('revisits', 0)} bytes_saved={s.get('bytes_saved', 0)} "
            f"queued_urls={s['queued_urls']} errors={errors} "
            f"skipped={skipped} loop_stall_max_ms={s.get('loop_stall_max_ms', '-')}"
            + (f" rendered={s['rendered']}" if s.get("rendered") else "")
            + (f" faults={faults}" if (faults := _counts(s.get("faults", {}))) != "0" else "")
            + (f" waiting_for={s['waiting_for']}" if s.get("waiting_for") else "")
            + (f" bundles_waiting={s['bundles_waiting']}" if s.get("bundles_waiting") else ""))


def _ago(seconds: float) -> str:
    """A time span as a reader takes it in: 45s, 4m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _counts(counts: dict[str, int]) -> str:
    return ",".join(f"{k}:{v}" for k, v in sorted(counts.items())) or "0"


def format_status(s: dict[str, Any], now: float | None = None, *,
                  stale_after: float | None = None) -> str:
    """Multi-line text for ``archiver status``. A status from the shared store also names the
    process's host and its heartbeat's age, marked when older than ``stale_after`` seconds (the
    lease TTL: its sites go to other processes); one registered but not reporting yet has no
    numbers. A status with ``running`` (and ``last_seen_s``) says whether the process runs."""
    now = time.time() if now is None else now
    where = f" on {s['host']}" if "host" in s else ""
    said = [f"status written {now - s['time']:.0f}s ago"] if "time" in s else ["no status yet"]
    if "heartbeat_age" in s:
        age = s["heartbeat_age"]
        gone = " (past crawl.lease_ttl: gone?)" if stale_after is not None and age > stale_after else ""
        said.append(f"heartbeat {age:.0f}s ago{gone}")
    if s.get("running") is None:
        lines = [f"process {s['process']}{where} (pid {s['pid']}), {', '.join(said)}"]
    else:
        seen = s.get("last_seen_s")
        state = "running" if s["running"] else (
            "stopped" + ("" if seen is None else f" (last seen {_ago(seen)} ago)"))
        lines = [f"process {s['process']}{where}: {state}, pid {s['pid']}, {', '.join(said)}"]
    if "pages" in s:
        lines.append("  " + summary_line(s))
    for site, info in s.get("active", {}).items():
        lines.append(f"  {site}  queued={info.get('queued', 0)}  {info.get('url', '')}")
    return "\n".join(lines)


class StatusFiles:
    """Each crawler process's status as ``<root>/state/crawl-<process>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, process: int, status: dict[str, Any]) -> None:
        write_status(status_path(self.root, process), status)

    def read_all(self) -> list[dict[str, Any]]:
        return read_statuses(self.root)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its file."""
