"""The decisions of one site visit, without I/O: what a response means for the rest of the visit.

The site visit (archiver.crawl.visit) is a trio shell that performs I/O: it resolves, fetches, writes WARC
records and crawl-queue lines, and rests. It asks the objects here what to do, and they answer from
what they were told, in the spirit of h11's sans-I/O design:

- ``VisitPolicy.after_fetch`` turns one fetch's outcome into a ``Verdict``: how long to rest, whether
  the URL is finished, fetched again later (429/503) or left for the next visit, whether its links
  are read, and whether the visit ends here;
- ``VisitPolicy.after_internal_error`` does the same for a URL whose handling raised;
- ``VisitPolicy.route`` says where a link found on the site goes: its crawl queue, the
  external-link spool, or nowhere (with the reason counted in ``skipped``: a guard, or
  ``scope`` for a link out of the config's scope, archiver.web.scope, on or off the site, or
  for any link to another site when this one is ``scope.max_hops`` from a seed site);
- ``RobotsFetch`` walks one origin's robots.txt through its redirects to rules, or to "unavailable".

**Sideways traps.** A calendar (``/cal/2026/11/`` links the previous and the next month) grows
without growing any path segment, so neither ``max_depth`` nor the repeated-segment guard stops it
soon. A URL's *shape* is its path and query with each run of digits read as ``#``
(``/cal/#/#/``). A fetched page is *self-similar* when the new URLs it added to the crawl queue
are all of its own shape: a month page leads only to more months. After ``max_per_shape``
self-similar pages of one shape, links of that shape found on pages of that same shape are
skipped (``skipped=shape``). What this leaves alone, by construction: a page that finds anything
new of another shape (pagination that keeps finding articles, whatever its own shape), leaves
that find nothing new (thousands of numbered articles or images), and links of the exhausted
shape found on pages of another shape (an index page still feeds in every article).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from archiver.config import CrawlConfig
from archiver.crawl.politeness import RATE_LIMITED, Rest, RestPolicy
from archiver.queues.bloom import GrowingBloom
from archiver.queues.revisits import PageChanges
from archiver.web import robots, urls
from archiver.web.http import decode_body
from archiver.web.scope import Scope

_DIGITS = re.compile(r"[0-9]+")
# Shapes counted per visit; past this many, those with a single barren page are forgotten
# (lossy counting: a trap's shape keeps growing and stays, one-off shapes go), so the table is
# bounded by a constant per active site, not by the site's URLs.
_MAX_SHAPES = 2048
# Truncations that mean the body did not arrive whole (not a size cap).
_CUT_SHORT = frozenset({"time", "disconnect", "unspecified"})


@dataclass(frozen=True)
class Outcome:
    """How a visit ended: ``done`` (finished or stopped by a site limit), ``retry`` (come back
    later), ``stopped`` (the process is draining or the disk is full: back to the queue),
    ``postponed`` (its sheet's window closed or its daily budget is spent: back to the queue, due
    at ``due``) or ``paused`` (its session was lost or its login failed: it waits for
    ``archiver site resume``); and the pages it compared with an earlier visit's captures, if
    any."""

    kind: str
    note: str = ""
    changes: PageChanges | None = None
    due: float = 0.0


@dataclass(frozen=True)
class Verdict:
    """What the visit does with a URL once it is fetched.

    ``entry``: "done" (finished, whatever the answer), "requeue" (fetch it again later: the site
    asked us to slow down) or "keep" (leave it in the crawl queue for the next visit). ``links``:
    read the response's links. ``end``: the visit ends here with this outcome.
    """

    entry: str
    links: bool
    end: Outcome | None = None


def url_shape(url: str) -> str:
    """Path and query of a normalised URL with every run of digits replaced by ``#``."""
    return _DIGITS.sub("#", url[url.find("/", 8) :])


def looks_like_trap(url: str, max_repeats: int) -> bool:
    """A path that repeats one segment more than ``max_repeats`` times (``/a/b/a/b/a/b/...``)."""
    query = url.find("?")
    if url.count("/", 0, query if query >= 0 else len(url)) - 2 <= max_repeats:
        return False  # too few segments to repeat one that often: most links, no decoding
    segments = [s for s in urls.path_segments(url) if s]
    if len(segments) <= max_repeats:
        return False
    return Counter(segments).most_common(1)[0][1] > max_repeats


def scheme_alias(origin: str, other: str) -> bool:
    """True if ``other`` is ``origin``'s scheme twin: the one redirect target that keeps a visit on
    its site. Another port of the same host is another site (it may be another service)."""
    return other == urls.scheme_twin(origin)


def rest_policy(c: CrawlConfig) -> RestPolicy:
    return RestPolicy(c.min_rest, c.max_rest, c.rest_factor, c.max_retry_after, c.backoff_start,
                      c.max_backoff, c.backoff_recovery_fetches)


class ShapeBudget:
    """Self-similar pages per URL shape in one visit (see the module docstring)."""

    def __init__(self) -> None:
        self._similar: dict[str, int] = {}

    def exhausted(self, shape: str, limit: int) -> bool:
        return self._similar.get(shape, 0) >= limit

    def count(self, shape: str) -> None:
        """Count a fetched page of ``shape`` whose new links were all of its own shape."""
        similar = self._similar
        similar[shape] = similar.get(shape, 0) + 1
        if len(similar) > _MAX_SHAPES:
            for key in [k for k, n in similar.items() if n <= 1]:
                del similar[key]


# The rule named for a link skipped because its site would be beyond scope.max_hops.
MAX_HOPS_RULE = "scope.max_hops"


class VisitPolicy:
    """Counters and decisions of one site visit (pure: the shell performs every action)."""

    def __init__(self, origin: str, config: CrawlConfig, *, scope: Scope | None = None,
                 pages: int = 0, bytes_: int = 0, hops: int = 0, max_hops: int = -1) -> None:
        """``hops``: how many site-to-site links the site is from a seed site; ``max_hops``:
        ``scope.max_hops`` (-1: unlimited)."""
        self.origin = origin
        self.hops, self.max_hops = hops, max_hops
        self.host = urls.origin_parts(origin)[1]
        self.config = config
        self.scope = scope or Scope()
        self.rest = Rest(rest_policy(config))
        self.local = {origin}  # the visit's origin and its aliases (http <-> https on the host)
        self.pages, self.bytes = pages, bytes_
        self.failures = 0  # no answer, or a server error other than 503, in a row
        self.rate_limited = 0  # 429 or 503 answers in a row
        self.internal_errors = 0  # URLs whose handling raised, in a row
        self.shapes = ShapeBudget()
        self.external = GrowingBloom(initial_bits=65_536, max_fp=1e-3)  # spooled this visit

    def reconfigure(self, config: CrawlConfig, scope: Scope | None = None, max_hops: int = -1
                    ) -> None:
        """A reloaded config (SIGHUP): new limits, rests and scope apply from now on."""
        self.config = config
        self.rest.policy = rest_policy(config)
        self.scope = scope or Scope()
        self.max_hops = max_hops

    def beyond_max_hops(self) -> bool:
        """The site itself is farther from the seed sites than ``max_hops`` (queued before the
        limit was lowered): the visit fetches nothing."""
        return 0 <= self.max_hops < self.hops

    def scope_rule(self, url: str) -> str | None:
        """The rule that put ``url`` (routed "scope") out of scope: a ``[scope]`` rule, None when
        no include rule matched, or ``scope.max_hops``."""
        decision = self.scope.decide(url)
        return MAX_HOPS_RULE if decision.in_scope else decision.rule

    def limit_reached(self) -> str | None:
        """The site limit that ends the visit before its next fetch, if any."""
        c = self.config
        if self.pages >= c.max_pages:
            return "max-pages"
        if self.bytes >= c.max_bytes:
            return "max-bytes"
        return None

    def fetched(self, status: int | None, elapsed: float, retry_after: float | None = None,
                size: int = 0) -> float:
        """Every fetch, robots.txt included: count it and return the rest before the next one."""
        if status is not None:
            self.pages += 1
            self.bytes += size
        return self.rest.after(status, elapsed, retry_after)

    def verdict(self, status: int | None, error: str | None = None, *,
                gatekeeper: str | None = None) -> Verdict:
        """What to do with a queued URL whose fetch answered ``status`` (None: no answer);
        ``gatekeeper``: the kind of gatekeeper whose answer it was (archiver.web.gatekeepers):
        not the URL's capture, so it is fetched again later, as after a 429."""
        c = self.config
        if status in RATE_LIMITED or gatekeeper is not None:
            self.failures = 0
            self.rate_limited += 1
            if self.rate_limited >= c.max_rate_limited:
                what = f"gatekeeper ({gatekeeper})" if gatekeeper else "429/503"
                return Verdict("requeue", False, Outcome(
                    "retry", f"{self.rate_limited} answers {what} in a row"))
            return Verdict("requeue", False)
        self.rate_limited = 0
        if status is None or status >= 500:
            self.failures += 1
            if self.failures >= c.max_failures:
                # The URL stays where it is: the next visit starts with it.
                return Verdict("keep", False, Outcome(
                    "retry", f"{self.failures} failures in a row ({error or status})"))
            return Verdict("done", status is not None)
        self.failures = 0
        return Verdict("done", True)

    def handled(self) -> None:
        """A URL was handled without an internal error."""
        self.internal_errors = 0

    def after_internal_error(self) -> Outcome | None:
        """A URL's handling raised: it is finished as failed; a run of them ends the visit."""
        self.internal_errors += 1
        if self.internal_errors >= self.config.max_internal_errors:
            return Outcome("retry", f"{self.internal_errors} internal errors in a row")
        return None

    def route(self, url: str, depth: int, *, source_shape: str = "",
              redirect: bool = False) -> str | None:
        """Where a normalised link found on a page of ``source_shape`` goes: None for this site's
        crawl queue, "external" for the spool (new this visit), "seen" for an external link
        already spooled, or the reason it is skipped ("url-too-long", "scope", "max-depth",
        "trap", "shape"; "scope" also for a link to another site from a site at ``max_hops``)."""
        c = self.config
        if len(url) > c.max_url_length:
            return "url-too-long"
        if not self.scope.allows(url):
            return "scope"
        origin = urls.origin(url)
        if origin not in self.local:
            if redirect and scheme_alias(self.origin, origin):
                self.local.add(origin)  # an alias origin: its robots.txt is fetched on first use
            elif 0 <= self.max_hops <= self.hops:
                return "scope"
            else:
                return "external" if self.external.add(url) else "seen"
        if depth > c.max_depth:
            return "max-depth"
        if looks_like_trap(url, c.max_repeated_segments):
            return "trap"
        if source_shape and self.shapes.exhausted(source_shape, c.max_per_shape) and (
                url_shape(url) == source_shape):
            return "shape"
        return None

    def page_read(self, shape: str, new_local: list[str]) -> None:
        """The links of a page of ``shape`` are routed; ``new_local``: the URLs it added to the
        crawl queue. A page that only added URLs of its own shape counts against its budget."""
        if new_local and all(url_shape(new) == shape for new in new_local):
            self.shapes.count(shape)


@dataclass(frozen=True)
class RobotsAnswer:
    """One step of fetching robots.txt: ``follow`` a redirect to ``url``, or the ``rules`` (None:
    robots.txt is unavailable and the site must wait, with ``reason``)."""

    follow: str | None = None
    rules: robots.RobotsRules | None = None
    reason: str = ""


class RobotsFetch:
    """Fetching one origin's robots.txt (RFC 9309 §2.3): redirects, status and completeness."""

    def __init__(self, origin: str, agent: str) -> None:
        self.origin = origin
        self.url = origin + "/robots.txt"
        self.agent = agent
        self.redirects = 0

    def _stays(self, origin: str) -> bool:
        """A robots.txt redirect is followed on its origin, or to the other scheme's default port."""
        return origin == self.origin or scheme_alias(self.origin, origin)

    def answer(self, status: int | None, *, location: str | None, content_encoding: str | None,
               body: bytes, truncated: str | None) -> RobotsAnswer:
        """What the response to ``self.url`` means; on ``follow``, ``self.url`` is the next URL."""
        if status is None:
            return RobotsAnswer(reason="unreachable")
        if 300 <= status < 400 and location:
            if self.redirects >= robots.MAX_ROBOTS_REDIRECTS:
                # RFC 9309 §2.3.1.2: past five redirects it may be taken as unavailable (allow all).
                return RobotsAnswer(rules=robots.RobotsRules.allow_all())
            target = urls.normalize(location, self.url)
            if target is None or not self._stays(urls.origin(target)):
                # Not followed off the site (another host or port may be another service, or
                # the crawler's own network): the file is unavailable, which RFC 9309 §2.3.1.3
                # reads as allow all, as for a redirect loop.
                return RobotsAnswer(rules=robots.RobotsRules.allow_all())
            self.redirects += 1
            self.url = target
            return RobotsAnswer(follow=target)
        if status >= 500 or status == 429:
            return RobotsAnswer(reason=f"status {status}")
        if truncated in _CUT_SHORT:
            # Later lines may be missing: unreachable, so complete disallow (RFC 9309 §2.3.1.4).
            return RobotsAnswer(reason=f"cut short ({truncated})")
        content = decode_body(body, content_encoding, robots.MAX_ROBOTS_BYTES)
        return RobotsAnswer(rules=robots.rules_for_status(status, content, self.agent))
