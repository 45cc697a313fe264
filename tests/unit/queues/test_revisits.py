"""The revisit schedule: Cho and Garcia-Molina's change-rate estimate, the decay of old visits,
and the next visit held between crawl.revisit_min and revisit_max."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.queues.revisits import (
    DECAY,
    GONE,
    LOOK_BACK,
    ChangeHistory,
    PageChanges,
    RevisitSchedule,
    ask_again,
    look_back,
    revisit_at,
)
from archiver.store.models import Capture

DAY = 86400.0
SCHEDULE = RevisitSchedule(interval=7 * DAY, shortest=DAY, longest=90 * DAY)
counts = st.integers(min_value=1, max_value=10_000)
seconds = st.floats(min_value=1.0, max_value=1e9, allow_nan=False)


@st.composite
def histories(draw: st.DrawFn) -> ChangeHistory:
    n = draw(counts)
    return ChangeHistory(n, draw(st.integers(0, n)), draw(seconds) * n)


def test_the_rate_is_the_improved_estimator_of_regular_accesses():
    history = ChangeHistory(compared=10, changed=5, seconds=10 * DAY)
    assert history.rate() == pytest.approx(-math.log(5.5 / 10.5) / DAY)
    assert ChangeHistory().rate() is None                       # nothing compared yet


def test_the_estimate_finds_the_rate_of_pages_that_change_at_random():
    rng, rate, interval = random.Random(7), 1 / (3 * DAY), 2 * DAY
    visit = PageChanges()
    for _ in range(20_000):                 # a change in an interval: 1 - exp(-rate * interval)
        visit.page(changed=rng.random() < 1 - math.exp(-rate * interval), since=interval)
    estimate = ChangeHistory().observe(visit).rate()
    assert estimate == pytest.approx(rate, rel=0.05)
    naive = visit.changed / visit.seconds                       # misses changes between visits
    assert naive < 0.8 * rate


@given(histories())
def test_the_next_visit_lies_between_the_shortest_and_the_longest(history):
    assert SCHEDULE.shortest <= SCHEDULE.delay(history) <= SCHEDULE.longest


def test_a_site_with_nothing_compared_waits_the_interval_and_an_unchanging_one_the_longest():
    assert SCHEDULE.delay(ChangeHistory()) == 7 * DAY
    assert SCHEDULE.delay(ChangeHistory(50, 0, 50 * DAY)) == 90 * DAY
    assert SCHEDULE.delay(ChangeHistory(50, 50, 50 * DAY)) == DAY
    # One page in ten changed in a week: a page changes about every 9.5 weeks.
    assert SCHEDULE.delay(ChangeHistory(10, 1, 10 * 7 * DAY)) == pytest.approx(
        7 * DAY / -math.log(9.5 / 10.5))


@given(histories(), counts)
def test_more_changes_bring_the_next_visit_sooner(history, more):
    changed = min(history.changed + more, history.compared)
    busier = ChangeHistory(history.compared, changed, history.seconds)
    assert busier.rate() >= history.rate()
    assert SCHEDULE.delay(busier) <= SCHEDULE.delay(history)


@given(histories(), st.floats(min_value=1.0, max_value=100.0))
def test_the_same_changes_over_a_longer_time_put_the_next_visit_later(history, factor):
    slower = ChangeHistory(history.compared, history.changed, history.seconds * factor)
    assert slower.rate() <= history.rate()
    assert SCHEDULE.delay(slower) >= SCHEDULE.delay(history)


@given(histories(), st.integers(0, 1000), st.integers(0, 1000), seconds)
def test_a_visit_adds_to_the_decayed_history(history, compared, changed, since):
    visit = PageChanges(compared, min(changed, compared), since * compared)
    after = history.observe(visit)
    if not compared:
        assert after == history                    # a visit that compared nothing leaves it
    else:
        assert after.compared == pytest.approx(history.compared * DECAY + compared)
        assert after.changed == pytest.approx(history.changed * DECAY + visit.changed)
        assert after.seconds == pytest.approx(history.seconds * DECAY + visit.seconds)
        assert 0 <= after.changed <= after.compared


def test_a_site_that_starts_changing_is_followed_within_a_few_visits():
    history = ChangeHistory(100, 0, 100 * 90 * DAY)             # quiet for long
    for _ in range(8):
        history = history.observe(PageChanges(100, 100, 100 * DAY))
    assert SCHEDULE.delay(history) < 2 * DAY


def test_a_set_schedule_is_kept_and_none_is_made_when_revisits_are_off():
    history = ChangeHistory(10, 10, 10 * DAY)
    assert revisit_at(500.0, history, SCHEDULE, now=100) == 500.0
    assert revisit_at(0.0, history, SCHEDULE, now=100) == 100 + SCHEDULE.delay(history)
    off = RevisitSchedule(0, DAY, 90 * DAY)
    assert revisit_at(500.0, history, off, now=100) == 0.0
    assert revisit_at(0.0, history, None, now=100) == 0.0
    assert off.delay(history) is None


def test_a_page_fetched_before_its_capture_counts_no_negative_time():
    visit = PageChanges()
    visit.page(changed=True, since=-5.0)                        # a clock stepped back
    assert (visit.compared, visit.changed, visit.seconds) == (1, 1, 0.0)


statuses = st.sampled_from([200, 301, 404, 410, 500, None])


@given(st.lists(st.tuples(st.floats(0, 1e9), statuses), max_size=8), st.floats(0, 2e9))
def test_a_url_not_gone_at_its_last_capture_is_always_asked(captures, now):
    captures = sorted(captures, key=lambda c: c[0])
    if not captures or captures[-1][1] not in (404, 410):
        assert ask_again(captures, now)


def test_a_gone_url_is_asked_less_and_less_often_and_never_given_up():
    week, captures, asked = 7 * DAY, [(0.0, 200)], []
    for visit in range(1, 40):
        now = visit * week
        if ask_again(captures, now):
            asked.append(visit)
            captures.append((now, 404))
    # Gone from visit 1; asked at the next, then two, six, eighteen weeks later...
    assert asked == [1, 2, 4, 10, 28]
    captures.append((40 * week, 200))                   # back: asked at every visit again
    assert ask_again(captures, 41 * week)


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=6), st.floats(0, 1e7))
def test_a_gone_url_is_asked_once_twice_its_gone_time_has_passed(times, wait):
    times = sorted(times)
    captures = [(t, 404) for t in times]
    gone_for = times[-1] - times[0]
    assert ask_again(captures, times[-1] + wait) == (wait >= 2 * gone_for)


# --- what a revisit reads of a URL's captures ------------------------------------------------


@st.composite
def url_histories(draw: st.DrawFn) -> list[Capture]:
    """A URL's captures, oldest first: responses and revisits, some gone, few payloads."""
    kinds = st.tuples(st.sampled_from(["response", "revisit"]), st.sampled_from([200, 304, 404, 410, 500]),
                      st.sampled_from("ABC"))
    steps = draw(st.lists(kinds, min_size=1, max_size=3 * LOOK_BACK))
    return [Capture(urlkey="org,example)/", timestamp=f"2026{n:010d}", url="http://example.org/",
                    status=status, mime="text/html", digest="sha1:" + letter * 32, redirect=None,
                    filename="A.warc.gz", offset=n, length=100, rectype=rectype)
            for n, (rectype, status, letter) in enumerate(steps)]


def _gone_run_start(history: list[Capture]) -> int:
    first = len(history) - 1
    while first > 0 and history[first - 1].status in GONE:
        first -= 1
    return first


@given(url_histories())
def test_a_revisit_reads_what_ask_again_needs_and_no_more(history: list[Capture]) -> None:
    kept = look_back(reversed(history))
    assert 1 <= len(kept) <= LOOK_BACK and kept == history[len(history) - len(kept):]
    if _gone_run_start(history) >= len(history) - LOOK_BACK + 1 or len(history) <= LOOK_BACK:
        times = [(float(c.offset), c.status) for c in history]
        assert all(ask_again(times[-len(kept):], now) == ask_again(times, now)
                   for now in (len(history) + wait for wait in (0, 5, 50, 500)))
    # Nothing before the capture that ends the run of gone answers is read.
    assert all(c.status in GONE for c in kept[1:])
