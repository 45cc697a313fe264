"""One bad URL costs one URL: an error while handling a page never stops its site."""

from __future__ import annotations

import json
import logging

from archiver.crawl import routing
from archiver.store.bundles import BundleWriter
from archiver.web import pagelinks
from tests.support.crawls import captures, warc_files, warcio_check
from tests.support.onesite import OneSite, crawl_site


async def test_a_url_whose_handling_raises_costs_only_that_url(tmp_path, monkeypatch, caplog):
    real_links, real_write = pagelinks.links_if_small, BundleWriter.pack_exchange

    def links(url, *args, **kwargs):
        if url.endswith("/p3.html"):
            raise RuntimeError("extraction bug")
        return real_links(url, *args, **kwargs)

    def write(self, *, url, **kwargs):
        if url.endswith("/p5.html"):
            raise ValueError("odd response")
        return real_write(self, url=url, **kwargs)

    monkeypatch.setattr(routing.pagelinks, "links_if_small", links)
    monkeypatch.setattr(BundleWriter, "pack_exchange", write)
    one = OneSite(pages=8)
    with caplog.at_level(logging.ERROR, logger="archiver"):
        root = await crawl_site(tmp_path, one)

    assert set(captures(root)) == one.page_urls() - {one.origin + "/p5.html"} | {
        one.origin + "/robots.txt"}
    failed = [r for r in caplog.records if r.getMessage() == "url-failed"]
    assert [r.fields["url"] for r in failed] == [one.origin + "/p3.html", one.origin + "/p5.html"]
    assert all(r.exc_info for r in failed)                       # with the traceback
    assert not [r for r in caplog.records if r.getMessage() == "site-crashed"]
    status = json.loads((root / "state" / "crawl-0.json").read_text())
    assert status["errors"]["internal"] == 2
    assert status["sites"].get("revisit") == 1                   # finished (a revisit due), not retried
    assert warcio_check(warc_files(root)).returncode == 0


async def test_a_run_of_internal_errors_ends_the_visit(tmp_path, monkeypatch):
    def links(url, *args, **kwargs):
        raise RuntimeError("every page breaks")

    monkeypatch.setattr(routing.pagelinks, "links_if_small", links)
    one = OneSite(pages=8)
    root = await crawl_site(tmp_path, one, max_internal_errors=1, site_retries=1)
    pages = [h.target for h in one.hits if h.target != "/robots.txt"]
    assert pages == ["/"]                                        # then the visit ended
    status = json.loads((root / "state" / "crawl-0.json").read_text())
    assert status["errors"]["internal"] == 1
    assert status["sites"].get("done", 0) == 0
