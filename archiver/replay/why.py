"""Why (not) captured? ``archiver why URL`` and replay's "not in the archive" page.

The answer comes from the archive's own records only: the catalog (was it captured, when, which
record), the crawl's decision log (archiver.queues.decisions: robots.txt exclusions, guards,
fetch errors), the robots.txt captures (which line of which robots.txt excluded it), the site queue
(the site deferred, failing or paused, with its note and when it is due) and the site's crawl queue (queued
and not reached yet). ``gather`` reads them (blocking I/O); ``explain`` is pure: the first reason
that holds, in this order:

1. ``captured``: a capture of the URL itself at or before the date asked (the latest such); a
   capture of another URL under the same catalog key (``http://h/events`` for ``http://h/events/``:
   SURT drops the trailing slash) is not one, and is named after the answer. A capture the
   crawler rendered in a browser says so and why (its ``rendered`` label: the fact ``rendered``).
   Only content counts (``Capture.is_content``): a URL captured only as a gatekeeper's answer,
   a login's exchange or after a session was lost is not captured, and the answer says so after
   its reason (the fact ``not_content``: the latest such capture by the date).
2. ``url-too-long``: longer than ``crawl.max_url_length``, so never queued.
3. The newest decision logged about it at or before the date: ``robots``, a guard (``max-depth``,
   ``trap``, ``shape``, ``url-too-long``: only for a URL no crawl queue holds, as a guard refuses
   one link, not the URL), ``scope`` (the rule that excluded it), ``plugin`` (a plugin's
   should_visit refused it), ``fetch-error``, ``error``, ``gone``.
   ``scope`` also when no decision was kept but the config's scope rules exclude it now (no
   crawl requests it: a link to another site out of scope is not logged by the linking site).
4. Queued and not reached: ``site-retry`` / ``site-deferred`` when its site is waiting out
   failures, ``site-paused`` when its site's session was lost (the reason; ``archiver site
   resume`` continues it), ``limit`` when the last visit ended at ``crawl.max_pages`` or
   ``max_bytes``, else ``queued``. A failing or paused site whose queue was never opened
   answers ``site-retry``, ``site-deferred`` or ``site-paused`` too.
5. ``robots`` when no decision was kept (the log is bounded, or the URL was never queued) but
   the robots.txt in force at the date excludes it; ``later`` when it was captured only after
   the date; ``handled`` when a visit passed it and left no trace.
6. ``never-linked``: no crawl queue holds it (its site may not even be known).

The site and crawl queue are read as they are now; the date bounds captures and decisions.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from archiver.config import Config
from archiver.queues.decisions import Decision
from archiver.queues.models import QueuePosition, SiteRow
from archiver.store import robotstxt
from archiver.store.catalogkeys import RENDERED
from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.models import NOT_CONTENT, Capture
from archiver.stores import Stores
from archiver.web import robots, urls
from archiver.web.scope import ScopeDecision
from archiver.web.timestamps import from_datetime

GUARDS = {"url-too-long": "crawl.max_url_length", "max-depth": "crawl.max_depth",
          "trap": "crawl.max_repeated_segments", "shape": "crawl.max_per_shape"}
LIMITS = {"max-pages": "crawl.max_pages", "max-bytes": "crawl.max_bytes"}


@dataclass(frozen=True)
class RobotsVerdict:
    """What the robots.txt in force at a time said of one URL."""

    capture: robotstxt.RobotsCapture
    allowed: bool
    rule: robots.RuleLine | None  # the deciding line, when one matched


@dataclass(frozen=True)
class Evidence:
    """Everything the archive records about one URL, as ``gather`` found it."""

    url: str
    origin: str
    at: str  # 14-digit timestamp: the date asked
    captures: list[Capture]  # of the URL, in time order
    decisions: list[Decision]  # about the URL, oldest first
    site: SiteRow | None
    position: QueuePosition | None
    robots: RobotsVerdict | None  # at the newest robots decision's time, else at ``at``
    max_url_length: int
    limits: dict[str, int] = field(default_factory=dict)  # config value of each guard and limit
    # The config's scope rules on the URL, now.
    scope: ScopeDecision = field(default_factory=lambda: ScopeDecision(True, None))
    # Captures of other URLs under the same catalog key (SURT drops a trailing slash, "www." and
    # the scheme): never an answer for this URL, but worth naming when it has none.
    twins: list[Capture] = field(default_factory=list)
    # Captures of the URL that are not content (docs/gatekeepers.md), in time order.
    not_content: list[Capture] = field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    """``kind`` (see the module docstring), one sentence saying it, and the facts behind it."""

    url: str
    at: str
    kind: str
    reason: str
    facts: dict[str, object]

    @property
    def captured(self) -> bool:
        return self.kind == "captured"

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "at": self.at, "captured": self.captured, "kind": self.kind,
                "reason": self.reason, **self.facts}


def stamp(seconds: float) -> str:
    """A 14-digit timestamp from seconds since the epoch."""
    return from_datetime(datetime.fromtimestamp(seconds, UTC))


def explain(e: Evidence) -> Answer:
    """The answer the evidence gives (pure)."""
    before = [c for c in e.captures if c.timestamp <= e.at]
    facts: dict[str, object] = {}
    if before:
        c = before[-1]
        facts["capture"] = c.to_json()
        facts["captures"] = len(before)
        what = "a revisit of an earlier payload" if c.rectype == "revisit" else "a response"
        rendered = ""
        if c.labels and (reason := c.label_map.get(RENDERED)):
            facts["rendered"] = reason
            rendered = f", rendered in a browser ({reason})"
        return Answer(e.url, e.at, "captured", f"Captured at {c.timestamp} (status {c.status}, "
                      f"{what}{rendered}), record {c.filename}:{c.offset}; "
                      f"{_count(len(before), 'capture')} by then.", facts)
    kind, reason = _not_captured(e, facts)
    if e.captures:
        facts["first_capture"] = e.captures[0].timestamp
        if kind != "later":
            reason += f" It was first captured later, at {e.captures[0].timestamp}."
    if withheld := [c for c in e.not_content if c.timestamp <= e.at]:
        last = withheld[-1]
        facts["not_content"] = last.to_json()
        name = next(n for n in NOT_CONTENT if n in last.label_map)
        reason += (f" At {last.timestamp} it was captured as {name}={last.label_map[name]} "
                   f"(status {last.status}), which is not the page: replay does not show it.")
    if twins := [c for c in e.twins if c.timestamp <= e.at]:
        twin = twins[-1]
        facts["key_twin"] = twin.to_json()
        reason += (f" Another URL under the same catalog key was captured: {twin.url} at "
                   f"{twin.timestamp} (status {twin.status}); replay serves it for this one.")
    return Answer(e.url, e.at, kind, reason, facts)


def _not_captured(e: Evidence, facts: dict[str, object]) -> tuple[str, str]:
    if len(e.url) > e.max_url_length:
        return "url-too-long", (f"Not captured: {len(e.url)} characters, longer than "
                                f"crawl.max_url_length ({e.max_url_length}), so never queued.")
    # A guard refuses a link, not a URL: once another link queued it, the queue speaks for it.
    decisions = [d for d in e.decisions if stamp(d.time) <= e.at
                 and (e.position is None or d.kind not in GUARDS)]
    if decisions:
        d = decisions[-1]
        facts["decision"] = {"time": stamp(d.time), "kind": d.kind, "detail": d.detail}
        return d.kind, _decided(e, d, facts)
    if not e.scope.in_scope:
        facts["scope_rule"] = e.scope.rule
        return "scope", ("Not captured: out of scope: the config's scope rules exclude it ("
                         + _scope_rule(e.scope.rule) + "), so no crawl requests it.")
    site = e.site
    if site is not None:
        facts["site"] = {"state": site.state, "note": site.note, "due": stamp(site.due)
                         if site.due and site.state != "paused" else None}
    if e.position is not None:
        facts["queue"] = e.position._asdict()
    if e.position is not None and not e.position.done:
        return _waiting(e, e.position)
    if site is not None and site.state in ("retry", "deferred", "paused"):
        return f"site-{site.state}", f"Not captured yet: {_failing(e.origin, site)}."
    if e.robots is not None and not e.robots.allowed:
        facts["robots"] = _robots_facts(e.robots)
        return "robots", "Not captured: " + _robots_reason(e.robots) + "."
    if e.captures:
        return "later", f"Not captured by {e.at}: first captured at {e.captures[0].timestamp}."
    if e.position is not None:
        return "handled", (f"Not captured: a visit of {e.origin} passed it (queued at depth "
                           f"{e.position.depth}) but left no capture and no decision; the decision "
                           "log keeps only the newest crawl.max_decisions.")
    if site is None:
        return "never-linked", (f"Not captured: never linked. No crawler has queued its site "
                                f"{e.origin}.")
    return "never-linked", (f"Not captured: never linked. No page of {e.origin} the crawl fetched "
                            "linked it, and no seed or links batch queued it.")


def _decided(e: Evidence, d: Decision, facts: dict[str, object]) -> str:
    when = stamp(d.time)
    if d.kind == "robots":
        if e.robots is None:
            return f"Not captured: excluded by robots.txt at {when} (its capture is not in the archive)."
        facts["robots"] = _robots_facts(e.robots)
        return f"Not captured: at {when}, " + _robots_reason(e.robots) + "."
    if d.kind in GUARDS:
        setting = GUARDS[d.kind]
        value = e.limits.get(setting)
        return (f"Not captured: skipped at {when} by the {d.kind} guard ({setting}"
                + (f" = {value}" if value is not None else "") + f"), linked from {d.detail}.")
    if d.kind == "scope":
        return f"Not captured: out of scope at {when} ({d.detail}); the crawl never requested it."
    if d.kind == "plugin":
        return f"Not captured: refused at {when} by plugin {d.detail}; the crawl never requested it."
    if d.kind == "fetch-error":
        return f"Not captured: the fetch failed at {when}: {d.detail}."
    if d.kind == "gone":
        return f"Not captured: not asked again at {when}, its last answer was {d.detail}."
    if d.kind == "login":
        return f"Not captured as a page at {when}: {d.detail}."
    return f"Not captured: handling it failed at {when}: {d.detail}."


def _scope_rule(rule: str | None) -> str:
    return f"rule {rule}" if rule is not None else "no scope.include rule matches it"


def _waiting(e: Evidence, p: QueuePosition) -> tuple[str, str]:
    """A URL queued and not reached: why the crawl has not got to it."""
    ahead = f"{_count(p.ahead, 'URL')} ahead of it of {p.pending} still queued"
    site = e.site
    if site is not None and site.state in ("retry", "deferred", "paused"):
        return f"site-{site.state}", f"Not captured yet: queued ({ahead}), but {_failing(e.origin, site)}."
    if site is not None and site.note in LIMITS and site.state in ("done", "revisit"):
        setting = LIMITS[site.note]
        return "limit", (f"Not captured: queued ({ahead}), but the last visit of {e.origin} ended "
                         f"at its {site.note} guard ({setting} = {e.limits.get(setting)}).")
    state = {"active": "being crawled now", "waiting": "waiting for a crawler",
             "revisit": f"next visited at {stamp(site.next_visit)}" if site else "",
             "done": "done"}.get(site.state if site else "", "not in any site queue")
    return "queued", f"Not captured yet: queued, {ahead}; its site {e.origin} is {state}."


def _failing(origin: str, site: SiteRow) -> str:
    """Why a site failing, deferred or paused stands still."""
    if site.state == "paused":
        return (f"its site {origin} is paused ({site.note or 'no note'}) until `archiver site "
                f"resume {origin}`")
    what = "deferred after repeated failures" if site.state == "deferred" else "failing"
    tries = f", {_count(site.attempts, 'attempt')}" if site.attempts else ""
    return (f"its site {origin} is {what} ({site.note or 'no note'}{tries}) and due again at "
            f"{stamp(site.due)}")


def _robots_reason(v: RobotsVerdict) -> str:
    c = v.capture.capture
    source = f"the robots.txt captured at {c.timestamp} ({c.filename}:{c.offset})"
    if v.rule is not None:
        return f'robots.txt excluded it: line {v.rule.number} "{v.rule.text.strip()}" of {source}'
    return f"robots.txt excluded it: {source} answered {v.capture.meaning()}"


def _robots_facts(v: RobotsVerdict) -> dict[str, object]:
    out = v.capture.to_json(text=False)
    out["allowed"] = v.allowed
    if v.rule is not None:
        out["line"] = v.rule.number
        out["rule"] = v.rule.text
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


# -- reading the records


def gather(stores: Stores, catalog: CatalogStore, warcs: WarcReader,
           config: Config, url: str, at: str) -> Evidence:
    """Read what the archive records about ``url`` (a normalised URL) up to ``at`` (blocking).

    A site crawls its scheme twin's URLs too (``http://h`` redirected to ``https://h``), so the
    queue and decisions of both origins are read, and the site is the one whose queue holds it."""
    origin = urls.origin(url)
    homes = [origin, twin] if (twin := urls.scheme_twin(origin)) else [origin]
    crawl_queues = stores.crawl_queues()
    try:
        decisions = sorted((d for home in homes for d in crawl_queues.decisions(home, url)),
                           key=lambda d: d.time)
        held = [(home, p) for home in homes if (p := crawl_queues.position(home, url)) is not None]
    finally:
        crawl_queues.close()
    sites = [(home, row) for home in ([held[0][0]] if held else homes)
             if (row := _site(stores, home)) is not None]
    origin, site = sites[0] if sites else (origin, None)
    position = held[0][1] if held else None
    c = config.crawl
    limits = {"crawl.max_url_length": c.max_url_length, "crawl.max_depth": c.max_depth,
              "crawl.max_repeated_segments": c.max_repeated_segments,
              "crawl.max_per_shape": c.max_per_shape, "crawl.max_pages": c.max_pages,
              "crawl.max_bytes": c.max_bytes}
    keyed = catalog.captures(url)
    own = [cap for cap in keyed if urls.normalize(cap.url) == url]
    captures = [cap for cap in own if cap.is_content]
    evidence = Evidence(url, origin, at, captures, decisions, site, position, None,
                        c.max_url_length, limits, config.scope.rules().decide(url),
                        [cap for cap in keyed if urls.normalize(cap.url) != url and cap.is_content],
                        [cap for cap in own if not cap.is_content])
    if any(cap.timestamp <= at for cap in captures):
        return evidence  # captured: robots.txt need not be read
    robots_at = max((stamp(d.time) for d in decisions if d.kind == "robots"
                     and stamp(d.time) <= at), default=at)
    return replace(evidence, robots=_robots_verdict(catalog, warcs, origin, url, robots_at,
                                                    c.agent))


def _robots_verdict(catalog: CatalogStore, warcs: WarcReader, origin: str, url: str, at: str,
                    agent: str) -> RobotsVerdict | None:
    """What the robots.txt in force at ``at`` said of ``url``; None with no capture of it."""
    current = robotstxt.in_force(catalog, warcs, origin, at)
    if current is None:
        return None
    path = urls.split_origin(url)[1]
    if current.status is None:
        return RobotsVerdict(current, False, None)
    rules = robots.rules_for_status(current.status, current.text, agent)
    ok = 200 <= current.status < 300
    rule = robots.deciding_rule(current.text, agent, path) if ok else None
    return RobotsVerdict(current, rules.allowed(path), rule)


def _site(stores: Stores, origin: str) -> SiteRow | None:
    """The site queue's record of ``origin`` (each crawler's queue, embedded), or None."""
    for _, queue in stores.site_queues():
        with contextlib.closing(queue):
            if (row := queue.site(origin)) is not None:
                return row
    return None
