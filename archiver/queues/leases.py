"""The site leases one crawler process holds in the shared site queue, and until when each is safe.

A lease is granted by a claim and renewed by the crawler at a steady pace; each grant has an
epoch, which every later write of the visit names (a holder that comes back after its lease was
given to another finds its epoch superseded and its writes refused). The database decides when a
lease expires (its ``lease_until``); the holder keeps its own, earlier deadline: the moment it
*sent* the claim or renewal that succeeded, plus the TTL less a margin for clock-rate differences.
Past that deadline it fetches nothing more for the site, whether or not the database has given the
site to another yet: a process paused (SIGSTOP, a long GC, a frozen VM) past its TTL resumes
without starting a late fetch. (A pause between the check and the request going out lets that one
request out late; a web server takes no fencing token, so nothing can rule that out.)

A lease lost is reported once (event ``lease-lost``, with its cause), through ``report``: the
crawler's ``Stats.fault``, which counts it; the queues report their refused writes
(``fenced-write``) the same way.

Pure bookkeeping: the clock is passed in (``time.monotonic`` values), and the events go out
through ``report``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archiver.logs import event

log = logging.getLogger("archiver.queues.leases")


# How a fault is logged (and counted): (logger, level, event name, **fields), as
# ``archiver.logs.event`` and ``Stats.fault`` take them.
Report = Callable[..., None]


def lost_to(site: tuple[Any, ...] | None) -> str:
    """Why a lease is lost, from the site's row now: (state, holder, epoch), or None."""
    if site is None:
        return "the site is no longer in the queue"
    state, holder, epoch = site
    if state == "active":
        return f"process {holder} holds it now (epoch {epoch})"
    return f"the site is {state} now (epoch {epoch})"


def safety_margin(ttl: float) -> float:
    """How much earlier than the database the holder gives up: a tenth of the TTL, at least 1 s
    (and at most half of it, for the short TTLs of tests)."""
    return min(max(ttl / 10, 1.0), ttl / 2)


@dataclass
class Lease:
    epoch: int
    deadline: float  # monotonic time after which the holder must not fetch for the site


class Leases:
    """The leases of one process: granted at claims, extended at renewals, dropped at the end of
    a visit, lost when a renewal or a fenced write finds another epoch."""

    def __init__(self, ttl: float, report: Report = event) -> None:
        self.ttl = ttl
        self.report = report  # the crawler's Stats.fault: logged and counted
        self._held: dict[str, Lease] = {}
        self.lost: set[str] = set()  # origins whose lease went to another while their visit ran

    def granted(self, origin: str, epoch: int, sent_at: float) -> None:
        self.lost.discard(origin)
        self._held[origin] = Lease(epoch, self._deadline(sent_at))

    def renewed(self, origins: set[str], sent_at: float) -> None:
        """A renewal sent at ``sent_at`` succeeded for ``origins`` (a snapshot of ``held``)."""
        deadline = self._deadline(sent_at)
        for origin in origins:
            lease = self._held.get(origin)
            if lease is not None:
                lease.deadline = max(lease.deadline, deadline)

    def lose(self, origin: str, **cause: Any) -> None:
        """Another holder has the site now: its visit must stop, and write nothing more. Reported
        (event ``lease-lost`` with ``cause``) when the lease was still held."""
        lease = self._held.pop(origin, None)
        if lease is not None:
            self.lost.add(origin)
            self.report(log, logging.WARNING, "lease-lost", site=origin, epoch=lease.epoch, **cause)

    def drop(self, origin: str) -> None:
        """The visit ended (the site was released, finished or put back for a retry)."""
        self._held.pop(origin, None)
        self.lost.discard(origin)

    def epoch(self, origin: str) -> int | None:
        lease = self._held.get(origin)
        return None if lease is None else lease.epoch

    def held(self) -> dict[str, int]:
        """Every lease held now: origin -> epoch."""
        return {origin: lease.epoch for origin, lease in self._held.items()}

    def holds(self, origin: str, now: float) -> bool:
        """True if the process may still fetch for ``origin`` at monotonic time ``now``."""
        lease = self._held.get(origin)
        return lease is not None and now < lease.deadline

    def _deadline(self, sent_at: float) -> float:
        return sent_at + self.ttl - safety_margin(self.ttl)
