"""How long a site rests between fetches, and how it backs off when it asks us to slow down.

Pure logic: the site visit feeds in each response's status, elapsed time and Retry-After, and reads
back the rest before the next fetch.
"""

from __future__ import annotations

import email.utils
from dataclasses import dataclass


@dataclass(frozen=True)
class RestPolicy:
    """The operator's settings (``[crawl]`` in the config)."""

    min_rest: float
    max_rest: float
    rest_factor: float
    max_retry_after: float
    backoff_start: float
    max_backoff: float
    backoff_recovery: float


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP-date, RFC 9110 §10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


class Rest:
    """One site's rest interval, with back-off after 429 and 503 answers.

    The rest is max(min_rest, Crawl-delay capped at max_rest, rest_factor x the last response time
    capped at max_rest), and at least the current back-off. A 429 or 503 doubles the back-off (from
    ``backoff_start``, up to ``max_backoff``) and honours Retry-After up to ``max_retry_after``; each
    other answer shrinks the back-off by ``backoff_recovery``, so the site recovers slowly.
    """

    def __init__(self, policy: RestPolicy, crawl_delay: float | None = None) -> None:
        self.policy = policy
        self.crawl_delay = crawl_delay
        self.backoff = 0.0

    def floor(self) -> float:
        """The shortest rest the policy allows now (without the response-time term)."""
        p = self.policy
        return max(p.min_rest, min(self.crawl_delay or 0.0, p.max_rest), self.backoff)

    def after(self, status: int | None, elapsed: float, retry_after: float | None = None) -> float:
        """The rest to take after a fetch that answered ``status`` (None: no answer) in ``elapsed`` s."""
        p = self.policy
        rest = max(p.min_rest, min(self.crawl_delay or 0.0, p.max_rest),
                   min(p.rest_factor * elapsed, p.max_rest))
        if status in (429, 503):
            self.backoff = min(max(self.backoff * 2, p.backoff_start), p.max_backoff)
            if retry_after is not None:
                rest = max(rest, min(retry_after, p.max_retry_after))
        elif status is not None:
            self.backoff *= p.backoff_recovery
            if self.backoff < 0.01:
                self.backoff = 0.0
        return max(rest, self.backoff)
