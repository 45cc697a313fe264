"""Rest intervals and back-off (pure logic)."""

import email.utils

from archiver.politeness import Rest, RestPolicy, parse_retry_after

POLICY = RestPolicy(min_rest=1.0, max_rest=10.0, rest_factor=5.0, max_retry_after=60.0,
                    backoff_start=2.0, max_backoff=40.0, backoff_recovery=0.5)


def test_rest_is_the_largest_of_its_parts():
    assert Rest(POLICY).after(200, 0.01) == 1.0                      # min_rest
    assert Rest(POLICY).after(200, 0.5) == 2.5                       # 5 x response time
    assert Rest(POLICY).after(200, 9.0) == 10.0                      # capped at max_rest
    assert Rest(POLICY, crawl_delay=4).after(200, 0.01) == 4.0       # Crawl-delay
    assert Rest(POLICY, crawl_delay=500).after(200, 0.01) == 10.0    # Crawl-delay capped


def test_zero_min_rest():
    policy = RestPolicy(0, 0, 0, 60, 2, 40, 0.5)
    assert Rest(policy).after(200, 0.3) == 0.0


def test_backoff_doubles_then_recovers_slowly():
    rest = Rest(POLICY)
    assert rest.after(503, 0.01) == 2.0
    assert rest.after(429, 0.01) == 4.0
    assert rest.after(429, 0.01) == 8.0
    for _ in range(10):
        rest.after(429, 0.01)
    assert rest.backoff == 40.0                                      # capped
    assert rest.after(200, 0.01) == 20.0                             # halves per good answer
    assert rest.after(200, 0.01) == 10.0
    for _ in range(20):
        rest.after(200, 0.01)
    assert rest.after(200, 0.01) == 1.0                              # back to normal


def test_retry_after_is_honoured_up_to_the_cap():
    assert Rest(POLICY).after(503, 0.01, retry_after=30) == 30
    assert Rest(POLICY).after(429, 0.01, retry_after=3600) == 60
    assert Rest(POLICY).after(200, 0.01, retry_after=30) == 1.0      # only on 429/503


def test_failures_without_answer_keep_the_backoff():
    rest = Rest(POLICY)
    rest.after(503, 0.01)
    assert rest.after(None, 0.01) == 2.0


def test_parse_retry_after():
    assert parse_retry_after("120", 0) == 120
    assert parse_retry_after(" 7 ", 0) == 7
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after(date, 1_000_000) == 30
    assert parse_retry_after(email.utils.formatdate(10, usegmt=True), 1_000_000) == 0
    assert parse_retry_after("soon", 0) is None
    assert parse_retry_after(None, 0) is None
    assert parse_retry_after("-5", 0) is None
