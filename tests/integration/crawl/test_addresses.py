"""Per-address politeness: names sharing one address are never fetched at the same moment."""

from __future__ import annotations

import itertools

import trio

from demoweb import WebSpec
from tests.support.crawls import Crawled, captures


def test_sites_on_one_address_take_turns(tmp_path):
    crawled = Crawled(tmp_path, WebSpec(sites=4, pages_per_site=6, port=0, trap=False),
                      connections_per_address=1, min_rest=0.0, max_rest=0.0)
    trio.run(crawled.run)
    requests = sorted(crawled.server.log, key=lambda r: r.start)
    hosts = {r.host for r in requests}
    assert len(hosts) >= 5                                  # several names, one address
    for before, after in itertools.pairwise(requests):
        assert after.start >= before.end, (before.host, before.target, after.host, after.target)
    expected = crawled.web.expected("archiver")
    assert set(captures(crawled.root)) >= {u for u in expected if "robots500" not in u}
    # Turns were taken between sites, not one whole site after another only.
    switches = sum(a.host != b.host for a, b in itertools.pairwise(requests))
    assert switches > len(hosts)
