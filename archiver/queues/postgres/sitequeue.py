"""The shared site queue in PostgreSQL (table ``sites``, see ``store.postgres.schema``): every crawler
process of every machine takes its sites from it, under a lease.

A claim picks, in one statement, a site whose lease expired (its holder died or stalled) or else
the ready one of highest priority, then most linked-to (the embedded queue's order), skipping rows
other claims have locked (``FOR UPDATE SKIP LOCKED``), and marks it ``active`` for this process:
``holder``, a new ``epoch``, ``lease_until`` a TTL from the database's clock. The crawler renews
its leases at a steady pace (``renew``); a holder that stops renewing loses the site when its lease
expires. Every write a visit makes names the epoch of its claim (``WHERE epoch = ...``), so a
holder that comes back late changes nothing: it learns that it lost the lease (``Leases.lose``,
event ``lease-lost``; each write refused, event ``fenced-write``) and stops. A visit that ends
while URLs wait in its site's inbox (queued since it last looked: a lost bundle's refetches)
leaves the site waiting, due at once, instead of finished. States and due times are those of the
embedded queue (``queues.embedded.sitequeue``), ``paused`` included (a pause ends the lease);
times are seconds since the epoch, like there.

A PgSiteQueue is used from one thread at a time (the crawler's ``OffLoop``). A call is run again
on a new connection if the server went away (``store.postgres.connection``); the writes whose answer may
be lost are settled by reading what they did (``claim``: a claim of ours not in our leases is the
one whose answer was lost; ``_held_write``: the row still names our epoch, and is no longer
active once the write committed); the others may run twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from archiver.logs import event
from archiver.queues.leases import Leases, lost_to
from archiver.queues.models import STATES, SiteRow
from archiver.queues.revisits import ChangeHistory, PageChanges, RevisitSchedule, visit_ended
from archiver.queues.sites import (
    SITE_COLUMNS,
    backoff,
    cookies_fit,
    gatekeepers_added,
    linked_site,
    ready_states,
    site_row,
)
from archiver.store.postgres.connection import NOT_DONE, NotDone, PgConnection, StoreWatch, retried

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("archiver.queues.postgres.sitequeue")

_LEASE = "now() + make_interval(secs => %(ttl)s)"
# A site whose lease expired: its holder is gone or stalled past its TTL.
_TAKE_EXPIRED = f"""
UPDATE sites SET state = 'active', visits = visits + 1, holder = %(process)s, epoch = epoch + 1,
    lease_until = {_LEASE}
FROM (SELECT origin, holder AS was FROM sites WHERE state = 'active' AND lease_until < now()
      ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED) AS pick
WHERE sites.origin = pick.origin
RETURNING sites.origin, sites.epoch, pick.was
"""
# The ready site of highest priority, then most linked-to (a revisit takes its schedule and starts
# its crawl queue over).
_TAKE_READY = f"""
UPDATE sites SET state = 'active', visits = visits + 1, holder = %(process)s, epoch = epoch + 1,
    lease_until = {_LEASE}, restart = restart OR sites.state = 'revisit',
    next_visit = CASE WHEN sites.state = 'revisit' THEN 0 ELSE next_visit END
FROM (SELECT origin FROM sites WHERE state = ANY(%(states)s) AND due <= %(now)s
      ORDER BY priority DESC, inlinks DESC, due LIMIT 1 FOR UPDATE SKIP LOCKED) AS pick
WHERE sites.origin = pick.origin
RETURNING sites.origin, sites.epoch
"""
_RENEW = f"""
UPDATE sites AS s SET lease_until = {_LEASE}
FROM unnest(%(origins)s::text[], %(epochs)s::bigint[]) AS h(origin, epoch)
WHERE s.origin = h.origin AND s.epoch = h.epoch AND s.state = 'active'
RETURNING s.origin
"""
_HELD = "origin = %(origin)s AND epoch = %(epoch)s AND state = 'active'"


def stage_linked_sites(cur: psycopg.Cursor[Any]) -> None:
    """Make this session's staging table ``linked_sites`` (a ``LinkedSite`` per row, emptied at
    each commit) if it has none yet."""
    cur.execute("CREATE TEMPORARY TABLE IF NOT EXISTS linked_sites (origin text COLLATE \"C\","
                " inlinks bigint, woken boolean, hops integer, priority float8) ON COMMIT DELETE ROWS")


def merge_staged_links(cur: psycopg.Cursor[Any], now: float) -> int:
    """Merge the staged sites into ``sites`` as ``merge_links`` does (in the caller's
    transaction): new sites are added with their counts, in origin order (two batches adding
    overlapping sites lock rows in the same order); a known site's row is rewritten only if its
    count, hops or priority changed; a finished one with new URLs waits again. Returns the sites
    added."""
    added = cur.execute(
        "INSERT INTO sites (origin, added, inlinks, hops, priority)"
        " SELECT origin, %s, inlinks, hops, priority FROM linked_sites ORDER BY origin"
        " ON CONFLICT DO NOTHING", (now,)).rowcount
    cur.execute(
        "UPDATE sites SET inlinks = c.inlinks, hops = least(sites.hops, c.hops),"
        " priority = greatest(sites.priority, c.priority) FROM linked_sites c"
        " WHERE sites.origin = c.origin AND (sites.inlinks != c.inlinks"
        " OR sites.hops > c.hops OR sites.priority < c.priority)")
    cur.execute(
        "UPDATE sites SET state = 'waiting', due = %s FROM linked_sites c"
        " WHERE sites.origin = c.origin AND c.woken AND sites.state IN ('done', 'revisit')", (now,))
    return added


class PgSiteQueue:
    """The shared site queue; ``process`` names the claims of this crawler process (None: a
    process that only adds or reads sites, the CLI or the links batch)."""

    def __init__(self, url: str, *, process: int | None = None, leases: Leases | None = None,
                 watch: StoreWatch | None = None) -> None:
        self._db = PgConnection(url, watch=watch)
        self.process = process
        self.leases = leases if leases is not None else Leases(300.0)

    def close(self) -> None:
        self._db.close()

    def _one(self, sql: str, params: dict[str, Any] | tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The first row of a read."""
        rows = self._db.read(sql, params)
        return rows[0] if rows else None

    # -- adding and reading sites (no lease needed)

    @retried  # an insert that skips a known site, and an absolute update
    def add(self, origin: str, *, inlinks: int = 0, hops: int = 0, now: float | None = None
            ) -> bool:
        with self._db.transaction():
            cur = self._db.execute(
                "INSERT INTO sites (origin, added, inlinks, hops) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING", (origin, time.time() if now is None else now, inlinks, hops))
            if cur.rowcount == 1:
                return True
            self._db.execute("UPDATE sites SET hops = %s WHERE origin = %s AND hops > %s",
                             (hops, origin, hops))
        return False

    def merge_links(self, sites: Iterable[tuple[Any, ...]], *, now: float | None = None) -> int:
        """From the external-link batch, as ``SiteQueue.merge_links``; one transaction. The sites
        are copied into the staging table (COPY: a fifth of the time of array parameters, which
        psycopg quotes element by element), then merged (``merge_staged_links``)."""
        staged = [linked_site(site) for site in sites]
        now = time.time() if now is None else now

        def merge() -> int:  # twice is harmless: the counts are set, not added
            with self._db.transaction(), self._db.cursor() as cur:
                stage_linked_sites(cur)
                with cur.copy("COPY linked_sites FROM STDIN") as copy:
                    for site in staged:
                        copy.write_row(site)
                return merge_staged_links(cur, now)

        return self._db.run(merge)

    @retried  # from done or revisit to waiting: a second time finds none
    def recrawl(self, origin: str | None = None, *, now: float | None = None) -> int:
        sql = ("UPDATE sites SET state = 'waiting', due = %s, attempts = 0, note = '', restart = true,"
               " next_visit = 0 WHERE state IN ('done', 'revisit')")
        params: tuple[Any, ...] = (time.time() if now is None else now,)
        if origin is not None:
            sql, params = sql + " AND origin = %s", (*params, origin)
        return self._db.execute(sql, params).rowcount

    def resume(self, origin: str, *, now: float | None = None) -> bool:
        """As ``SiteQueue.resume``: a paused site waits again, due ``now``, its note cleared."""
        due = time.time() if now is None else now

        def resumed() -> bool | NotDone:  # after a lost answer: our due time tells our write
            row = self._db.execute("SELECT state, due, note FROM sites WHERE origin = %s",
                                   (origin,)).fetchone()
            if row is not None and row[0] == "paused":
                return NOT_DONE
            return row is not None and (row[0], row[1], row[2]) == ("waiting", due, "")

        return self._db.run(lambda: self._db.execute(
            "UPDATE sites SET state = 'waiting', due = %s, note = '' WHERE origin = %s"
            " AND state = 'paused'", (due, origin)).rowcount == 1, resolve=resumed)

    def cookies(self, origin: str) -> str:
        row = self._one("SELECT cookies FROM sites WHERE origin = %s", (origin,))
        return row[0] if row else ""

    @retried  # an absolute update
    def keep_cookies(self, origin: str, text: str) -> bool:
        """As ``SiteQueue.keep_cookies``."""
        if not cookies_fit(origin, text):
            return False
        return self._db.execute("UPDATE sites SET cookies = %s WHERE origin = %s",
                                (text, origin)).rowcount == 1

    def count_gatekeepers(self, origin: str, counts: Mapping[str, int]) -> None:
        """As ``SiteQueue.count_gatekeepers`` (counts whose answer was lost with the connection
        may be added twice: a figure for the operator, nothing decides on it)."""
        def add() -> None:
            with self._db.transaction():
                row = self._one("SELECT gatekeepers FROM sites WHERE origin = %s FOR UPDATE",
                                (origin,))
                if row is not None:
                    self._db.execute("UPDATE sites SET gatekeepers = %s WHERE origin = %s",
                                     (gatekeepers_added(row[0], counts), origin))

        self._db.run(add)

    def visits(self, origin: str) -> int:
        row = self._one("SELECT visits FROM sites WHERE origin = %s", (origin,))
        return row[0] if row else 0

    def restart_pending(self, origin: str) -> bool:
        row = self._one("SELECT restart FROM sites WHERE origin = %s", (origin,))
        return bool(row and row[0])

    def next_due(self, *, include_deferred: bool, include_revisits: bool = False) -> float | None:
        """When a slot should look again: the next ready site's due time, or the earliest lease
        to expire (a site another process holds may end or come free); None if neither exists."""
        row = self._one(
            "SELECT least((SELECT min(due) FROM sites WHERE state = ANY(%s)),"
            " (SELECT extract(epoch FROM min(lease_until))::float8 FROM sites WHERE state = 'active'))",
            (list(ready_states(include_deferred, include_revisits)),))
        return None if row is None or row[0] is None else float(row[0])

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        out.update(self._db.read("SELECT state, count(*) FROM sites GROUP BY state"))
        return out

    def origins(self, states: tuple[str, ...] = ("waiting", "active", "retry", "deferred")
                ) -> list[str]:
        return [row[0] for row in self._db.read(
            "SELECT origin FROM sites WHERE state = ANY(%s)", (list(states),))]

    def revisits_due(self, by: float) -> list[str]:
        return [row[0] for row in self._db.read(
            "SELECT origin FROM sites WHERE state = 'revisit' AND due <= %s", (by,))]

    def state(self, origin: str) -> str | None:
        row = self._one("SELECT state FROM sites WHERE origin = %s", (origin,))
        return row[0] if row else None

    def site(self, origin: str) -> SiteRow | None:
        row = self._one(f"SELECT {SITE_COLUMNS} FROM sites WHERE origin = %s", (origin,))
        return site_row(row) if row else None

    def rows(self) -> Iterator[SiteRow]:
        """Every site with all it records, by origin, as ``SiteQueue.rows``."""
        for row in self._db.read(f"SELECT {SITE_COLUMNS} FROM sites ORDER BY origin"):
            yield site_row(row)

    # -- claims and leases (a crawler process)

    def claim(self, *, include_deferred: bool, include_revisits: bool = False,
              now: float | None = None) -> str | None:
        """Lease a site whose lease expired, else the most linked-to ready one; its origin."""
        if self.process is None:
            raise RuntimeError("a site queue opened without a process number cannot claim sites")
        params = {"process": self.process, "ttl": self.leases.ttl,
                  "states": list(ready_states(include_deferred, include_revisits)),
                  "now": time.time() if now is None else now}
        sent = time.monotonic()

        def take() -> tuple[Any, ...] | None:
            nonlocal sent
            sent = time.monotonic()
            row = self._db.execute(_TAKE_EXPIRED, params).fetchone()
            if row is not None:
                event(log, logging.WARNING, "lease-expired", site=row[0], holder=row[2],
                      taken_by=self.process)
                return row
            return self._db.execute(_TAKE_READY, params).fetchone()

        row = self._db.run(take, resolve=self._claimed)
        if row is None:
            return None
        self.leases.granted(row[0], row[1], sent)
        return str(row[0])

    def _claimed(self) -> tuple[Any, ...] | NotDone:
        """After a claim whose answer was lost: the site it took, if it committed (a site leased
        to this process, unexpired, that is not among its leases), else NOT_DONE."""
        row = self._db.execute(
            "SELECT origin, epoch FROM sites WHERE state = 'active' AND holder = %s"
            " AND lease_until > now() AND NOT (origin = ANY(%s)) ORDER BY lease_until DESC LIMIT 1",
            (self.process, list(self.leases.held()))).fetchone()
        if row is None:
            return NOT_DONE
        event(log, logging.INFO, "claim-resolved", site=row[0], epoch=row[1],
              note="the claim's answer was lost with the connection; it had committed")
        return row

    def claim_or_due(self, *, include_deferred: bool, include_revisits: bool = False,
                     now: float | None = None) -> tuple[str | None, float | None]:
        origin = self.claim(include_deferred=include_deferred, include_revisits=include_revisits,
                            now=now)
        if origin is not None:
            return origin, None
        return None, self.next_due(include_deferred=include_deferred,
                                   include_revisits=include_revisits)

    def renew(self) -> set[str]:
        """Extend every lease held; the origins whose lease another process has now (lost)."""
        held = self.leases.held()
        if not held:
            return set()
        sent = time.monotonic()

        def extend() -> set[str]:  # twice is harmless: the lease is set from the database's clock
            nonlocal sent
            sent = time.monotonic()
            return {row[0] for row in self._db.execute(_RENEW, {
                "ttl": self.leases.ttl, "origins": list(held), "epochs": list(held.values())})}

        kept = self._db.run(extend)
        self.leases.renewed(kept, sent)
        lost = set(held) - kept
        for origin in lost:
            self._lost(origin, "renew")
        return lost

    def _now(self, origin: str) -> str:
        """Who has ``origin`` now, for a lost lease's cause."""
        return lost_to(self._one("SELECT state, holder, epoch FROM sites WHERE origin = %s", (origin,)))

    def _lost(self, origin: str, during: str) -> None:
        if self.leases.epoch(origin) is not None:
            self.leases.lose(origin, during=during, cause=self._now(origin))

    def _held_write(self, origin: str, during: str, sql: str, params: dict[str, Any]) -> bool:
        """Run an UPDATE of ``origin`` fenced by our lease's epoch; False (event ``fenced-write``,
        and the lease lost) if another process holds it now."""
        epoch = self.leases.epoch(origin)
        if epoch is None:  # lost before: reported then
            return False
        if self._db.run(lambda: self._db.execute(sql + " WHERE " + _HELD,
                                                 {**params, "origin": origin, "epoch": epoch}).rowcount == 1,
                        resolve=lambda: self._ended(origin, epoch)):
            return True
        cause = self._now(origin)
        self.leases.report(log, logging.WARNING, "fenced-write", site=origin, write=during,
                           epoch=epoch, cause=cause)
        self.leases.lose(origin, during=during, cause=cause)
        return False

    def _ended(self, origin: str, epoch: int | None) -> bool | NotDone:
        """After a held write whose answer was lost: True if it committed (the row still names our
        epoch and is no longer active: every held write but ``restarted``'s ends the lease), False
        if another process took the site since, NOT_DONE if the write is to be made (again: the
        restart flag's, which leaves the row active, is set, not toggled)."""
        row = self._db.execute("SELECT epoch, state FROM sites WHERE origin = %s", (origin,)).fetchone()
        if row is None or row[0] != epoch:
            return False
        return NOT_DONE if row[1] == "active" else True

    def finish(self, origin: str, note: str = "", *, changes: PageChanges | None = None,
               schedule: RevisitSchedule | None = None, now: float | None = None) -> None:
        """As ``SiteQueue.finish`` (nothing written if another process holds the site now)."""
        now = time.time() if now is None else now
        with self._db.transaction():
            # The row locked first, so URLs queued in its inbox meanwhile are seen (a lost
            # bundle's refetches: BundleLedger.lose locks the row too): the site waits again.
            row = self._one("SELECT compared, changed, compared_seconds, next_visit FROM sites"
                            " WHERE origin = %s FOR UPDATE", (origin,))
            history, next_visit = visit_ended(ChangeHistory(*row[:3]) if row else ChangeHistory(),
                                              row[3] if row else 0.0, changes, schedule, now)
            self._held_write(
                origin, "finish", "UPDATE sites SET"
                " state = CASE WHEN inbox.queued THEN 'waiting' ELSE %(state)s END,"
                " due = CASE WHEN inbox.queued THEN 0 ELSE %(due)s END,"
                " next_visit = %(due)s, attempts = 0, note = %(note)s, compared = %(compared)s,"
                " changed = %(changed)s, compared_seconds = %(seconds)s, holder = NULL,"
                " lease_until = NULL FROM (SELECT EXISTS (SELECT 1 FROM crawl_inbox"
                " WHERE crawl_inbox.origin = %(origin)s) AS queued) AS inbox",
                {"state": "revisit" if next_visit else "done", "due": next_visit, "note": note,
                 "compared": history.compared, "changed": history.changed,
                 "seconds": history.seconds})
        self.leases.drop(origin)

    def release(self, origin: str) -> None:
        """The site waits again (a visit stopped, or one that found its lease's deadline past:
        given back if no other process took it meanwhile)."""
        lapsed = not self.leases.holds(origin, time.monotonic())
        if self._held_write(origin, "release", "UPDATE sites SET state = 'waiting', due = 0,"
                            " holder = NULL, lease_until = NULL", {}) and lapsed:
            self.leases.lose(origin, during="release", cause="its deadline passed before a renewal"
                             " (this process was paused, or its renewals late); given back")
        self.leases.drop(origin)

    def postpone(self, origin: str, due: float, note: str) -> None:
        """As ``SiteQueue.postpone``: the lease ends, the site waits until ``due``."""
        self._held_write(origin, "postpone", "UPDATE sites SET state = 'waiting', due = %(due)s,"
                         " note = %(note)s, holder = NULL, lease_until = NULL",
                         {"due": due, "note": note})
        self.leases.drop(origin)

    def pause(self, origin: str, note: str) -> None:
        """As ``SiteQueue.pause``: the lease ends, the site is paused with ``note``."""
        self._held_write(origin, "pause", "UPDATE sites SET state = 'paused', note = %(note)s,"
                         " holder = NULL, lease_until = NULL", {"note": note})
        self.leases.drop(origin)

    def restarted(self, origin: str) -> None:
        self._held_write(origin, "restart", "UPDATE sites SET restart = false", {})

    def retry(self, origin: str, *, delay: float, max_attempts: int, defer_delay: float,
              note: str, now: float | None = None) -> str:
        """As ``SiteQueue.retry``; "lost" if another process holds the site now."""
        now = time.time() if now is None else now
        row = self._one("SELECT attempts FROM sites WHERE origin = %s", (origin,))
        state, due, attempts = backoff(row[0] if row else 0, delay=delay,
                                       max_attempts=max_attempts, defer_delay=defer_delay, now=now)
        kept = self._held_write(
            origin, "retry", "UPDATE sites SET state = %(state)s, due = %(due)s, attempts = %(attempts)s,"
            " note = %(note)s, holder = NULL, lease_until = NULL",
            {"state": state, "due": due, "attempts": attempts, "note": note})
        self.leases.drop(origin)
        return state if kept else "lost"
