"""Scope rules (archiver.web.scope): a table of decisions, the rule parser's errors, properties,
and where the crawl's pure parts use them (the visit's routing, config loading, ``why``)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver import config
from archiver.config import CrawlConfig
from archiver.crawl.policy import VisitPolicy
from archiver.queues.decisions import Decision
from archiver.replay.why import Evidence, explain
from archiver.store.catalogkeys import surt_key
from archiver.web import urls
from archiver.web.scope import (
    Scope,
    ScopeDecision,
    ScopeError,
    UrlKeys,
    parse_rule,
    scope_of,
    surt_of,
)
from tests.support.fuzzing import examples
from tests.support.urlstrategies import absolute_urls

# (include, exclude, URL, decision, deciding rule)
TABLE = [
    # No rules: everything is in, and no rule decided.
    ((), (), "http://example.com/", "in", None),
    # SURT prefixes: the catalog's keys (no scheme, www. dropped, case folded).
    (("com,example)/news/",), (), "http://example.com/news/a.html", "in", "com,example)/news/"),
    (("com,example)/news/",), (), "https://www.Example.COM/News/", "in", "com,example)/news/"),
    (("com,example)/news/",), (), "http://www2.example.com/news/x", "in", "com,example)/news/"),
    (("com,example)/news/",), (), "http://example.com/newsroom", "out", None),
    (("com,example)/news/",), (), "http://example.com/", "out", None),
    # An IPv6 host's key is written bare: its first group is no rule kind.
    (("ffff:a000::)/",), (), "http://[ffff:a000::]/x", "in", "ffff:a000::)/"),
    (("ffff:a000::)/",), (), "http://[ffff:a000::1]/x", "out", None),
    (("COM,Example)/NEWS/",), (), "http://example.com/news/b", "in", "COM,Example)/NEWS/"),
    # Userinfo is not part of the key (nor of a normalised URL).
    (("com,example)/",), (), "http://user:pw@example.com/x", "in", "com,example)/"),
    # A host alone: "com,example)" is the host on its default ports, not another port or a
    # subdomain; "com,example," is the subdomains; without a closing character, a text prefix.
    (("com,example)",), (), "https://example.com/a", "in", "com,example)"),
    (("com,example)",), (), "http://example.com:8080/a", "out", None),
    (("com,example)",), (), "http://sub.example.com/a", "out", None),
    (("com,example:8080)",), (), "http://example.com:8080/a", "in", "com,example:8080)"),
    (("com,example,",), (), "http://sub.example.com/a", "in", "com,example,"),
    (("com,example,",), (), "http://example.com/a", "out", None),
    (("com,example",), (), "http://examplefoo.com/", "in", "com,example"),
    # IDN: keys and rules hold the ASCII form.
    (("example,xn--bcher-kva)/",), (), "http://bücher.example/", "in", "example,xn--bcher-kva)/"),
    # host: one host, any scheme and port; www. is another host.
    (("host:example.org",), (), "https://example.org:8443/x", "in", "host:example.org"),
    (("host:example.org",), (), "http://www.example.org/", "out", None),
    (("host:EXAMPLE.org.",), (), "http://example.org/", "in", "host:EXAMPLE.org."),
    (("host:bücher.example",), (), "http://xn--bcher-kva.example/", "in", "host:bücher.example"),
    (("host:127.0.0.1",), (), "http://127.0.0.1:8001/", "in", "host:127.0.0.1"),
    # domain: the host and its subdomains, not a longer name.
    (("domain:example.org",), (), "http://a.b.example.org/", "in", "domain:example.org"),
    (("domain:example.org",), (), "http://example.org/", "in", "domain:example.org"),
    (("domain:example.org",), (), "http://badexample.org/", "out", None),
    # re: the whole URL must match.
    (("re:https?://example\\.org/(news|blog)/.*",), (), "https://example.org/blog/1", "in",
     "re:https?://example\\.org/(news|blog)/.*"),
    (("re:example",), (), "http://example.org/", "out", None),
    # Exclude wins over include; the first matching exclude rule decides.
    (("domain:example.org",), ("re:.*/cal/.*", "com,example)/cal/"),
     "http://example.org/cal/2026/", "out", "re:.*/cal/.*"),
    (("domain:example.org",), ("com,example,www)/",), "http://www.example.org/", "in",
     "domain:example.org"),  # the key of www.example.org drops www: "org,example)/"
    ((), ("host:example.org",), "http://example.org/a", "out", "host:example.org"),
    ((), ("host:example.org",), "http://other.org/a", "in", None),
    # The first matching include rule decides.
    (("domain:org", "host:example.org"), (), "http://example.org/", "in", "domain:org"),
]


@pytest.mark.parametrize(("include", "exclude", "url", "word", "rule"), TABLE)
def test_decisions(include, exclude, url, word, rule):
    decision = scope_of(include, exclude).decide(urls.normalize(url))
    assert (decision.word, decision.rule) == (word, rule)
    assert decision.in_scope == (word == "in")


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"),
    ("   ", "empty"),
    ("foo:bar", "unknown kind 'foo:'"),
    ("http://example.com/", "no scheme"),
    ("re:", "no expression"),
    ("re:(a", "bad regular expression"),
    ("re:(a)\\1", "bad regular expression"),  # a backreference: not in RE2
    ("re:" + "a" * 1001, "longer than"),
    ("host:", "not a host name"),
    ("host:example.org:8080", "not a host name"),
    ("domain:example.org/news", "not a host name"),
    ("host:exa mple.org", "not a host name"),
    ("com example)/", "not a SURT prefix"),
    ("com,example)news", "not a SURT prefix"),
    ("com,example)/a b", "printable ASCII"),
    ("com,example)/\tx", "control characters"),
])
def test_broken_rules_are_refused_with_the_rule_quoted(text, says):
    with pytest.raises(ScopeError) as refused:
        parse_rule(text)
    assert says in str(refused.value)
    assert repr(text)[:40] in str(refused.value) or len(text) > 80


def test_a_broken_rule_is_a_config_error_naming_the_key_and_the_rule():
    with pytest.raises(config.ConfigError, match=r"scope\.exclude: scope rule 'host:a:1'"):
        config.from_dict({"scope": {"include": ["host:a.org"], "exclude": ["host:a:1"]}})
    with pytest.raises(config.ConfigError, match=r"scope\.include: expected a list of strings"):
        config.from_dict({"scope": {"include": "host:a.org"}})
    loaded = config.from_dict({"scope": {"include": ["domain:a.org"]}})
    assert loaded.scope.rules().decide("http://b.a.org/") == ScopeDecision(True, "domain:a.org")
    assert config.Config().scope.rules().everything


rule_texts = st.one_of(
    st.text(max_size=40),
    st.tuples(st.sampled_from(["re:", "host:", "domain:", "com,", "com,a)", "x:", "a:1"]),
              st.text(max_size=30)).map("".join),
    st.text(alphabet="com,exampl)/:0189-_.[]*?(|\\", max_size=30),
)


@settings(max_examples=examples(400), deadline=None)
@given(rule_texts)
def test_any_text_is_a_rule_or_a_clear_error(text):
    try:
        rule = parse_rule(text)
    except ScopeError as e:
        assert str(e).startswith("scope rule ")
    else:
        assert rule.text == text and rule.kind in ("surt", "host", "domain", "re")
        url = "http://example.com/a"
        assert isinstance(rule.matches(url, "example.com", UrlKeys(url)), bool)


normal_urls = absolute_urls().map(urls.normalize).filter(bool)


@settings(max_examples=examples(40), deadline=None)
@given(normal_urls, st.lists(rule_texts, max_size=3))
def test_a_url_matching_an_exclude_rule_is_always_out(url, includes):
    host = urls.origin_parts(urls.origin(url))[1]
    includes = [r for r in includes if _parses(r)]
    for exclude in (f"host:{host}", surt_of(url), "re:.*"):
        if not _parses(exclude):
            continue  # a host no rule can name (an IPv6 literal's brackets...)
        decision = scope_of(tuple(includes), ("host:nowhere.invalid", exclude)).decide(url)
        assert decision == ScopeDecision(False, exclude)


@settings(max_examples=examples(40), deadline=None)
@given(normal_urls)
def test_the_scope_reads_keys_as_the_catalog_writes_them(url):
    key = surt_key(url)
    assert surt_of(url) == key
    host_part = key.partition(")")[0]
    for rule in (key, host_part + ")", host_part):
        assert scope_of((rule,), ()).decide(url) == ScopeDecision(True, rule)


def _parses(text: str) -> bool:
    try:
        parse_rule(text)
    except ScopeError:
        return False
    return True


def test_the_visit_routes_out_of_scope_links_nowhere_on_or_off_the_site():
    scope = Scope([parse_rule("domain:example.org")], [parse_rule("org,example)/private/")])
    policy = VisitPolicy("http://example.org", CrawlConfig(), scope=scope)
    assert policy.route("http://example.org/a", 1) is None
    assert policy.route("http://example.org/private/a", 1) == "scope"
    assert policy.route("http://a.example.org/", 1) == "external"
    assert policy.route("http://other.org/", 1) == "scope"  # never spooled
    # A redirect to the scheme twin out of scope is not taken as an alias of the site.
    policy = VisitPolicy("http://example.org", CrawlConfig(),
                         scope=Scope(exclude=[parse_rule("re:https:.*")]))
    assert policy.route("https://example.org/", 0, redirect=True) == "scope"
    assert "https://example.org" not in policy.local
    policy.reconfigure(CrawlConfig())  # a reload without rules: everything in
    assert policy.route("https://example.org/", 0, redirect=True) is None


WHY_URL = "http://a.test/cal/1"


def _evidence(**changes: object) -> Evidence:
    base = Evidence(WHY_URL, "http://a.test", "20261124120000", [], [], None, None, None, 2048)
    return dataclasses.replace(base, **changes)


def test_why_names_the_rule_logged_or_in_force():
    logged = [Decision(1_790_000_000.0, "scope", WHY_URL,
                       "rule re:.*/cal/.*, linked from http://a.test/")]
    answer = explain(_evidence(decisions=logged))
    assert answer.kind == "scope" and "rule re:.*/cal/.*" in answer.reason
    assert answer.facts["decision"]["kind"] == "scope"
    answer = explain(_evidence(scope=ScopeDecision(False, "host:a.test")))
    assert answer.kind == "scope" and "rule host:a.test" in answer.reason
    assert answer.facts["scope_rule"] == "host:a.test"
    answer = explain(_evidence(scope=ScopeDecision(False, None)))
    assert answer.kind == "scope" and "no scope.include rule" in answer.reason
    assert explain(_evidence()).kind == "never-linked"
