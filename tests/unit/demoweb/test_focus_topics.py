"""The topical demo web (WebSpec.topical): sites on two topics with their own words, pages only,
topical sites linked mostly from topical pages, and `page_topic` as the harvest rate's truth; the
default web is untouched by the option."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

from archiver.web.textquery import folded_words
from demoweb import DemoWeb, WebSpec
from demoweb.content import TOPIC_WORDS, TOPICS
from demoweb.examples import write_examples
from demoweb.model import RELEVANT_TOPIC

SPEC = WebSpec(sites=16, pages_per_site=8, trap=False, topical=True)


def split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname or "", (parts.path or "/") + ("?" + parts.query if parts.query else "")


def test_a_third_of_the_sites_are_on_the_relevant_topic_and_write_its_words():
    web = DemoWeb(SPEC)
    assert TOPICS[0] == RELEVANT_TOPIC
    relevant, other = TOPICS
    assert [web.topic(h) for h in web.normal_hosts[:5]] == [other, relevant, other, other, relevant]
    for host in web.normal_hosts:
        words = Counter(folded_words(web.respond(host, "/").body.decode()))
        own = sum(words[w] for w in TOPIC_WORDS[web.topic(host)])
        (other,) = (t for t in TOPICS if t != web.topic(host))
        assert own > 50 and sum(words[w] for w in TOPIC_WORDS[other]) == 0


def test_a_topical_web_is_pages_only_and_page_topic_says_which():
    web = DemoWeb(SPEC)
    expected = web.expected("archiver")
    kinds = Counter(web.page_topic(url) for url in expected)
    assert kinds[TOPICS[0]] > 30 and kinds[TOPICS[1]] > 60
    for url in expected:
        host, target = split(url)
        reply = web.respond(host, target)
        if web.page_topic(url) is None:  # robots.txt, and the special site's few documents
            assert target.startswith("/robots") or not host.startswith("site-")
        else:
            assert reply.status == 200 and dict(reply.headers)["Content-Type"].startswith("text/html")
    assert web.page_topic("http://site-001.demo:8080/css/site.css") is None
    assert web.page_topic("http://robots500.demo:8080/") is None
    # No Crawl-delay site: site 7 is a normal site of its topic.
    assert len(web.pages("site-007.demo")) == SPEC.pages_per_site


def test_topical_sites_are_linked_mostly_from_topical_pages():
    web = DemoWeb(SPEC)
    pairs = Counter()
    for origin, url in web.external_links():
        target = split(url)[0]
        if target.startswith("site-"):
            pairs[web.topic(split(origin)[0]), web.topic(target)] += 1
    relevant, other = TOPICS
    into_relevant = pairs[relevant, relevant] + pairs[other, relevant]
    assert pairs[relevant, relevant] > 0.7 * into_relevant
    assert pairs[other, relevant] > 0 and pairs[relevant, other] > 0  # both topics reach both
    assert pairs[other, other] > pairs[other, relevant]


def test_the_option_leaves_the_default_web_alone():
    plain = DemoWeb(WebSpec(sites=4, pages_per_site=6))
    topical = DemoWeb(WebSpec(sites=4, pages_per_site=6, topical=True))
    assert plain.topic("site-001.demo") == "" and plain.page_topic("http://site-001.demo:8080/") is None
    page = plain.respond("site-001.demo", "/").body
    assert b"/css/site.css" in page and b"/css/site.css" not in topical.respond("site-001.demo", "/").body
    assert not any(w in folded_words(page.decode()) for w in TOPIC_WORDS["cooking"])


def test_examples_are_written_in_the_layout_focus_train_reads(tmp_path):
    write_examples(tmp_path, count=4)
    relevant = sorted((tmp_path / "relevant").iterdir())
    other = sorted((tmp_path / "other").iterdir())
    assert len(relevant) == len(other) == 4
    assert all(p.suffix == ".txt" for p in relevant + other)
    sky = Counter(folded_words(relevant[0].read_text()))
    assert sum(sky[w] for w in TOPIC_WORDS[RELEVANT_TOPIC]) > 5
    # Another seed than the web's: no example paragraph is a page's paragraph.
    page = DemoWeb(SPEC).respond("site-001.demo", "/").body.decode()
    assert not any(p in page for p in relevant[0].read_text().split("\n\n"))
