"""The values the queues' interfaces speak in, whichever backend holds them (as httpcore's
``_models.py``): a crawl-queue entry and its line, where a URL stands in a queue, a site's row, what
the links batch tells a site queue, and the error both crawl queues raise. No backend here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from archiver.queues.revisits import ChangeHistory

# A site's states in a site queue (see ``queues.embedded.sitequeue``).
STATES = ("waiting", "active", "retry", "deferred", "paused", "revisit", "done")
# The most a site's saved cookies may hold (``keep_cookies``): bytes of the jar's JSON text.
COOKIES_LIMIT = 256 * 1024


@dataclass(frozen=True, slots=True)
class Entry:
    url: str
    depth: int
    end: int  # byte offset in the log just after this entry's line


class QueuePosition(NamedTuple):
    """Where a URL stands in its site's crawl queue (``archiver why``)."""

    depth: int
    done: bool  # the cursor has passed it: handled by a visit (this one or the last)
    ahead: int  # entries still to handle before it (0 when done)
    pending: int  # entries still to handle in all


def parse_entry(line: bytes) -> tuple[str, int] | None:
    """(url, depth) from a complete log line, or None if it is not one."""
    tab = line.find(b"\t")
    digits = line[:tab]
    if tab <= 0 or not digits.isdigit() or len(line) - tab <= 2:
        return None
    try:
        return line[tab + 1 : -1].decode(), int(digits)
    except UnicodeDecodeError:
        return None


class CrawlQueueBusy(RuntimeError):
    """The site's crawl queue is open in another process (or another visit)."""


class SiteRow(NamedTuple):
    """One site of a queue as stored."""

    origin: str
    state: str
    due: float
    inlinks: int
    attempts: int
    added: float
    visits: int
    note: str
    restart: bool
    next_visit: float
    history: ChangeHistory
    hops: int = 0
    priority: float = 0.0
    # The gatekeeper answers its visits met (``count_gatekeepers``), (kind, count) by kind.
    gatekeepers: tuple[tuple[str, int], ...] = ()


class LinkedSite(NamedTuple):
    """What the links batch tells a site queue of one site: its in-link count, whether it has new
    URLs (to wake it), its lowest hop count and highest priority."""

    origin: str
    inlinks: int
    woken: bool
    hops: int = 0
    priority: float = 0.0
