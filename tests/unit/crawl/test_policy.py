"""The visit's decisions without I/O (archiver.crawl.policy)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.config import CrawlConfig
from archiver.crawl.policy import (
    _MAX_SHAPES,
    RobotsFetch,
    ShapeBudget,
    VisitPolicy,
    looks_like_trap,
    url_shape,
)
from tests.support.fuzzing import examples

ORIGIN = "http://example.org"
CONFIG = CrawlConfig(max_failures=3, max_rate_limited=4, max_internal_errors=2, max_depth=5,
                     max_per_shape=2, max_url_length=100, max_pages=10, max_bytes=1000)


def policy(**changes: object) -> VisitPolicy:
    return VisitPolicy(ORIGIN, dataclasses.replace(CONFIG, **changes))


def test_url_shape_reads_digit_runs_as_one_placeholder():
    assert url_shape("http://example.org/cal/2026/11/") == "/cal/#/#/"
    assert url_shape("https://a.b:8080/p?page=12&sort=asc") == "/p?page=#&sort=asc"
    assert url_shape("http://example.org/") == "/"


def test_answers_finish_the_url_and_say_whether_to_read_links():
    p = policy()
    ok = p.verdict(200)
    assert ok.entry == "done" and ok.links
    assert p.verdict(404).links
    assert p.verdict(301).links
    server_error = p.verdict(500)
    assert server_error.entry == "done" and server_error.end is None


def test_rate_limited_urls_are_requeued_and_a_long_run_ends_the_visit():
    p = policy()
    for _ in range(3):
        verdict = p.verdict(429)
        assert verdict.entry == "requeue" and not verdict.links and verdict.end is None
    p.verdict(200)                                      # a success resets the run
    ends = [p.verdict(503).end for _ in range(4)]
    assert ends[:3] == [None] * 3
    assert ends[3] is not None and ends[3].kind == "retry"


def test_a_run_of_failures_keeps_the_url_for_the_next_visit():
    p = policy()
    assert p.verdict(None, "timeout: connect").end is None
    assert p.verdict(502).end is None
    last = p.verdict(None, "reset: x")
    assert last.entry == "keep" and last.end is not None and last.end.kind == "retry"
    assert "3 failures in a row" in last.end.note


def test_rate_limits_do_not_count_as_failures_nor_reset_them_to_a_visit_end():
    p = policy()
    p.verdict(None)
    p.verdict(None)
    p.verdict(429)                                      # resets the failure run
    assert p.verdict(None).end is None


def test_internal_errors_end_the_visit_only_in_a_run():
    p = policy()
    assert p.after_internal_error() is None
    p.handled()
    assert p.after_internal_error() is None
    end = p.after_internal_error()
    assert end is not None and end.kind == "retry"


def test_site_limits_and_totals():
    p = policy()
    p.fetched(200, 0.01, size=600)
    assert p.limit_reached() is None
    p.fetched(None, 0.01, size=0)                        # no answer: nothing counted
    assert p.pages == 1
    p.fetched(200, 0.01, size=600)
    assert p.limit_reached() == "max-bytes"
    assert policy(max_pages=1, max_bytes=10**9).limit_reached() is None


def test_routing():
    p = policy()
    assert p.route(ORIGIN + "/a", 1) is None
    assert p.route("http://other.org/", 1) == "external"
    assert p.route("http://other.org/", 1) == "seen"     # spooled once per visit
    assert p.route(ORIGIN + "/" + "x" * 100, 1) == "url-too-long"
    assert p.route(ORIGIN + "/a", 6) == "max-depth"
    assert p.route(ORIGIN + "/a/a/a/a/", 1) == "trap"
    # http -> https on the same host through a redirect: an alias origin of the visit.
    assert p.route("https://example.org/", 1) == "external"
    assert p.route("https://example.org/x", 1, redirect=True) is None
    assert p.route("https://example.org/y", 1) is None


def test_self_similar_pages_spend_their_shape_budget():
    p = policy()
    shape = "/cal/#/#/"
    for month in (10, 9):
        p.page_read(shape, [f"{ORIGIN}/cal/2026/{month:02d}/"])
    assert p.route(ORIGIN + "/cal/2026/08/", 1, source_shape=shape) == "shape"
    # A link of that shape on another page is still followed, and other shapes go on.
    assert p.route(ORIGIN + "/cal/2026/08/", 1, source_shape="/") is None
    assert p.route(ORIGIN + "/about", 1, source_shape=shape) is None


def test_pages_finding_other_shapes_or_nothing_never_count():
    p = policy()
    shape = "/list?page=#"
    for n in range(10):
        p.page_read(shape, [f"{ORIGIN}/list?page={n + 1}", f"{ORIGIN}/article/{n}"])
        p.page_read(shape, [])                           # a leaf
    assert p.route(ORIGIN + "/list?page=99", 1, source_shape=shape) is None


def test_shape_table_stays_bounded():
    budget = ShapeBudget()
    for n in range(5 * _MAX_SHAPES):
        budget.count(f"/unique-{chr(65 + n % 26)}{n}")
        budget.count("/cal/#/#/")
    assert len(budget._similar) <= _MAX_SHAPES + 1
    assert budget.exhausted("/cal/#/#/", 5 * _MAX_SHAPES)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.text("/ab0123?=&", max_size=12), max_size=40))
def test_route_never_raises_and_says_one_known_thing(paths):
    p = policy()
    for path in paths:
        url = ORIGIN + "/" + path.lstrip("/")
        assert p.route(url, 1, source_shape=url_shape(url)) in (
            None, "url-too-long", "max-depth", "trap", "shape")
        p.page_read(url_shape(url), [url])


def test_looks_like_trap():
    assert looks_like_trap("http://a.b/x/y/x/y/x/y/x/", 3)
    assert not looks_like_trap("http://a.b/x/y/x/y/", 3)


# -- robots.txt ----------------------------------------------------------------------------------

def answer(walk: RobotsFetch, status: int | None, body: bytes = b"", location: str | None = None,
           truncated: str | None = None):
    return walk.answer(status, location=location, content_encoding=None, body=body,
                       truncated=truncated)


def test_robots_rules_and_unavailability():
    walk = RobotsFetch(ORIGIN, "archiver")
    rules = answer(walk, 200, b"User-agent: *\nDisallow: /private/\n").rules
    assert rules is not None and not rules.allowed("/private/x") and rules.allowed("/")
    assert answer(walk, 404).rules.allowed("/private/x")             # 4xx: allow all
    for status in (500, 503, 429, None):
        result = answer(walk, status)
        assert result.rules is None and result.follow is None and result.reason


@pytest.mark.parametrize("cut", ["time", "disconnect", "unspecified"])
def test_robots_cut_short_is_unavailable(cut):
    result = answer(RobotsFetch(ORIGIN, "archiver"), 200, b"User-agent: *\n", truncated=cut)
    assert result.rules is None and "cut short" in result.reason


def test_robots_capped_by_size_is_parsed():
    result = answer(RobotsFetch(ORIGIN, "archiver"), 200, b"User-agent: *\nDisallow: /\n",
                    truncated="length")
    assert result.rules is not None and not result.rules.allowed("/x")


def test_robots_redirects_followed_five_times_then_allow_all():
    walk = RobotsFetch(ORIGIN, "archiver")
    for n in range(5):
        step = answer(walk, 301, location=f"/robots-{n}.txt")
        assert step.follow == f"{ORIGIN}/robots-{n}.txt" == walk.url
    final = answer(walk, 301, location="/robots-5.txt")
    assert final.follow is None and final.rules is not None and final.rules.allowed("/x")
    odd = answer(RobotsFetch(ORIGIN, "archiver"), 302, location="mailto:x@y")
    assert odd.rules is not None and odd.rules.allowed("/x")


def test_robots_redirects_stay_on_the_site():
    walk = RobotsFetch(ORIGIN, "archiver")
    assert answer(walk, 301, location="https://example.org/robots.txt").follow == (
        "https://example.org/robots.txt")                           # the other scheme
    for elsewhere in ("http://127.0.0.1/robots.txt", "http://example.org:6379/robots.txt",
                      "http://www.example.org/robots.txt"):
        step = answer(RobotsFetch(ORIGIN, "archiver"), 302, location=elsewhere)
        assert step.follow is None and step.rules is not None and step.rules.allowed("/x")


def test_only_http_https_twins_on_default_ports_are_aliases():
    p = policy()
    assert p.route("http://example.org:8080/x", 1, redirect=True) == "external"
    assert p.route("https://example.org:8443/x", 1, redirect=True) == "external"
    assert p.route("https://example.org/x", 1, redirect=True) is None


def test_gatekeepers_answers_are_requeued_and_a_long_run_ends_the_visit():
    p = policy()
    for _ in range(3):
        verdict = p.verdict(200, gatekeeper="challenge")  # a 200 that is a challenge page
        assert verdict.entry == "requeue" and not verdict.links and verdict.end is None
    end = p.verdict(403, gatekeeper="block").end
    assert end is not None and end.kind == "retry" and "gatekeeper (block)" in end.note
    p.verdict(200)                                      # a real page resets the run
    assert p.verdict(200, gatekeeper="challenge").end is None
