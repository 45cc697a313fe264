"""The demo web's odd-links site: the model's hand-written normalised URIs are what normalize gives
(issue 11)."""

from __future__ import annotations

from archiver.web.urls import normalize
from demoweb import DemoWeb, WebSpec
from demoweb.model import ODD_EXTERNAL, ODD_LINKS


def test_the_models_hand_written_truth_is_what_normalize_gives():
    web = DemoWeb(WebSpec(sites=1, pages_per_site=2, port=8080, trap=False, odd=True))
    home = web.origin("odd.demo") + "/"
    links = web.page_links(home)
    assert len(links) == 1 + len(ODD_LINKS) + len(ODD_EXTERNAL)
    for link in links:
        assert (normalize(link.raw, home) or "") == link.url, link
