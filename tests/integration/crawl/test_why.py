"""``archiver why`` and replay's "not in the archive" page after real crawls of the demo web: a
URL of each kind the crawl can leave uncaptured, answered from the archive's own records (the
catalog, the decision log, robots.txt captures, the site and crawl queues)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import quote, urlsplit

import trio

from archiver import cli
from archiver.config import Config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.store.embedded.catalog import Catalog
from demoweb import DemoWeb, WebSpec, start_demo
from tests.support.crawls import load, write_config
from tests.support.rawhttp import get
from tests.support.replayarchive import serving
from tests.support.repo import ARCHIVER, archiver_here

AGENT = "archiver"
SPEC = WebSpec(sites=3, pages_per_site=6, port=0, trap=True, hostile=True)
# Short timeouts for the hostile site, and a small shape budget for the trap's calendar.
QUICK = {"first_byte_timeout": 0.8, "total_timeout": 1.5, "max_response_size": 256 * 1024, "max_per_shape": 4}


async def crawl(directory: Path, spec: WebSpec, hosts: list[str] | None = None,
                **settings: object) -> tuple[DemoWeb, Config]:
    """Crawl ``hosts`` (every host of the web by default) until idle."""
    directory.mkdir()
    async with trio.open_nursery() as nursery:
        web, _server = await start_demo(nursery, spec)
        config = load(write_config(directory, web, **{**QUICK, **settings}))
        enqueue_seeds(config, 0, [web.origin(host) + "/" for host in hosts or web.hosts])
        await Crawler(config, until_idle=True).run()
        nursery.cancel_scope.cancel()
    return web, config


def why(config: Config, url: str, *options: str, process: bool = False) -> dict:
    """``archiver why URL --json``, which exits 0 when captured and 1 when not: in a process of
    its own with ``process``, else through the same entry point in this one (much quicker for
    the many URLs asked)."""
    argv = ["why", url, "--json", *options, "--config", str(config.path)]
    if process:
        done = subprocess.run([*ARCHIVER, *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode in (0, 1), done.stderr
        code, out = done.returncode, done.stdout
    else:
        umask = os.umask(0)
        try:
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                code = cli.main(argv)
        finally:
            os.umask(umask)
        out = printed.getvalue()
    answer = json.loads(out)
    assert code == (0 if answer["captured"] else 1)
    assert answer["url"] == url
    return answer


def captured_urls(config: Config) -> set[str]:
    with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
        return {c.url for c in catalog.iter_all()}


async def test_why_answers_for_each_kind_of_url_a_crawl_leaves_uncaptured(tmp_path):
    web, config = await crawl(tmp_path / "web", SPEC)
    captured = captured_urls(config)
    home = web.origin(web.normal_hosts[0]) + "/"

    # Captured: when, and which record.
    answer = why(config, home, process=True)
    assert answer["kind"] == "captured" and answer["capture"]["url"] == home
    assert f"{answer['capture']['filename']}:{answer['capture']['offset']}" in answer["reason"]
    assert why(config, home, "--at", "2000")["kind"] == "later"

    # robots.txt: the line that excluded it, from the robots.txt capture in force.
    excluded = sorted(url for url in web.disallowed(AGENT)
                      if urlsplit(url).hostname in web.normal_hosts and url not in captured)
    assert excluded
    for url in excluded:
        answer = why(config, url)
        assert answer["kind"] == "robots", answer
        robots_url = web.origin(urlsplit(url).hostname or "") + "/robots.txt"
        body = web.respond(urlsplit(url).hostname or "", "/robots.txt").body.decode()
        robots = answer["robots"]
        assert robots["url"] == robots_url and robots["allowed"] is False
        assert body.splitlines()[robots["line"] - 1] == robots["rule"]
        assert robots["rule"].lower().startswith("disallow")

    # A site whose robots.txt answers 500 waits out its failures with nothing fetched.
    robots500 = web.origin(web.special_hosts["robots500"]) + "/"
    answer = why(config, robots500)
    assert answer["kind"] in ("site-retry", "site-deferred")
    assert "robots.txt unavailable" in answer["reason"]

    # Guards: a trap of repeated segments, the shape budget of an endless calendar, the length.
    trap = web.origin(web.special_hosts["trap"])
    answer = why(config, trap + "/a/a/a/a/")
    assert answer["kind"] == "trap" and answer["decision"]["detail"] == trap + "/a/a/a/"
    months = sorted(url for url in captured if re.fullmatch(re.escape(trap) + r"/cal/\d{4}/\d\d/", url))
    year, month = map(int, months[0].split("/")[-3:-1])
    before = trap + (f"/cal/{year}/{month - 1:02d}/" if month > 1 else f"/cal/{year - 1}/12/")
    assert before not in captured
    answer = why(config, before)
    assert answer["kind"] == "shape" and "crawl.max_per_shape" in answer["reason"]
    assert why(config, home + "x" * config.crawl.max_url_length)["kind"] == "url-too-long"

    # A fetch error: what failed, and when.
    hostile = web.origin(web.special_hosts["hostile"])
    answer = why(config, hostile + "/badstatus")
    assert answer["kind"] == "fetch-error" and "status line" in answer["reason"]

    # Never linked: on a site the crawl knows, and on one it never heard of.
    assert why(config, home + "never-linked.html")["kind"] == "never-linked"
    unknown = why(config, "http://unknown.demo/")
    assert unknown["kind"] == "never-linked" and "No crawler has queued" in unknown["reason"]

    # The text form says the same in one line.
    done = archiver_here("why", excluded[0], "--config", str(config.path))
    assert done.returncode == 1 and done.stdout.decode().startswith(f"{excluded[0]} at ")
    assert b"robots.txt excluded it: line" in done.stdout

    # Replay's "not in the archive" page gives the same answer, and links the robots.txt history.
    async with serving(config) as running:
        status, _, page = await get(running.content_at, "/web/2026/" + quote(excluded[0], safe=":/"))
        assert status == 404 and b"Why not?" in page
        assert why(config, excluded[0])["robots"]["rule"].encode() in page
        assert f"/robots/{urlsplit(excluded[0]).netloc}?at=".encode() in page
        status, _, page = await get(running.app_at, f"/web/{hostile}/badstatus")  # the TimeGate
        assert status == 404 and b"the fetch failed at" in page


async def test_why_names_the_depth_guard_and_the_page_limit(tmp_path):
    host = "site-000." + SPEC.domain
    web, shallow = await crawl(tmp_path / "shallow", SPEC, [host], max_depth=1)
    origin = web.origin(host)
    deeper = {url for url in web.expected(AGENT, max_depth=2) - web.expected(AGENT, max_depth=1)
              if url.startswith(origin + "/")}
    assert deeper
    for url in deeper:
        answer = why(shallow, url)
        assert answer["kind"] == "max-depth" and "crawl.max_depth = 1" in answer["reason"]

    # The visit ends at its page limit: what it queued waits, what it never read is unlinked.
    web, limited = await crawl(tmp_path / "limited", SPEC, [host], max_pages=3)
    origin = web.origin(host)
    left = {url for url in web.expected(AGENT) if url.startswith(origin + "/")} - captured_urls(limited)
    answers = [why(limited, url) for url in sorted(left)]
    assert {a["kind"] for a in answers} == {"limit", "never-linked"}
    for answer in answers:
        if answer["kind"] == "limit":
            assert "max-pages guard (crawl.max_pages = 3)" in answer["reason"]
            assert answer["queue"]["done"] is False


async def test_why_answers_about_the_exact_url_not_its_catalog_key_twin(tmp_path):
    """A page captured as .../post-3/ and a URL never fetched, .../post-3, share a SURT key (it
    drops the trailing slash): asked about the second, why names the first, and says not captured."""
    spec = WebSpec(sites=1, pages_per_site=4, port=0, trap=False)
    _, config = await crawl(tmp_path / "web", spec)
    captured = captured_urls(config)
    slashed = next(url for url in sorted(captured) if url.endswith("/") and url.count("/") > 3)
    bare = slashed.removesuffix("/")
    assert bare not in captured
    assert why(config, slashed)["captured"]
    answer = why(config, bare)
    assert not answer["captured"] and answer["key_twin"]["url"] == slashed
    assert f"Another URL under the same catalog key was captured: {slashed}" in answer["reason"]
