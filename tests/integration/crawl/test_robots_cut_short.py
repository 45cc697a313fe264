"""A robots.txt that did not arrive whole is unavailable (RFC 9309 §2.3.1.4): the site waits."""

from __future__ import annotations

import json
import logging

from tests.support.onesite import Answer, OneSite, crawl_site

ROBOTS = b"User-agent: *\nDisallow: /p1.html\n" + b"# padding\n" * 8


async def test_robots_txt_slower_than_the_total_timeout_is_unavailable(tmp_path, caplog):
    def drip(target: str, now: float) -> Answer | None:
        return Answer(200, ROBOTS, drip=0.05) if target == "/robots.txt" else None

    one = OneSite(pages=3, gate=drip)
    with caplog.at_level(logging.WARNING, logger="archiver"):
        root = await crawl_site(tmp_path, one, total_timeout=1.0, site_retries=1)
    assert {h.target for h in one.hits} == {"/robots.txt"}      # no page under partial rules
    reasons = [r.fields["reason"] for r in caplog.records if r.getMessage() == "robots-unavailable"]
    assert reasons and all(reason == "cut short (time)" for reason in reasons)
    status = json.loads((root / "state" / "crawl-0.json").read_text())
    assert status["sites"].get("done", 0) == 0


async def test_robots_txt_that_arrives_whole_is_obeyed(tmp_path):
    one = OneSite(pages=3, robots=ROBOTS)
    await crawl_site(tmp_path, one, total_timeout=1.0)
    assert {h.target for h in one.hits} == {"/robots.txt", "/", "/p2.html", "/p3.html"}
