"""The decision log (archiver.queues.decisions): its lines, its bound, and a queue's position."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from archiver.queues.decisions import (
    DECISIONS,
    KINDS,
    MAX_LOGGED_URL,
    OLDER,
    Decision,
    DecisionLog,
    decision_line,
    parse_decision,
    read_decisions,
)
from archiver.queues.embedded.crawlqueue import position_in
from archiver.queues.models import Entry, QueuePosition

URL = "http://a.test/x"


def decision(url: str = URL, kind: str = "robots", when: float = 1_700_000_000.0,
             detail: str = "") -> Decision:
    return Decision(when, kind, url, detail)


@given(st.binary(max_size=300))
def test_any_line_parses_to_a_decision_or_none(line: bytes) -> None:
    parsed = parse_decision(line)
    assert parsed is None or (parsed.kind in KINDS and parsed.url and line.endswith(b"\n"))


@given(st.sampled_from(KINDS), st.text(alphabet=st.characters(blacklist_characters="\t\n\r",
                                                             blacklist_categories=("Cs",)),
                                        min_size=1, max_size=80),
       st.text(max_size=400), st.floats(min_value=0, max_value=4e9))
def test_a_decision_survives_its_line(kind: str, url: str, detail: str, when: float) -> None:
    parsed = parse_decision(decision_line(Decision(when, kind, url, detail)))
    assert parsed is not None
    assert (parsed.kind, parsed.url) == (kind, url)
    assert abs(parsed.time - when) < 0.001
    folded = " ".join(detail[:300].split())  # one line, whitespace runs folded
    assert parsed.detail == folded.encode(errors="replace").decode()


def test_a_visit_logs_a_kind_once_per_url(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path, 100)
    for when in (1.0, 2.0):
        log.add(decision(kind="max-depth", when=when, detail="http://a.test/p"))
    log.add(decision(kind="trap", when=3.0))
    log.close()
    assert [(d.kind, d.time) for d in read_decisions(tmp_path, URL)] == [("max-depth", 1.0),
                                                                         ("trap", 3.0)]
    again = DecisionLog(tmp_path, 100)  # the next visit logs it anew
    again.add(decision(kind="max-depth", when=9.0))
    again.close()
    assert [d.time for d in read_decisions(tmp_path, URL)] == [1.0, 3.0, 9.0]


def test_the_log_keeps_between_half_and_all_of_its_newest_decisions(tmp_path: Path) -> None:
    limit = 10
    for visit in range(4):
        log = DecisionLog(tmp_path, limit)
        for n in range(7):
            log.add(decision(url=f"http://a.test/{visit}-{n}", when=visit * 10 + n))
            log.flush()
            kept = [parse_decision(line) for name in (OLDER, DECISIONS)
                    if (tmp_path / name).exists()
                    for line in (tmp_path / name).read_bytes().splitlines(keepends=True)]
            assert limit // 2 <= len(kept) <= limit or (visit == 0 and n < limit // 2)
            assert kept[-1] == decision(url=f"http://a.test/{visit}-{n}", when=visit * 10 + n)
            times = [d.time for d in kept if d is not None]
            assert times == sorted(times)  # the newest, in order
        log.close()


def test_no_limit_logs_nothing_and_an_unwritable_url_is_not_logged(tmp_path: Path) -> None:
    off = DecisionLog(tmp_path, 0)
    off.add(decision())
    off.close()
    assert not (tmp_path / DECISIONS).exists()
    log = DecisionLog(tmp_path, 10)
    log.add(decision(url="http://a.test/" + "x" * MAX_LOGGED_URL))
    log.add(decision(url="http://a.test/tab\there"))
    log.add(decision(url="http://a.test/\ud800"))
    log.close()
    assert not (tmp_path / DECISIONS).exists()


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    (tmp_path / DECISIONS).write_bytes(decision_line(decision()) + decision_line(decision())[:-5])
    assert read_decisions(tmp_path, URL) == [decision()]


def test_unsynced_lines_are_handed_to_the_group_commit_once(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path, 10)
    assert log.unsynced_descriptor() is None
    log.add(decision())
    fd = log.unsynced_descriptor()
    assert fd is not None
    os.close(fd)
    assert log.unsynced_descriptor() is None  # nothing new since
    log.close()


def entries(*urls: str) -> list[Entry]:
    return [Entry(url, 1, end) for end, url in enumerate(urls, start=1)]


def test_a_position_counts_the_entries_still_ahead() -> None:
    log = entries("/a", "/b", "/c", "/d")
    assert position_in(log, 1, "/c") == QueuePosition(1, False, 1, 3)
    assert position_in(log, 1, "/a") == QueuePosition(1, True, 0, 3)
    assert position_in(log, 4, "/d") == QueuePosition(1, True, 0, 0)
    assert position_in(log, 0, "/z") is None


def test_a_requeued_url_stands_at_its_entry_not_yet_handled() -> None:
    log = entries("/a", "/b", "/a", "/c")  # /a answered 429 and went back to the end
    assert position_in(log, 1, "/a") == QueuePosition(1, False, 1, 3)
    assert position_in(log, 4, "/a") == QueuePosition(1, True, 0, 0)
