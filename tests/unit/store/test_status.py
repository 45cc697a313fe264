"""``archiver status``'s text (``store.status.format_status``) for a status file and for a row of
the shared table crawlers, reporting or not yet."""

from __future__ import annotations

from archiver.store.status import format_status
from tests.support.statusrows import status_of


def test_a_status_file_names_process_pid_and_age() -> None:
    status = status_of(2, 40) | {"pid": 77, "time": 1000.0}
    lines = format_status(status, now=1012.0).splitlines()
    assert lines[0] == "process 2 (pid 77), status written 12s ago"
    assert lines[1].startswith("  pages=40 bytes=40000 ")


def test_a_shared_row_names_its_host_and_heartbeat_and_may_not_report_yet() -> None:
    row = {"process": 1, "pid": 9, "host": "crawl-b", "epoch": 3, "started": 900.0, "heartbeat_age": 4.2}
    assert format_status(row, now=1000.0, stale_after=300) == \
        "process 1 on crawl-b (pid 9), no status yet, heartbeat 4s ago"
    gone = status_of(1, 5) | row | {"time": 990.0, "heartbeat_age": 301.0}
    lines = format_status(gone, now=1000.0, stale_after=300).splitlines()
    assert lines[0] == "process 1 on crawl-b (pid 9), status written 10s ago, heartbeat 301s ago " \
                       "(past crawl.lease_ttl: gone?)"
    assert lines[1].startswith("  pages=5 ")


def test_faults_and_what_fetching_waits_for_are_shown_when_there_are_any() -> None:
    quiet = format_status(status_of(2, 40) | {"pid": 77, "time": 1000.0}, now=1000.0)
    assert "faults=" not in quiet and "waiting_for=" not in quiet
    troubled = status_of(2, 40) | {"pid": 77, "time": 1000.0, "waiting_for": "store",
                                   "faults": {"store-unavailable": 2, "store-recovered": 1}}
    line = format_status(troubled, now=1000.0).splitlines()[1]
    assert line.endswith(" faults=store-recovered:1,store-unavailable:2 waiting_for=store")
