"""What both site queues share, pure: a site's row from its columns, the states a slot may claim
from, a failed visit's back-off, which crawler process owns a site, what the links batch sends,
a site's gatekeeper counts as its column holds them (a JSON object's text, '' for none), whether
its cookies fit (``cookies_fit``, which logs when they do not)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import mmh3

from archiver.logs import event
from archiver.queues.models import COOKIES_LIMIT, LinkedSite, SiteRow
from archiver.queues.revisits import ChangeHistory

log = logging.getLogger("archiver.queues.sites")


def linked_site(site: tuple[Any, ...]) -> tuple[Any, ...]:
    """A LinkedSite's five fields from it or from its first fields."""
    return site if len(site) == 5 else LinkedSite(*site)


# The columns of a SiteRow, in its order, as both site queues select them (``site_row``).
SITE_COLUMNS = ("origin, state, due, inlinks, attempts, added, visits, note, restart, next_visit,"
                " compared, changed, compared_seconds, hops, priority, gatekeepers")


def site_row(row: tuple[Any, ...]) -> SiteRow:
    """A SiteRow from the values of SITE_COLUMNS."""
    return SiteRow._make((*row[:8], bool(row[8]), row[9], ChangeHistory(*row[10:13]), row[13],
                          row[14], gatekeeper_counts(row[15])))


def gatekeeper_counts(text: str) -> tuple[tuple[str, int], ...]:
    """The (kind, count) pairs of a gatekeepers column, by kind."""
    return tuple(sorted(json.loads(text).items())) if text else ()


def gatekeepers_added(text: str, counts: Mapping[str, int]) -> str:
    """A gatekeepers column's ``text`` with ``counts`` added (kinds counted 0 or less left out)."""
    total = dict(gatekeeper_counts(text))
    for kind, count in counts.items():
        if count > 0:
            total[kind] = total.get(kind, 0) + count
    return gatekeepers_text(total)


def gatekeepers_text(counts: Mapping[str, int]) -> str:
    """The gatekeepers column's text of ``counts``."""
    return json.dumps(dict(counts), sort_keys=True) if counts else ""


def cookies_fit(origin: str, text: str) -> bool:
    """Whether ``text``, a site's cookie jar, is within COOKIES_LIMIT bytes; if not, says so
    (event ``cookies-not-kept``)."""
    size = len(text.encode())
    if size <= COOKIES_LIMIT:
        return True
    event(log, logging.WARNING, "cookies-not-kept", site=origin, bytes=size, limit=COOKIES_LIMIT,
          note="the site's cookie jar is larger than a site may keep; the cookies kept before stay")
    return False


def ready_states(include_deferred: bool, include_revisits: bool) -> tuple[str, ...]:
    """The states a slot may take a site from: deferred sites and revisits only in a daemon."""
    return (("waiting", "retry") + (("deferred",) if include_deferred else ())
            + (("revisit",) if include_revisits else ()))


def process_for(origin: str, processes: int) -> int:
    """The crawler process that owns ``origin``: a stable hash of the site key over ``processes``."""
    return owner_hash(origin) % processes


def owner_hash(origin: str) -> int:
    """The hash of ``origin`` that ``process_for`` takes over the process count (what a store of
    many sites may keep, to find each one's owner without Python)."""
    return mmh3.hash(origin, 0, signed=False)


def backoff(attempts: int, *, delay: float, max_attempts: int, defer_delay: float, now: float
            ) -> tuple[str, float, int]:
    """(state, due, attempts) after one more failed visit of a site that failed ``attempts``
    times: "retry" after ``delay`` doubled per attempt, or "deferred" for ``defer_delay`` once
    ``max_attempts`` is reached (its count starts again)."""
    attempts += 1
    if attempts >= max_attempts:
        return "deferred", now + defer_delay, 0
    return "retry", now + delay * 2 ** (attempts - 1), attempts
