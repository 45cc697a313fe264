"""/metrics: labels escaped, what is not a number skipped."""

from __future__ import annotations

from archiver.replay.statuspages import metrics_text


def test_metrics_escape_labels_and_skip_what_is_not_a_number():
    odd = {"process": 3, "pages": "many", "bytes": True, "active": []}
    text = metrics_text([{**odd, "errors": {'we"ird\\kind\n': 1, "bad": "x"}}])
    assert 'archiver_errors_total{process="3",kind="we\\"ird\\\\kind\\n"} 1\n' in text
    assert "archiver_pages_total{" not in text and "archiver_bytes_total{" not in text
    assert 'kind="bad"' not in text and 'archiver_active_sites{process="3"} 0' in text


def test_faults_are_counted_by_event():
    text = metrics_text([{"process": 1, "active": [], "faults": {"store-unavailable": 2}}])
    assert 'archiver_faults_total{process="1",event="store-unavailable"} 2\n' in text
