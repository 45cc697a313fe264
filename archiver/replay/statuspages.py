"""Crawl status: ``GET /status`` (a page that refreshes itself) and ``GET /metrics`` (Prometheus).

Both read the status each crawler process rewrites every ``crawl.status_interval`` seconds
(``<root>/state/crawl-N.json``, archiver.store.status; table crawlers with the shared stores). A
status not rewritten for three intervals belongs to a process that stopped or hangs: the page
marks it stale, and /metrics gives
``archiver_status_time_seconds`` so that an alert can compare it with ``time()``.

/metrics is the Prometheus text exposition format 0.0.4: counters end in ``_total``, units are
base units (seconds, bytes), every sample has a ``process`` label.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

_templates = Environment(loader=PackageLoader("archiver.replay", "templates"), autoescape=True)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A status older than this many write intervals is stale.
STALE_INTERVALS = 3

# (name, type, help, key in the status file) for the per-process numbers.
_SCALARS = (
    ("archiver_status_time_seconds", "gauge", "Unix time the process last wrote its status.", "time"),
    ("archiver_start_time_seconds", "gauge", "Unix time the process started.", "started"),
    ("archiver_pages_total", "counter", "Responses fetched and archived.", "pages"),
    ("archiver_bytes_total", "counter", "Bytes received.", "bytes"),
    ("archiver_pages_per_second", "gauge", "Pages per second over the last status interval.", "pages_per_s"),
    ("archiver_sites_done_total", "counter", "Site visits finished.", "sites_done"),
    ("archiver_sites_retried_total", "counter", "Site visits put back for a retry.", "sites_retried"),
    ("archiver_sites_paused_total", "counter", "Site visits that paused their site (session lost, "
     "login failed).", "sites_paused"),
    ("archiver_robots_excluded_total", "counter", "URLs not fetched because robots.txt disallows them.",
     "robots_excluded"),
    ("archiver_links_local_total", "counter", "Links found to the same site.", "links_local"),
    ("archiver_links_external_total", "counter", "Links found to other sites.", "links_external"),
    ("archiver_queued_urls", "gauge", "URLs waiting in the crawl queues of the active sites.", "queued_urls"),
)  # fmt: skip
# (name, type, help, key of a {label value: number} map in the status file, label name).
_MAPS = (
    ("archiver_sites", "gauge", "Sites in the process's site queue, by state.", "sites", "state"),
    ("archiver_errors_total", "counter", "Fetch and processing errors, by kind.", "errors", "kind"),
    ("archiver_skipped_total", "counter", "URLs not queued, by reason.", "skipped", "reason"),
    ("archiver_gatekeepers_total", "counter", "Answers that were a gatekeeper's, not the site's, "
     "by kind.", "gatekeepers", "kind"),
    ("archiver_faults_total", "counter", "Faults of the stores and the cluster, and recoveries, by event.",
     "faults", "event"),
)


def _number(value: object) -> float | None:
    """A status value as a number, or None if it is none (status files of older versions lack some)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _mapping(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k): n for k, v in value.items() if (n := _number(v)) is not None}


def _active(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    active = status.get("active")
    if not isinstance(active, dict):
        return {}
    return {str(site): info for site, info in active.items() if isinstance(info, dict)}


def _label(value: object) -> str:
    """A label value escaped as the exposition format asks: backslash, double quote, newline."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(n: float) -> str:
    if math.isnan(n):
        return "NaN"
    if math.isinf(n):
        return "+Inf" if n > 0 else "-Inf"
    return str(n)


def metrics_text(statuses: Iterable[dict[str, Any]]) -> str:
    """The /metrics body for these status files (pure)."""
    statuses = list(statuses)
    lines: list[str] = []

    def family(name: str, kind: str, text: str, samples: Iterator[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{{{labels}}} {_value(v)}" for labels, v in samples)

    def process(s: dict[str, Any]) -> str:
        return f'process="{_label(s.get("process", ""))}"'

    for name, kind, text, key in _SCALARS:
        family(
            name, kind, text, ((process(s), n) for s in statuses if (n := _number(s.get(key))) is not None)
        )
    family(
        "archiver_active_sites",
        "gauge",
        "Sites being crawled now.",
        ((process(s), len(_active(s))) for s in statuses),
    )
    for name, kind, text, key, label in _MAPS:
        family(
            name,
            kind,
            text,
            (
                (f'{process(s)},{label}="{_label(k)}"', n)
                for s in statuses
                for k, n in sorted(_mapping(s.get(key)).items())
            ),
        )
    family(
        "archiver_site_queued_urls",
        "gauge",
        "URLs waiting in the crawl queue of each active site.",
        (
            (f'{process(s)},site="{_label(site)}"', n)
            for s in statuses
            for site, info in _active(s).items()
            if (n := _number(info.get("queued"))) is not None
        ),
    )
    return "\n".join(lines) + "\n"


def process_view(status: dict[str, Any], now: float, interval: float) -> dict[str, Any]:
    """One process's status as the page shows it (pure); missing numbers are 0."""
    written = _number(status.get("time"))
    started = _number(status.get("started"))
    age = None if written is None else max(0.0, now - written)
    return {
        "process": status.get("process", "?"),
        "pid": status.get("pid", "?"),
        "host": status.get("host"),  # with the shared stores: the machine it runs on
        "age": age,
        "stale": age is None or age > STALE_INTERVALS * interval,
        "uptime": None if written is None or started is None else max(0.0, written - started),
        "numbers": {key: _number(status.get(key)) or 0 for _, _, _, key in _SCALARS},
        "sites": _mapping(status.get("sites")),
        "errors": _mapping(status.get("errors")),
        "skipped": _mapping(status.get("skipped")),
        "active": [
            {"site": site, "url": str(info.get("url", "")), "queued": _number(info.get("queued")) or 0}
            for site, info in sorted(_active(status).items())
        ],
    }


def size(n: float) -> str:
    """Bytes in binary units, e.g. "12.3 MiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}d {text}" if days else text


_templates.filters["size"] = size
_templates.filters["duration"] = duration


async def status_page(request: Request) -> Response:
    archive = request.app.state.archive
    interval = archive.config.crawl.status_interval
    now = time.time()
    processes = [process_view(s, now, interval) for s in await archive.statuses()]
    totals = {
        key: sum(p["numbers"][key] for p in processes if not p["stale"])
        for key in ("pages", "bytes", "pages_per_s")
    }
    page = _templates.get_template("status.html").render(
        processes=processes,
        totals=totals,
        active=sum(len(p["active"]) for p in processes if not p["stale"]),
        # Refresh as often as the crawlers write their status (crawl.status_interval).
        refresh=max(1, round(interval)),
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now)),
    )
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


async def metrics(request: Request) -> Response:
    body = metrics_text(await request.app.state.archive.statuses())
    return PlainTextResponse(body, media_type=CONTENT_TYPE, headers={"Cache-Control": "no-store"})


routes = [Route("/status", status_page), Route("/metrics", metrics)]
