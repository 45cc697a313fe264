"""``archiver why`` reads the records of the site that crawls a URL, which may hold it under its
scheme twin (``http://h`` redirected to ``https://h`` keeps ``https://h`` URLs in its queue)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from archiver.config import load
from archiver.replay.why import explain, gather
from archiver.stores import EmbeddedStores

AT = "20991231235959"


def test_a_url_of_the_scheme_twin_is_found_in_the_queue_of_the_site_that_crawls_it(tmp_path: Path):
    path = tmp_path / "archiver.toml"
    path.write_text('[archive]\nroot = "archive"\n')
    config = load(path)
    stores = EmbeddedStores(config)
    with contextlib.closing(stores.site_queue(0)) as sites:
        sites.add("http://a.test")
    queues = stores.crawl_queues()
    with queues.open("http://a.test") as queue:
        queue.add("http://a.test/", 0)
        queue.add("https://a.test/later.html", 1)
        queue.decide("https://a.test/deep.html", "max-depth", "https://a.test/")
        queue.sync()
    queues.close()
    with contextlib.closing(stores.catalog()) as catalog:
        waiting = explain(gather(stores, catalog, stores.warcs(), config,
                                 "https://a.test/later.html", AT))
        skipped = explain(gather(stores, catalog, stores.warcs(), config,
                                 "https://a.test/deep.html", AT))
        elsewhere = explain(gather(stores, catalog, stores.warcs(), config,
                                   "https://b.test/later.html", AT))
    assert waiting.kind == "queued" and "http://a.test is waiting for a crawler" in waiting.reason
    assert waiting.facts["queue"] == {"depth": 1, "done": False, "ahead": 1, "pending": 2}
    assert skipped.kind == "max-depth" and "linked from https://a.test/" in skipped.reason
    assert elsewhere.kind == "never-linked" and "its site https://b.test" in elsewhere.reason
