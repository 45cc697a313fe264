"""Sideways traps: a calendar inside a real site is bounded by the per-shape budget, and every real
page of that site is still captured."""

from __future__ import annotations

import json

from archiver.store.status import summary_line
from demoweb import WebSpec
from demoweb.model import CALENDAR_SITE
from tests.support.crawls import Crawled, captures

SPEC = WebSpec(sites=3, pages_per_site=25, port=0, trap=True)


async def crawl(tmp_path, **crawl: object) -> Crawled:
    crawled = Crawled(tmp_path, SPEC, min_rest=0.0, **crawl)
    await crawled.run()
    return crawled


async def test_a_calendar_costs_its_shape_budget_and_no_real_page(tmp_path):
    budget = 10
    crawled = await crawl(tmp_path, max_per_shape=budget)
    web = crawled.web
    host = web.normal_hosts[CALENDAR_SITE]
    origin = web.origin(host)
    months = [r for r in crawled.server.log if r.host == host and "/events/" in r.target]
    # Every month page leads only to more months (self-similar): after `budget` of them the
    # shape is spent, and the months queued by then (one per direction) are still fetched.
    assert budget <= len(months) <= budget + 2
    caps = captures(crawled.root)
    real = {u for u in web.expected("archiver") if u.startswith(origin + "/")}
    assert real and real <= set(caps)                  # every real page of that site
    status = json.loads((crawled.root / "state" / "crawl-0.json").read_text())
    assert status["skipped"]["shape"] >= 1
    assert "shape:" in summary_line(status).partition("skipped=")[2]   # the progress line


async def test_without_the_budget_the_calendar_runs_to_max_depth(tmp_path):
    crawled = await crawl(tmp_path, max_per_shape=10**6, max_depth=30)
    host = crawled.web.normal_hosts[CALENDAR_SITE]
    months = [r for r in crawled.server.log if r.host == host and "/events/" in r.target]
    assert len(months) >= 2 * 30 - 2                  # what the budget saves


async def test_pages_that_find_other_shapes_are_not_a_trap(tmp_path):
    # With a budget of 1, the real pages of the demo web (numbered pages, articles, docs, blog
    # posts, lists: shapes shared by many pages) are all still captured: pages that lead to
    # other shapes, and leaves, never count against a shape.
    crawled = await crawl(tmp_path, max_per_shape=1)
    web = crawled.web
    caps = set(captures(crawled.root))
    missing = {u for u in web.expected("archiver") if u not in caps}
    assert not missing, sorted(missing)[:10]
