"""``archiver why``'s reasoning (archiver.replay.why.explain): one answer per kind, from evidence
built by hand (the end-to-end test, tests/integration/crawl/test_why.py, gathers it from a crawl)."""

from __future__ import annotations

import dataclasses

import pytest

from archiver.queues.decisions import Decision
from archiver.queues.models import QueuePosition, SiteRow
from archiver.queues.revisits import ChangeHistory
from archiver.replay.why import Evidence, RobotsVerdict, explain, stamp
from archiver.store.models import Capture
from archiver.store.robotstxt import RobotsCapture
from archiver.web.robots import RuleLine
from archiver.web.timestamps import to_datetime

ORIGIN = "http://a.test"
URL = ORIGIN + "/private/x.html"
AT = "20261124120000"
T = to_datetime("20261124100000").timestamp()  # a visit before AT


def capture(timestamp: str, url: str = URL, status: int = 200) -> Capture:
    return Capture("test,a)/", timestamp, url, status, "text/html", "sha1:X", None,
                   "A-0.warc.gz", 1234, 500)


def site(state: str = "done", note: str = "", due: float = 0.0, attempts: int = 0) -> SiteRow:
    return SiteRow(ORIGIN, state, due, 0, attempts, T - 60, 1, note, False, 0.0, ChangeHistory())


def robots_capture(status: int | None = 200) -> RobotsCapture:
    return RobotsCapture(capture("20261124095959", ORIGIN + "/robots.txt", status or 0), status,
                         b"User-agent: *\nDisallow: /private/\n", (), True)


DISALLOWED = RobotsVerdict(robots_capture(), False, RuleLine(2, "Disallow: /private/", False))
LIMITS = {"crawl.max_depth": 3, "crawl.max_pages": 10}


def evidence(**changes: object) -> Evidence:
    base = Evidence(URL, ORIGIN, AT, [], [], site(), None, None, 2048, LIMITS)
    return dataclasses.replace(base, **changes)


def decided(kind: str, detail: str = "", when: float = T) -> list[Decision]:
    return [Decision(when, kind, URL, detail)]


def test_captured_names_the_latest_capture_by_the_date_and_its_record() -> None:
    answer = explain(evidence(captures=[capture("20261124090000"), capture("20261124110000"),
                                        capture("20261125000000")]))
    assert answer.captured and answer.kind == "captured"
    assert "20261124110000" in answer.reason and "A-0.warc.gz:1234" in answer.reason
    assert answer.facts["captures"] == 2
    assert answer.to_json()["capture"]["timestamp"] == "20261124110000"


def test_robots_names_the_deciding_line_and_the_robots_capture() -> None:
    answer = explain(evidence(decisions=decided("robots"), robots=DISALLOWED))
    assert not answer.captured and answer.kind == "robots"
    assert 'line 2 "Disallow: /private/"' in answer.reason
    assert "20261124095959" in answer.reason and answer.facts["robots"]["line"] == 2


def test_robots_answers_from_the_rules_in_force_when_no_decision_was_kept() -> None:
    answer = explain(evidence(position=QueuePosition(1, True, 0, 0), robots=DISALLOWED))
    assert answer.kind == "robots"
    everything = RobotsVerdict(robots_capture(503), False, None)
    assert "503: everything disallowed" in explain(evidence(robots=everything)).reason


@pytest.mark.parametrize(("kind", "setting"), [("max-depth", "crawl.max_depth = 3"),
                                                ("trap", "crawl.max_repeated_segments"),
                                                ("shape", "crawl.max_per_shape")])
def test_a_guard_says_which_setting_and_which_page_linked_it(kind: str, setting: str) -> None:
    answer = explain(evidence(decisions=decided(kind, ORIGIN + "/from.html")))
    assert answer.kind == kind
    assert setting in answer.reason and ORIGIN + "/from.html" in answer.reason


def test_a_url_over_the_length_guard_needs_no_record() -> None:
    answer = explain(evidence(url=ORIGIN + "/" + "x" * 3000))
    assert answer.kind == "url-too-long" and "2048" in answer.reason


def test_fetch_errors_and_internal_errors_say_what_and_when() -> None:
    answer = explain(evidence(decisions=decided("fetch-error", "timeout: first-byte")))
    assert answer.kind == "fetch-error"
    assert "timeout: first-byte" in answer.reason and stamp(T) in answer.reason
    assert explain(evidence(decisions=decided("error", "KeyError: 'x'"))).kind == "error"


def test_the_newest_decision_by_the_date_counts() -> None:
    later = Decision(to_datetime("20261125000000").timestamp(), "robots", URL, "")
    answer = explain(evidence(decisions=[*decided("fetch-error", "reset"), later]))
    assert answer.kind == "fetch-error"


def test_a_failing_site_says_its_note_and_when_it_is_due() -> None:
    due = to_datetime("20261124130000").timestamp()
    failing = site("retry", "robots.txt unavailable", due, attempts=2)
    queued = QueuePosition(0, False, 0, 1)
    answer = explain(evidence(site=failing, position=queued))
    assert answer.kind == "site-retry"
    assert "robots.txt unavailable" in answer.reason and "20261124130000" in answer.reason
    # A site whose DNS failed never opened its crawl queue: the same answer.
    deferred = site("deferred", "dns: no address", due)
    assert explain(evidence(site=deferred)).kind == "site-deferred"


def test_a_paused_site_says_why_and_how_to_resume_it() -> None:
    lost = "session lost: http://a.test/members/p7 did not contain 'Log out'"
    paused = site("paused", lost, due=T)              # the due time it was claimed at: past
    answer = explain(evidence(site=paused, position=QueuePosition(0, False, 3, 9)))
    assert answer.kind == "site-paused"
    assert answer.reason == (f"Not captured yet: queued (3 URLs ahead of it of 9 still queued), but its site "
                             f"{ORIGIN} is paused ({lost}) until `archiver site resume {ORIGIN}`.")
    assert answer.facts["site"] == {"state": "paused", "note": lost, "due": None}
    # The URL whose page found the session lost stays queued; one never queued says so too.
    assert explain(evidence(site=paused)).kind == "site-paused"


def test_queued_says_how_many_are_ahead_and_a_limit_says_which() -> None:
    waiting = explain(evidence(site=site("active"), position=QueuePosition(2, False, 7, 9)))
    assert waiting.kind == "queued" and "7 URLs ahead of it of 9" in waiting.reason
    limited = explain(evidence(site=site("revisit", "max-pages"),
                               position=QueuePosition(2, False, 0, 4)))
    assert limited.kind == "limit" and "crawl.max_pages = 10" in limited.reason


def test_never_linked_tells_a_known_site_from_an_unknown_one() -> None:
    known = explain(evidence())
    unknown = explain(evidence(site=None))
    assert known.kind == unknown.kind == "never-linked"
    assert "No crawler has queued its site" in unknown.reason
    assert "No crawler has queued" not in known.reason


def test_a_date_before_the_first_capture_says_when_it_came() -> None:
    answer = explain(evidence(at="20200101000000", captures=[capture("20261124090000")],
                              position=QueuePosition(0, True, 0, 0)))
    assert answer.kind == "later" and "20261124090000" in answer.reason
    with_reason = explain(evidence(at="20261124100500", decisions=decided("fetch-error", "reset"),
                                   captures=[capture("20261124110000")]))
    assert with_reason.kind == "fetch-error" and "first captured later" in with_reason.reason


def test_a_url_passed_without_a_trace_says_so() -> None:
    answer = explain(evidence(position=QueuePosition(1, True, 0, 0)))
    assert answer.kind == "handled" and "crawl.max_decisions" in answer.reason


def test_a_guard_refusing_one_link_gives_way_to_the_queue_another_link_fed() -> None:
    answer = explain(evidence(decisions=decided("shape", ORIGIN + "/from.html"),
                              site=site("active"), position=QueuePosition(1, False, 2, 5)))
    assert answer.kind == "queued"


def test_a_capture_of_a_key_twin_is_not_the_url_s_own_but_is_named() -> None:
    """http://a.test/events/ and http://a.test/events share a SURT key; only the second was
    captured (a 301), the first disallowed by robots.txt."""
    twin = capture("20261124090000", ORIGIN + "/private/x.html/", status=301)
    answer = explain(evidence(decisions=decided("robots"), robots=DISALLOWED, twins=[twin]))
    assert not answer.captured and answer.kind == "robots"
    assert f"{ORIGIN}/private/x.html/ at 20261124090000 (status 301)" in answer.reason
    assert answer.facts["key_twin"]["url"] == ORIGIN + "/private/x.html/"
    later = capture("20261125000000", ORIGIN + "/private/x.html/")
    assert "key_twin" not in explain(evidence(twins=[later])).facts  # captured after the date


def test_a_url_captured_only_as_a_challenge_is_not_captured_and_says_what_it_got() -> None:
    gate = dataclasses.replace(capture("20261124110000", status=403), labels='{"gatekeeper":"challenge"}')
    answer = explain(evidence(not_content=[gate], position=QueuePosition(1, True, 0, 0)))
    assert not answer.captured and answer.kind == "handled"
    assert "captured as gatekeeper=challenge (status 403), which is not the page" in answer.reason
    assert answer.facts["not_content"]["timestamp"] == "20261124110000"
    later = explain(evidence(at="20261124100000", not_content=[gate], position=QueuePosition(1, True, 0, 0)))
    assert "not_content" not in later.facts  # not by the date asked
