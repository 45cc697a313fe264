"""When a finished site is visited again: its change history and its revisit schedule (pure logic).

A revisit walks the site again and compares each page it fetches with the page's last capture:
the page changed or it did not (``PageChanges``, counted during one visit). A site's
``ChangeHistory`` pools those comparisons over its visits, the older ones weighing less by
``DECAY`` per visit, so a site that starts or stops changing is followed.

The change rate is Cho and Garcia-Molina's estimator ("Estimating frequency of change", ACM TOIT
3(3), 2003): for ``n`` accesses ``I`` seconds apart, of which ``X`` saw a change,

    rate = -ln((n - X + 0.5) / (n + 0.5)) / I        (changes per second)

Unlike the naive ``X / (n I)`` it counts the changes that happen twice between two accesses, and
its 0.5s keep it finite when every access saw one. Here the ``n`` accesses are the site's pages
compared (its pages are taken to change at one rate), and ``I`` is their mean time since their
last capture.

The next visit comes ``1 / rate`` after a visit ends (the mean time for a page to change), held
between ``crawl.revisit_min`` and ``crawl.revisit_max``: a site where nothing changed waits the
maximum. A site with nothing compared yet (after its first visit) waits ``crawl.revisit_interval``;
an interval of 0 turns revisits off.

A URL that is gone (404 or 410 at its last captures) stays known and is asked less and less often
(``ask_again``): once the time since its last capture is twice the time it has been gone. So a
weekly revisit asks it at the next visit, then two weeks later, then six, eighteen..., never
giving up on a page that may come back.

A revisit reads a URL's captures latest first and keeps only what these rules need
(``look_back``): back to the capture before its run of gone answers, at most ``LOOK_BACK`` of
them (a longer run counts from the first capture looked at); the response its last capture's
payload stands for is then found by one query (``CatalogStore.payload_holder``) if it is not among
them. So the cost of a fetch does not grow with the visits a URL has had.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from archiver.store.models import Capture

# How much a visit's comparisons weigh at the next one: a change of habit shows within a few.
DECAY = 0.8
GONE = frozenset({404, 410})
# The captures of a URL a revisit looks back through for a run of gone answers, at most.
LOOK_BACK = 100


@dataclass
class PageChanges:
    """One visit's comparisons with the last captures: pages compared, pages changed, and the
    seconds between each compared page's last capture and its fetch, summed."""

    compared: int = 0
    changed: int = 0
    seconds: float = 0.0

    def page(self, *, changed: bool, since: float) -> None:
        """One page compared, fetched ``since`` seconds after its last capture."""
        self.compared += 1
        self.changed += changed
        self.seconds += max(since, 0.0)


@dataclass(frozen=True)
class ChangeHistory:
    """A site's comparisons over its visits, decayed (what the site queue keeps per site)."""

    compared: float = 0.0
    changed: float = 0.0
    seconds: float = 0.0

    def observe(self, visit: PageChanges) -> ChangeHistory:
        """The history after one more visit's comparisons."""
        if not visit.compared:
            return self
        return ChangeHistory(self.compared * DECAY + visit.compared,
                             self.changed * DECAY + visit.changed,
                             self.seconds * DECAY + visit.seconds)

    def rate(self) -> float | None:
        """Changes per second of a page of the site, or None before anything was compared."""
        n, changed = self.compared, min(self.changed, self.compared)
        if n <= 0 or self.seconds <= 0:
            return None
        return -math.log((n - changed + 0.5) / (n + 0.5)) / (self.seconds / n)


@dataclass(frozen=True)
class RevisitSchedule:
    """``crawl.revisit_interval``, ``revisit_min`` and ``revisit_max``, in seconds."""

    interval: float
    shortest: float
    longest: float

    @property
    def on(self) -> bool:
        return self.interval > 0

    def delay(self, history: ChangeHistory) -> float | None:
        """Seconds from the end of a visit to the next one; None when revisits are off."""
        if not self.on:
            return None
        rate = history.rate()
        if rate is None:
            return self.interval
        if rate <= 0:
            return self.longest
        return min(max(1 / rate, self.shortest), self.longest)


def visit_ended(history: ChangeHistory, scheduled: float, changes: PageChanges | None,
                schedule: RevisitSchedule | None, now: float) -> tuple[ChangeHistory, float]:
    """A site's change history and next visit (0: none) once a visit ends ``now`` with
    ``changes``, from its history and the next visit ``scheduled`` before (both site queues)."""
    if changes is not None:
        history = history.observe(changes)
    return history, revisit_at(scheduled, history, schedule, now)


def revisit_at(scheduled: float, history: ChangeHistory, schedule: RevisitSchedule | None,
               now: float) -> float:
    """When a site that ends a visit ``now`` is visited next (0: never): the time ``scheduled``
    already (a visit woken by new links keeps it), else one the history gives."""
    if schedule is None or not schedule.on:
        return 0.0
    if scheduled:
        return scheduled
    delay = schedule.delay(history)
    return 0.0 if delay is None else now + delay


def ask_again(captures: Sequence[tuple[float, int | None]], now: float) -> bool:
    """Whether a revisit at ``now`` asks for a URL with these captures ((time, status), oldest
    first): always, unless it is gone at its last ones; then once the time since the last is at
    least twice the time it has been gone (from the first capture of that run to the last)."""
    if not captures or captures[-1][1] not in GONE:
        return True
    first = len(captures) - 1
    while first > 0 and captures[first - 1][1] in GONE:
        first -= 1
    last = captures[-1][0]
    return now - last >= 2 * (last - captures[first][0])


def look_back(latest_first: Iterable[Capture]) -> list[Capture]:
    """The captures of a URL that ``ask_again`` needs, oldest first, taken from its captures
    latest first: back to the capture before its run of gone answers, at most LOOK_BACK."""
    kept: list[Capture] = []
    for capture in islice(latest_first, LOOK_BACK):
        kept.append(capture)
        if capture.status not in GONE:
            break
    kept.reverse()
    return kept
