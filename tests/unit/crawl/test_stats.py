"""A crawler's counters: faults are logged and counted, and the status says what fetching waits for."""

from __future__ import annotations

import logging

import pytest

from archiver.crawl.stats import Stats


def test_a_fault_is_one_event_and_one_count(caplog: pytest.LogCaptureFixture) -> None:
    stats = Stats(process=1)
    log = logging.getLogger("archiver.crawl.test")
    with caplog.at_level(logging.WARNING, logger="archiver.crawl.test"):
        stats.fault(log, logging.WARNING, "store-unavailable", store="catalog", error="gone")
        stats.fault(log, logging.WARNING, "store-unavailable", store="catalog", error="gone")
        stats.fault(log, logging.INFO, "store-recovered", store="catalog")
    assert [r.getMessage() for r in caplog.records] == ["store-unavailable"] * 2
    stats.waiting_for = "store"
    status = stats.snapshot({})
    assert status["faults"] == {"store-unavailable": 2, "store-recovered": 1}
    assert status["waiting_for"] == "store"
