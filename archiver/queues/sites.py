"""What both site queues share, pure: a site's row from its columns, the states a slot may claim
from, a failed visit's back-off, which crawler process owns a site, what the links batch sends."""

from __future__ import annotations

from typing import Any

import mmh3

from archiver.queues.models import LinkedSite, SiteRow
from archiver.queues.revisits import ChangeHistory


def linked_site(site: tuple[Any, ...]) -> tuple[Any, ...]:
    """A LinkedSite's five fields from it or from its first fields."""
    return site if len(site) == 5 else LinkedSite(*site)


# The columns of a SiteRow, in its order, as both site queues select them (``site_row``).
SITE_COLUMNS = ("origin, state, due, inlinks, attempts, added, visits, note, restart, next_visit,"
                " compared, changed, compared_seconds, hops, priority")


def site_row(row: tuple[Any, ...]) -> SiteRow:
    """A SiteRow from the values of SITE_COLUMNS."""
    return SiteRow._make((*row[:8], bool(row[8]), row[9], ChangeHistory(*row[10:13]), row[13],
                          row[14]))


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
