"""A focused crawl (crawl.focus) on a topical demo web: its harvest rate (the share of relevant
pages among the first pages fetched, by the web's own truth) is clearly above an unfocused
crawl's from the same seeds, and every page it captured carries its relevance label."""

from __future__ import annotations

import contextlib

from archiver import config
from archiver.crawl.focus import LABEL
from archiver.stores import open_stores
from demoweb import DemoWeb, WebSpec
from demoweb.model import RELEVANT_TOPIC
from tools.bench_focus import harvest, train_model

# Few small sites, two slots, 50 ms rests: the links batch fills the site queue faster than two
# slots empty it, so which site comes next is the site queue's choice.
SPEC = WebSpec(sites=24, pages_per_site=4, port=0, trap=False, topical=True)
FIRST = 32


async def test_a_focused_crawl_harvests_clearly_more_relevant_pages(tmp_path):
    model = train_model(tmp_path, examples=10)
    unfocused = await harvest(tmp_path / "unfocused", SPEC, FIRST, model=None)
    focused = await harvest(tmp_path / "focused", SPEC, FIRST, model=model)
    assert len(unfocused.pages) == len(focused.pages) == FIRST
    assert focused.rate >= unfocused.rate + 0.25, (unfocused.rate, focused.rate)

    cfg = config.load(focused.root.parent / "archiver.toml")
    with contextlib.closing(open_stores(cfg).catalog()) as catalog:
        captured = {c.url: c.label_map for c in catalog.iter_all() if c.mime == "text/html"}
    scores = {url: float(labels[LABEL]) for url, labels in captured.items() if labels}
    assert set(focused.pages) <= set(scores)  # every page fetched was scored
    web = DemoWeb(SPEC)  # the truth: the topic of each page's site
    relevant = [s for url, s in scores.items() if web.page_topic(url) == RELEVANT_TOPIC]
    other = [s for url, s in scores.items() if web.page_topic(url) != RELEVANT_TOPIC]
    assert relevant and other and min(relevant) > 0.5 > max(other)
    # The unfocused crawl labelled nothing.
    cfg = config.load(unfocused.root.parent / "archiver.toml")
    with contextlib.closing(open_stores(cfg).catalog()) as catalog:
        assert not any(c.labels for c in catalog.iter_all())

