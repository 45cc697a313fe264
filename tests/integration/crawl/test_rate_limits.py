"""Rate-limited sites are crawled at the pace they ask for: every page, every Retry-After honoured."""

from __future__ import annotations

import pytest

from tests.support.crawls import captures
from tests.support.onesite import (
    Answer,
    EveryNth,
    OneSite,
    TokenBucket,
    crawl_site,
    retry_after_date,
    retry_after_seconds,
)

# No rest of our own, so the pace is the server's; a back-off that starts small and clears fast.
LIMITS = {"min_rest": 0.0, "max_rest": 1.0, "backoff_start": 0.05, "max_backoff": 2.0,
          "backoff_recovery_fetches": 8, "max_rate_limited": 50}


@pytest.mark.parametrize("make", [
    pytest.param(lambda now: retry_after_seconds(1, now), id="429-retry-after-seconds"),
    pytest.param(lambda now: retry_after_date(1, now), id="429-retry-after-date"),
    pytest.param(lambda now: retry_after_date(1, now, status=503), id="503-retry-after-date"),
    pytest.param(lambda now: Answer(503, b"busy"), id="503-without-retry-after"),
])
async def test_every_second_request_limited(tmp_path, make):
    # Three limited answers, a second or two each; one page is limited twice.
    site = OneSite(pages=3, gate=EveryNth(2, make))
    root = await crawl_site(tmp_path, site, **LIMITS)
    assert set(captures(root)) >= site.page_urls()       # every page, none dropped
    assert site.early() == []                            # every Retry-After honoured
    served = [h.target for h in site.served()]
    assert len(served) == len(set(served))               # each page fetched whole once


async def test_retry_after_does_not_compound(tmp_path):
    # The reported case: every second request answered 429 + Retry-After; the waits must stay
    # what the server says (1 s here), not grow.
    site = OneSite(pages=8, gate=EveryNth(2, lambda now: retry_after_seconds(1, now)))
    await crawl_site(tmp_path, site, **LIMITS)
    limited = [i for i, h in enumerate(site.hits) if h.status == 429]
    assert len(limited) >= 4
    waits = [site.hits[i + 1].at - site.hits[i].sent for i in limited if i + 1 < len(site.hits)]
    assert all(1.0 - 0.02 <= w < 1.5 for w in waits), waits


@pytest.mark.parametrize("status", [429, 503])
async def test_token_bucket_pace_converges_to_the_allowed_rate(tmp_path, status):
    rate = 8.0
    site = OneSite(pages=24, gate=TokenBucket(rate=rate, burst=1, status=status))
    root = await crawl_site(tmp_path, site, **LIMITS)
    assert set(captures(root)) >= site.page_urls()
    served = [h for h in site.served() if h.target != "/robots.txt"]
    pace = (len(served) - 1) / (served[-1].at - served[0].at)
    # AIMD saw-tooths between about half the allowed rate and the rate itself (two thirds on
    # average in simulation): at least half of it.
    assert rate / 2 <= pace <= rate * 1.25, pace


async def test_a_site_that_only_says_no_ends_the_visit_and_keeps_its_urls(tmp_path):
    site = OneSite(pages=3, gate=EveryNth(1, lambda now: Answer(429, b"no")))
    root = await crawl_site(tmp_path, site, **{**LIMITS, "max_rate_limited": 4, "site_retries": 1})
    pages = [h for h in site.hits if h.target != "/robots.txt"]
    assert len(pages) == 4                               # then the visit ends (retried later)
    assert set(captures(root)) <= {site.origin + "/", site.origin + "/robots.txt"}
    queue = (root / "crawl-queues").rglob("queue.log")
    lines = [line for path in queue for line in path.read_text().splitlines()]
    assert any(line.endswith(site.origin + "/") for line in lines[1:])  # queued again, not lost
