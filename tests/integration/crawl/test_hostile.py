"""Hostile servers cost bounded time and never stop the other sites."""

from __future__ import annotations

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from demoweb import WebSpec, start_demo
from tests.support.crawls import captures, load, records, warc_files, warcio_check, write_config

TOTAL = 1.5


async def test_hostile_site_is_recorded_and_the_crawl_goes_on(tmp_path):
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, WebSpec(sites=3, pages_per_site=8, port=0,
                                                        trap=False, hostile=True))
        config = load(write_config(tmp_path, web, connect_timeout=1.0, first_byte_timeout=0.8,
                                   total_timeout=TOTAL, max_response_size=256 * 1024,
                                   max_header_size=16 * 1024, max_decoded_size=1024 * 1024))
        enqueue_seeds(config, 0, [o + "/" for o in web.origins()])
        with trio.fail_after(60):  # a guard against a hang, not a speed target
            await Crawler(config, until_idle=True).run()
        nursery.cancel_scope.cancel()

    caps = captures(config.root)
    hostile = web.origin("hostile.demo")
    # Every normal URL of every site is there, the hostile site's own normal pages included.
    assert web.expected("archiver") - {hostile + "/robots.txt"} <= set(caps) | {
        u for u in web.expected("archiver") if "robots500" in u}
    truncated = {r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers.get_header("WARC-Truncated")
                 for r, _ in records(config.root)}
    sizes = {r.rec_headers.get_header("WARC-Target-URI"): len(p) for r, p in records(config.root)}
    assert truncated[hostile + "/drip"] == "time"
    assert truncated[hostile + "/endless"] == "length"
    assert sizes[hostile + "/endless"] == 256 * 1024
    assert truncated[hostile + "/lie"] == "disconnect"
    assert truncated[hostile + "/reset"] == "disconnect"
    assert truncated[hostile + "/bomb"] == "length"          # 1 MiB on the wire, capped at 256 KiB
    # No response head: logged as failures, never written as responses.
    for path in ("/hang", "/bigheaders", "/badstatus"):
        assert hostile + path not in caps
    assert warcio_check(warc_files(config.root)).returncode == 0
    # Each hostile URL was asked for once: failures are not hammered.
    asked = [r.target for r in server.log if r.host == "hostile.demo"]
    for path in ("/drip", "/hang", "/endless", "/bigheaders", "/badstatus", "/reset", "/bomb"):
        assert asked.count(path) == 1, (path, asked)
