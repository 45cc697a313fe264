"""The worked example of docs/configuration.md, config/examples/collection.toml: it loads, and its
rules, sheets and policies do what its comments and that page say."""

from datetime import UTC, datetime

import pytest

from archiver import config
from archiver.web import urls
from archiver.web.sheets import sheet_for
from tests.support.repo import ROOT

EXAMPLE = ROOT / "config" / "examples" / "collection.toml"


@pytest.fixture(scope="module")
def collection() -> config.Config:
    return config.load(EXAMPLE)


def test_the_configuration_page_shows_the_example_as_it_is():
    assert EXAMPLE.read_text() in (ROOT / "docs" / "configuration.md").read_text()


@pytest.mark.parametrize("url, decision, rule", [
    ("https://www.dailyherald.example/news/2026/11/24/budget.html", True, "example,dailyherald)/news/"),
    ("http://dailyherald.example/news/", True, "example,dailyherald)/news/"),
    ("https://www.dailyherald.example/sport/", False, None),
    ("https://www.dailyherald.example/news/calendar/2026/11/", False, "re:.*/(calendar|agenda)/.*"),
    ("https://citypaper.example/news/a.html?id=4&print=1", False, "re:.*[?&]print=1(&.*)?"),
    ("https://citypaper.example/news/a.html?print=10", True, "example,citypaper)/news/"),
    ("https://img.citypaper.example/2026/front.jpg", True, "domain:img.citypaper.example"),
    ("https://www.morningpost.example/News/x", True, "example,morningpost)/news/"),
    ("https://smallmuseum.example/collection/vase-12", True, "domain:smallmuseum.example"),
    ("https://shop.smallmuseum.example/", True, "domain:smallmuseum.example"),
    ("https://www.ministry.gov.example/press/", True, "host:www.ministry.gov.example"),
    ("https://ministry.gov.example/press/", False, None),
    ("https://unrelated.example/news/", False, None),
])
def test_scope_of_the_collection(collection, url, decision, rule):
    made = collection.scope.rules().decide(urls.normalize(url))
    assert (made.in_scope, made.rule) == (decision, rule)


def test_policies_of_the_collection(collection):
    assert collection.scope.max_hops == 1
    assert collection.plugins.enable == ("language",)
    assert collection.crawl.revisit_interval == 86400.0 and collection.crawl.dedupe == "digest"
    assert collection.crawl.sites_per_process == 8


def at_utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_sheets_of_the_collection(collection):
    museum = sheet_for(collection.sheets, "https://smallmuseum.example")
    assert museum is not None
    rests = config.site_crawl(collection.crawl, museum)
    assert (rests.min_rest, rests.max_rest) == (2 * collection.crawl.min_rest,
                                               2 * collection.crawl.max_rest)
    noon = at_utc("2026-11-24T12:00:00")
    assert museum.wait(noon, 1999) is None and museum.wait(noon, 2000) is not None

    ministry = sheet_for(collection.sheets, "https://www.ministry.gov.example")
    assert ministry is not None and ministry is not museum
    # Paris is UTC+1 in November: 12:00 UTC is 13:00 there, 21:30 UTC is 22:30.
    assert not ministry.is_open(noon) and ministry.is_open(at_utc("2026-11-24T21:30:00"))
    assert ministry.next_opening(noon) == at_utc("2026-11-24T21:00:00")
    assert config.site_crawl(collection.crawl, ministry) == collection.crawl

    assert sheet_for(collection.sheets, "https://www.dailyherald.example") is None
