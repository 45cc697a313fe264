"""Property tests (hypothesis) for archiver.web.urls: whatever a page holds, a result is a URI."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from archiver.web.urls import (
    REJECTIONS,
    is_normal,
    normalize,
    origin,
    origin_parts,
    rejection,
    split_origin,
)
from tests.support.fuzzing import examples
from tests.support.urlstrategies import BASE_SOURCES, absolute_urls, bases, check_uri, links, queries

EXAMPLES = settings(max_examples=examples(250), deadline=None)


def test_checker_rejects_what_it_must():
    check_uri("http://a/b%C3%A9?c=d/e?f")
    check_uri("https://[2001:db8::1]:8443/")
    for bad in ["http://a/é", "http://a/b c", "http://a/%zz", "http://a/|", "http://u@a/",
                "http://a/#f", "http://a", "ftp://a/", "http://[::g]/", "http://a:0/", "http://a:80/"]:
        try:
            check_uri(bad)
        except AssertionError:
            continue
        raise AssertionError(f"checker accepted {bad!r}")




# -- properties --------------------------------------------------------------------------------
def check_result(url: str, base: str | None) -> str | None:
    result = normalize(url, base)
    if result is None:
        reason = rejection(url, base)
        assert reason in REJECTIONS and reason != "not-uri", (url, base, reason)
        return None
    assert rejection(url, base) == ""
    check_uri(result)
    assert normalize(result) == result, (url, base, result)
    assert normalize(result, "http://other.example/x/y") == result, (url, base, result)
    head, tail = split_origin(result)
    assert head == origin(result) and head + tail == result and tail.startswith("/")
    scheme, host, port = origin_parts(head)
    assert scheme in ("http", "https") and host and 0 < port < 65536
    return result


@EXAMPLES
@given(absolute_urls())
@example("http://a.test/q?http://example.org/é")
@example("http://a.test/p?http://example.org/a b")
def test_absolute_urls_give_uris_or_none(url: str) -> None:
    check_result(url, None)


@EXAMPLES
@given(links, bases)
@example("/q?http://example.org/é", "http://a.test/")
@example("/p?https://example.org/a b", "http://a.test/")
@example("?next=http://example.org/%zz%é", "http://a.test/x")
def test_links_against_bases_give_uris_or_none(url: str, base: str) -> None:
    check_result(url, base)


@EXAMPLES
@given(links)
def test_links_without_base(url: str) -> None:
    check_result(url, None)


@EXAMPLES
@given(st.one_of(absolute_urls(), st.text(max_size=40).map(lambda t: "http://a.test/" + t)))
def test_is_normal_only_for_fixed_points(url: str) -> None:
    for candidate in (url, normalize(url)):
        if candidate is not None and is_normal(candidate):
            assert normalize(candidate) == candidate, candidate


@EXAMPLES
@given(st.sampled_from(["http://a.test/p", "/p", "p", ""]), queries(1),
       st.sampled_from([None, *BASE_SOURCES]))
def test_queries_holding_urls(head: str, query: str, base: str | None) -> None:
    check_result(f"{head}?{query}", base)
