"""archiver.browser.render's pure parts: the rendered links kept, and the settings' validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.browser.render import RenderSettings, rendered_links
from archiver.web.urls import normalize

BASE = "http://modern.test/app/page.html"


def test_only_http_urls_are_kept_resolved_normalised_and_once() -> None:
    links = rendered_links(BASE, [
        "http://modern.test/a#part", "http://MODERN.test/a", "mailto:someone@example.org",
        "javascript:void 0", "data:image/png;base64,AAAA", "https://other.test/b", "blob:x",
    ], ["small.png 1x, /large.png 2x", "data:image/png;base64,AA,AA 1x, wide.png 640w"])
    assert links == ["http://modern.test/a", "https://other.test/b", "http://modern.test/app/small.png",
                     "http://modern.test/large.png", "http://modern.test/app/wide.png"]


def test_links_are_bounded() -> None:
    urls = [f"http://modern.test/{number}" for number in range(100)]
    assert rendered_links(BASE, urls, [], most=10) == urls[:10]


@given(st.lists(st.text(max_size=40), max_size=20), st.lists(st.text(max_size=60), max_size=5),
       st.integers(min_value=1, max_value=30))
def test_every_link_is_a_normal_http_url_and_unique(urls: list[str], srcsets: list[str], most: int) -> None:
    links = rendered_links(BASE, urls, srcsets, most)
    assert len(links) == len(set(links)) <= most
    assert all(normalize(link) == link and link.startswith(("http://", "https://")) for link in links)


@pytest.mark.parametrize(("change", "named"), [
    ({"page_timeout": 0}, "page_timeout"),
    ({"max_scrolls": -1}, "max_scrolls"),
    ({"viewport": (0, 900)}, "viewport"),
    ({"viewport": (1280.5, 900)}, "viewport"),
    ({"viewport": (1280, 100_000)}, "viewport"),
    ({"quiet": -0.1}, "quiet"),
    ({"quiet": 5, "page_timeout": 5}, "quiet"),
    ({"screenshot_format": "jpeg"}, "screenshot_format"),
    ({"max_resources": 0}, "max_resources"),
])
def test_settings_out_of_bounds_say_which(change: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=f"render setting {named} = "):
        RenderSettings(**change)  # type: ignore[arg-type]


def test_the_default_settings_are_valid() -> None:
    assert RenderSettings().screenshot_format == "png"
