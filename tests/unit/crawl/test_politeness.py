"""Rest intervals and back-off (pure logic)."""

import email.utils

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.crawl.politeness import Rest, RestPolicy
from archiver.web.http import parse_retry_after
from tests.support.fuzzing import examples

POLICY = RestPolicy(min_rest=1.0, max_rest=10.0, rest_factor=5.0, max_retry_after=60.0,
                    backoff_start=2.0, max_backoff=40.0, backoff_recovery_fetches=4)


def test_rest_is_the_largest_of_its_parts():
    assert Rest(POLICY).after(200, 0.01) == 1.0                      # min_rest
    assert Rest(POLICY).after(200, 0.5) == 2.5                       # 5 x response time
    assert Rest(POLICY).after(200, 9.0) == 10.0                      # capped at max_rest
    assert Rest(POLICY, crawl_delay=4).after(200, 0.01) == 4.0       # Crawl-delay
    assert Rest(POLICY, crawl_delay=500).after(200, 0.01) == 10.0    # Crawl-delay capped


def test_zero_min_rest():
    policy = RestPolicy(0, 0, 0, 60, 2, 40, 4)
    assert Rest(policy).after(200, 0.3) == 0.0


def test_backoff_doubles_then_recovers_in_a_bounded_number_of_fetches():
    rest = Rest(POLICY)
    assert rest.after(503, 0.01) == 2.0
    assert rest.after(429, 0.01) == 4.0
    assert rest.after(429, 0.01) == 8.0
    for _ in range(10):
        rest.after(429, 0.01)
    assert rest.backoff == 40.0                                      # capped
    # The rate grows back additively: k = 4 answers restore the refused rate (half the peak's
    # interval), and the back-off is gone after at most 4k = 16.
    waits = [rest.after(200, 0.01) for _ in range(4)]
    assert waits == pytest.approx([40 / 1.25, 40 / 1.5, 40 / 1.75, 20.0])
    for _ in range(12):
        rest.after(200, 0.01)
    assert rest.backoff == 0.0


def test_retry_after_is_waited_out_and_does_not_compound():
    rest = Rest(POLICY)
    waits = [rest.after(429, 0.01, retry_after=2) for _ in range(20)]
    assert waits == [2.0] * 20                                       # not 2, 4, 8, ...
    assert rest.backoff == 0.0
    assert Rest(POLICY).after(503, 0.01, retry_after=30) == 30
    assert Rest(POLICY).after(429, 0.01, retry_after=3600) == 60     # capped
    assert Rest(POLICY).after(200, 0.01, retry_after=30) == 1.0      # only on 429/503


def test_retry_after_never_shortens_a_running_backoff():
    rest = Rest(POLICY)
    rest.after(429, 0.01)
    rest.after(429, 0.01)
    assert rest.after(429, 0.01, retry_after=1) == 4.0


def test_failures_without_answer_keep_the_backoff():
    rest = Rest(POLICY)
    rest.after(503, 0.01)
    assert rest.after(None, 0.01) == 2.0


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from([200, 404, 429, 503, None]), max_size=60),
       st.integers(min_value=1, max_value=20))
def test_backoff_stays_in_bounds_and_clears_after_enough_successes(statuses, k):
    policy = RestPolicy(0.5, 10.0, 0.0, 60.0, 2.0, 40.0, k)
    rest = Rest(policy)
    for status in statuses:
        wait = rest.after(status, 0.01)
        assert 0.5 <= wait <= 40.0
        assert 0.0 <= rest.backoff <= 40.0
    for _ in range(4 * k):
        rest.after(200, 0.01)
    assert rest.backoff == 0.0


def test_parse_retry_after():
    assert parse_retry_after("120", 0) == 120
    assert parse_retry_after(" 7 ", 0) == 7
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after(date, 1_000_000) == 30
    assert parse_retry_after(email.utils.formatdate(10, usegmt=True), 1_000_000) == 0
    assert parse_retry_after("soon", 0) is None
    assert parse_retry_after(None, 0) is None
    assert parse_retry_after("-5", 0) is None
    assert parse_retry_after("¹", 0) is None             # found by the property test below


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=80))
def test_parse_retry_after_never_raises(value):
    wait = parse_retry_after(value, 1_000_000.0)
    assert wait is None or wait >= 0


def test_a_gatekeepers_answer_slows_down_as_a_429_does():
    rest = Rest(POLICY)
    first = rest.slow_down()
    assert rest.backoff == 2.0 and first == max(POLICY.min_rest, 2.0)
    rest.slow_down()
    assert rest.backoff == 4.0
    for _ in range(10):
        rest.slow_down()
    assert rest.backoff == 40.0                                      # capped
    rest.after(200, 0.0)
    assert rest.backoff < 40.0                                       # and it recovers
