"""The pure parts of browser-assisted capture: which answers are rendered, what the browser is
given, the answers a visit keeps, and each host's turn."""

from __future__ import annotations

import gzip
import itertools

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from archiver.browser.page import Answer
from archiver.crawl.http import FetchResult
from archiver.crawl.rendering import Answers, HostClock, answer_of, render_reason

APP = b"<!doctype html><title>App</title><div id=app></div><script src=/app.js></script>"
STATIC = (b"<!doctype html><title>About</title><h1>About us</h1>" + b"<p>Plain words. " * 200
          + b"</p>")


def answered(body: bytes, content_type: str = "text/html", status: int = 200,
             headers: tuple[tuple[str, str], ...] = (), truncated: str | None = None) -> FetchResult:
    return FetchResult(url="http://site.test/", ip="127.0.0.1", started=0.0, status=status,
                       headers=[("Content-Type", content_type), *headers], body=body,
                       truncated=truncated)


def test_http_capture_never_renders() -> None:
    assert render_reason("http", answered(APP), 1 << 20) is None


def test_browser_capture_renders_every_whole_html_page_and_nothing_else() -> None:
    assert render_reason("browser", answered(STATIC), 1 << 20) == "crawl.capture = browser"
    assert render_reason("browser", answered(STATIC, "application/xhtml+xml"), 1 << 20)
    assert render_reason("browser", answered(b"{}", "application/json"), 1 << 20) is None
    assert render_reason("browser", answered(STATIC, status=404), 1 << 20) is None
    assert render_reason("browser", answered(STATIC, truncated="length"), 1 << 20) is None
    assert render_reason("browser", FetchResult(url="http://site.test/", ip="", started=0.0,
                                                error="connect: refused"), 1 << 20) is None


def test_auto_capture_renders_a_page_that_needs_scripts_and_says_why() -> None:
    reason = render_reason("auto", answered(APP), 1 << 20)
    assert reason is not None and reason.startswith("auto: ")
    assert render_reason("auto", answered(STATIC), 1 << 20) is None


def test_auto_capture_reads_a_compressed_page() -> None:
    page = answered(gzip.compress(APP), headers=(("Content-Encoding", "gzip"),))
    assert render_reason("auto", page, 1 << 20) is not None


def test_the_browser_is_given_the_decoded_body_without_the_wire_headers() -> None:
    page = answered(gzip.compress(STATIC), headers=(
        ("Content-Encoding", "gzip"), ("Content-Length", "99"),
        ("X-Archiver-Transfer-Encoding", "chunked"), ("Set-Cookie", "a=b")))
    answer = answer_of(page, 1 << 20)
    assert answer is not None and answer.body == STATIC and answer.status == 200
    assert [name for name, _ in answer.headers] == ["Content-Type", "Set-Cookie"]
    assert answer_of(FetchResult(url="http://site.test/", ip="", started=0.0,
                                 error="timeout: first byte"), 1 << 20) is None


def test_the_kept_answers_stay_within_their_bytes_newest_first() -> None:
    answers = Answers(limit=100)
    for n in range(5):
        answers.put(f"http://site.test/{n}", Answer(200, [], b"x" * 30))
    assert answers.get("http://site.test/0") is None and "http://site.test/1" not in answers
    assert all(answers.get(f"http://site.test/{n}") for n in (2, 3, 4))
    answers.put("http://site.test/big", Answer(200, [], b"x" * 101))  # never kept
    assert answers.get("http://site.test/big") is None and answers.get("http://site.test/4")


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 60)), max_size=40))
def test_kept_answers_never_pass_their_limit(puts: list[tuple[int, int]]) -> None:
    answers = Answers(limit=100)
    for key, size in puts:
        answers.put(str(key), Answer(200, [], b"x" * size))
        assert answers._size == sum(len(a.body) for a in answers._answers.values()) <= 100


async def test_a_host_is_asked_once_its_rest_is_over_one_request_at_a_time(
        autojump_clock: trio.testing.MockClock) -> None:
    clock = HostClock()
    asked: list[tuple[str, float]] = []

    async def ask(host: str) -> None:
        async with clock.turn(host):
            asked.append((host, trio.current_time()))
            await trio.sleep(0.1)  # the request itself
            clock.rest(host, 2.0)

    async with trio.open_nursery() as nursery:
        for host in ("a.test", "a.test", "b.test", "a.test"):
            nursery.start_soon(ask, host)
    times = [at for host, at in asked if host == "a.test"]
    assert len(times) == 3
    assert all(later - earlier >= 2.1 for earlier, later in itertools.pairwise(times))
    assert [at for host, at in asked if host == "b.test"] == [0.0]  # another host does not wait
    assert not clock._locks  # nobody waits: no lock is kept
