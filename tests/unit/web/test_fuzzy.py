"""Fuzzy matching rules (archiver.web.fuzzy): what the shipped rules match and leave apart, the
operator's rules from their tables, and properties over any URL: a rule never maps a URL to another
host, and reducing is idempotent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.web.fuzzy import DEFAULT_RULES, FuzzyError, FuzzyRule, make_rule, match_key, reduce, stem

RULES = {rule.name: rule for rule in DEFAULT_RULES}


def matches(rule: str, asked: str, captured: str) -> bool:
    key = match_key(RULES[rule], asked)
    return key is not None and key == match_key(RULES[rule], captured)


@pytest.mark.parametrize(("rule", "asked", "captured"), [
    ("epoch-ms", "http://example.org/api/list.json?_=1764241000000",
     "http://example.org/api/list.json?_=1764240000001"),
    ("epoch-ms", "http://example.org/a?page=2&_=1", "http://example.org/a?_=2&page=2"),
    ("jsonp-callback", "http://example.org/feed?callback=jQuery3600_1&_=17",
     "http://example.org/feed?_=99&callback=jQuery3600_2"),
    ("cache-buster", "http://example.org/app.js?ver=6.4.2", "http://example.org/app.js?ver=6.3"),
    ("cache-buster", "https://example.org/app.css?v=2&t=9", "http://example.org/app.css?t=1&v=1"),
    ("cache-buster", "http://example.org/app.css", "http://example.org/app.css?cachebust=7"),
    ("session-id", "http://example.org/cart?PHPSESSID=ab12&item=3", "http://example.org/cart?item=3&phpsessid=zz"),
    ("session-id", "http://example.org/shop;jsessionid=AB12/item?x=1", "http://example.org/shop;jsessionid=CD/item?x=1"),
])
def test_a_shipped_rule_matches_what_scripts_change(rule: str, asked: str, captured: str) -> None:
    assert matches(rule, asked, captured)


@pytest.mark.parametrize(("asked", "captured"), [
    ("http://example.org/a?_=1&page=2", "http://example.org/a?_=1&page=3"),  # another page
    ("http://example.org/a?_=1", "http://example.org/b?_=1"),  # another path
    ("http://example.org/a?_=1", "http://example.net/a?_=1"),  # another host
    ("http://example.org/a?_=1", "http://sub.example.org/a?_=1"),
    ("http://example.org/a?id=1", "http://example.org/a?id=2"),  # no rule ignores id
])
def test_no_shipped_rule_matches_another_resource(asked: str, captured: str) -> None:
    assert not any(matches(rule, asked, captured) for rule in RULES)


def test_an_operator_rule_applies_to_its_host_and_path_only() -> None:
    rule = make_rule({"name": "search", "host": "example.org", "path": "/search", "keep": ["q"]})
    assert rule == FuzzyRule("search", keep=frozenset({"q"}), host="example.org", path="/search")
    assert match_key(rule, "http://example.org/search?q=x&utm=1") == match_key(rule, "http://example.org/search?q=x")
    assert match_key(rule, "http://example.org/search?q=x") != match_key(rule, "http://example.org/search?q=y")
    assert match_key(rule, "http://example.org/other?q=x") is None
    assert match_key(rule, "http://example.net/search?q=x") is None
    assert match_key(rule, "http://badexample.org/search?q=x") is None
    assert match_key(rule, "http://a.example.org/search?q=x&z=1") == "a.example.org/search?q=x"


@pytest.mark.parametrize(("table", "message"), [
    ({"ignore": ["a"]}, "name: expected"),
    ({"name": "Bad Name", "ignore": ["a"]}, "name: expected"),
    ({"name": "r", "ignore": ["a"], "keep": ["b"]}, "either ignore"),
    ({"name": "r"}, "either ignore"),
    ({"name": "r", "ignore": []}, "name at least one"),
    ({"name": "r", "ignore": "a"}, "ignore: expected a list"),
    ({"name": "r", "keep": [1]}, "keep: expected a list"),
    ({"name": "r", "path": "search", "ignore": ["a"]}, "path: expected"),
    ({"name": "r", "host": "http://x.org", "ignore": ["a"]}, "host: expected"),
    ({"name": "r", "ignore": ["a"], "colour": "red"}, "colour: unknown key"),
])
def test_a_malformed_rule_is_refused_with_one_line(table: dict[str, object], message: str) -> None:
    with pytest.raises(FuzzyError, match=message) as info:
        make_rule(table)
    assert "\n" not in str(info.value)


def test_the_stem_is_what_every_match_starts_with() -> None:
    assert stem("http://example.org/a;jsessionid=1/b?x=1#f") == "http://example.org/a"
    assert stem("http://example.org/") == "http://example.org/"
    assert stem("http://example.org/a.json?_=1") == "http://example.org/a.json"


parameter = st.sampled_from(["_", "v", "ver", "callback", "PHPSESSID", "jsessionid", "q", "id", "", "a=b"])
value = st.text(alphabet="abcXYZ019_=;%.-", max_size=6)
hosts = st.sampled_from(["example.org", "EXAMPLE.org", "a.example.org", "example.net", "xn--caf-dma.test",
                         "127.0.0.1", "[::1]", "example.org:8080"])
segments = st.lists(st.text(alphabet="ab/;=._-%", max_size=8), max_size=3)


@st.composite
def urls(draw: st.DrawFn) -> str:
    host = draw(hosts)
    path = "/" + "/".join(draw(segments))
    query = "&".join(f"{k}={v}" for k, v in draw(st.lists(st.tuples(parameter, value), max_size=4)))
    return f"{draw(st.sampled_from(['http', 'https']))}://{host}{path}" + (f"?{query}" if query else "")


rules = st.one_of(
    st.sampled_from(DEFAULT_RULES),
    st.builds(lambda names, keep, host: FuzzyRule("r", ignore=frozenset() if keep else frozenset(names),
                                                  keep=frozenset(names) if keep else None, host=host),
              st.lists(parameter.map(str.lower), max_size=3), st.booleans(),
              st.sampled_from(["", "example.org"])),
)


def host_of(url: str) -> str:
    return url.partition("://")[2].split("/")[0].lower()


@given(rules, urls(), urls())
def test_a_rule_never_maps_a_url_to_another_host(rule: FuzzyRule, asked: str, captured: str) -> None:
    key = match_key(rule, asked)
    if key is not None and key == match_key(rule, captured):
        assert host_of(asked) == host_of(captured)
    reduced = reduce(rule, asked)
    assert reduced is None or host_of(reduced) == host_of(asked)


@given(rules, urls())
def test_reducing_is_idempotent(rule: FuzzyRule, url: str) -> None:
    reduced = reduce(rule, url)
    if reduced is not None:
        assert reduce(rule, reduced) == reduced
