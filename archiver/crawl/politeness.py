"""How long a site rests between fetches, and how it backs off when it asks us to slow down.

Pure logic: the site visit feeds in each response's status, elapsed time and Retry-After, and reads
back the rest before the next fetch.

The rule, for a site that answers 429 (Too Many Requests) or 503 (Service Unavailable):

- **With Retry-After**, the server says how long to wait: the next fetch waits exactly that long
  (capped at ``max_retry_after``), and nothing compounds on top of it. Honouring the server's own
  figure is what RFC 9110 §10.2.3 asks and converges at once to the pace the server allows.
- **Without it**, the fetch rate follows AIMD, as TCP congestion avoidance converges to what a
  link tolerates (RFC 5681, after Chiu and Jain, 1989): each such answer halves the rate
  (doubles the back-off, from ``backoff_start`` up to ``max_backoff``); each other answer adds
  back one 2k-th of the rate that was refused (k = ``backoff_recovery_fetches``), so k answers
  restore it and the crawl then probes gently upward. The back-off also falls by at least a
  4k-th of its peak per answer, so it is gone after at most 4k answers. Against a server that
  allows R fetches a second the rate saw-tooths between about R/2 and R: in simulation and in
  tests/integration/crawl/test_rate_limits.py the crawl keeps two thirds of R, with about one
  refused fetch in eight at k = 8 (a refused URL is fetched again later, never dropped).

The rest is the largest of ``min_rest``, the robots.txt Crawl-delay (capped at ``max_rest``),
``rest_factor`` x the last response time (capped at ``max_rest``), the back-off, and after a 429 or
503 the Retry-After.
"""

from __future__ import annotations

from dataclasses import dataclass

RATE_LIMITED = frozenset({429, 503})


@dataclass(frozen=True)
class RestPolicy:
    """The operator's settings (``[crawl]`` in the config)."""

    min_rest: float
    max_rest: float
    rest_factor: float
    max_retry_after: float
    backoff_start: float
    max_backoff: float
    backoff_recovery_fetches: int


class Rest:
    """One site's rest interval and its back-off (see the module docstring for the rule)."""

    def __init__(self, policy: RestPolicy, crawl_delay: float | None = None) -> None:
        self.policy = policy
        self.crawl_delay = crawl_delay
        self.backoff = 0.0
        self._peak = 0.0  # the back-off after its last doubling

    def floor(self) -> float:
        """The shortest rest the policy allows now (without the response-time term)."""
        p = self.policy
        return max(p.min_rest, min(self.crawl_delay or 0.0, p.max_rest), self.backoff)

    def slow_down(self) -> float:
        """An answer that was a gatekeeper's (a challenge, a block page): the back-off grows as
        for a 429 without Retry-After; the rest before the next fetch."""
        p = self.policy
        self.backoff = self._peak = min(max(self.backoff * 2, p.backoff_start), p.max_backoff)
        return self.floor()

    def after(self, status: int | None, elapsed: float, retry_after: float | None = None) -> float:
        """The rest to take after a fetch that answered ``status`` (None: no answer) in ``elapsed`` s."""
        p = self.policy
        rest = max(p.min_rest, min(self.crawl_delay or 0.0, p.max_rest),
                   min(p.rest_factor * elapsed, p.max_rest))
        if status in RATE_LIMITED:
            if retry_after is not None:
                return max(rest, self.backoff, min(retry_after, p.max_retry_after))
            self.backoff = self._peak = min(max(self.backoff * 2, p.backoff_start), p.max_backoff)
        elif status is not None and self.backoff:
            k, peak, backoff = p.backoff_recovery_fetches, self._peak, self.backoff
            # Additive increase of the rate, and never slower than a linear fall to zero.
            backoff = min(backoff * k * peak / (k * peak + backoff), backoff - peak / (4 * k))
            self.backoff = backoff if backoff >= 1e-3 else 0.0
        return max(rest, self.backoff)
