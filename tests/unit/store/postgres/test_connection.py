"""The reconnecting connection's pure parts: its back-off, what counts as a lost connection, and
the one report per outage (the connection itself: tests/integration/store/postgres/test_connection.py)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.store.postgres.connection import (
    FIRST_DELAY,
    NOT_DONE,
    StoreAway,
    StoreWatch,
    backoff_delay,
    is_lost,
)


def test_the_back_off_starts_at_once_then_doubles_up_to_its_bound():
    delays = [backoff_delay(n, 1.0) for n in range(8)]
    assert delays == [0.0, FIRST_DELAY, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


@given(st.integers(min_value=1, max_value=10_000), st.floats(min_value=0.01, max_value=3600),
       st.floats(min_value=-1, max_value=1))
def test_a_pause_never_exceeds_its_bound_by_more_than_its_spread(attempt, longest, spread):
    delay = backoff_delay(attempt, longest, spread)
    assert 0 < delay <= longest * 1.1 + 1e-9
    assert delay >= min(FIRST_DELAY, longest) * 0.9 - 1e-9


@pytest.mark.parametrize("error, readonly, lost", [
    (psycopg.errors.AdminShutdown(), False, True),      # pg_ctl stop, a failover's old primary
    (psycopg.errors.CrashShutdown(), False, True),
    (psycopg.errors.CannotConnectNow(), False, True),   # starting up, or in recovery
    (psycopg.errors.ConnectionFailure(), False, True),  # class 08
    (psycopg.errors.ReadOnlySqlTransaction(), False, True),  # a writer that reached a standby
    (psycopg.errors.ReadOnlySqlTransaction(), True, False),  # a reader's own setting
    (psycopg.errors.QueryCanceled(), False, False),     # a statement timeout: the query's fault
    (psycopg.errors.UniqueViolation(), False, False),
    (psycopg.errors.DeadlockDetected(), False, False),
    (ValueError("not a database error"), False, False),
])  # fmt: skip
def test_what_counts_as_a_lost_connection(error, readonly, lost):
    assert is_lost(error, None, readonly=readonly) is lost


def test_an_outage_is_reported_once_and_its_end_once_with_how_long_it_lasted():
    seen: list[tuple[str, dict]] = []
    changes: list[bool] = []
    watch = StoreWatch(wait=True, retry_max=5.0, report=lambda level, name, fields: seen.append(
        (name, fields)))
    watch.on_change = lambda: changes.append(watch.away)
    watch.recovered()  # nothing was away
    for cause in ("server closed the connection", "connection refused", "connection refused"):
        watch.failed(cause)
    assert watch.away
    watch.recovered()
    watch.recovered()
    assert [name for name, _ in seen] == ["store-unavailable", "store-recovered"]
    assert seen[0][1] == {"cause": "server closed the connection", "action": "waiting", "retry_max": 5.0}
    assert seen[1][1]["after"] >= 0
    assert changes == [True, False] and watch.outages == 1
    watch.failed("again")
    assert watch.outages == 2 and seen[-1][0] == "store-unavailable"


def test_one_report_per_outage_whatever_the_threads():
    seen: list[str] = []
    watch = StoreWatch(report=lambda level, name, fields: seen.append(name))
    start = threading.Barrier(8)

    def fail() -> None:
        start.wait()
        watch.failed("gone")

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["store-unavailable"]


def test_store_away_says_whole_seconds_to_wait():
    assert StoreAway("away", 0.01).retry_after == 1
    assert StoreAway("away", 2.2).retry_after == 3
    assert repr(NOT_DONE) == "NOT_DONE"
