"""A whole crawl of a demo web, checked against the truth the web itself knows."""

from __future__ import annotations

import itertools
from collections import defaultdict

import pytest
import trio

from archiver.web.http import decode_body
from demoweb import WebSpec
from tests.support.crawls import Crawled, captures, records, sha1_b32, warc_files, warcio_check

AGENT = "archiver"
MIN_REST = 0.05
MAX_DEPTH = 12


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    result = Crawled(tmp_path_factory.mktemp("crawl"), WebSpec(sites=8, pages_per_site=15, port=0),
                     min_rest=MIN_REST, max_depth=MAX_DEPTH)
    trio.run(result.run)
    return result


def test_every_allowed_reachable_url_is_captured_exactly_once(crawled):
    caps = captures(crawled.root)
    expected = crawled.web.expected(AGENT)
    trap = {u for u in caps if crawled.web.in_trap(u)}
    assert not trap & expected
    assert set(caps) - trap == expected
    robots500 = crawled.web.origin("robots500.demo") + "/robots.txt"
    # The 5xx robots.txt is retried (site_retries = 2) and then the site is deferred; the second
    # answer is the same, so it may be kept as a revisit of the first once that is catalogued.
    revisits = sum(r.rec_headers.get_header("WARC-Target-URI") == robots500
                   for r, _ in records(crawled.root, "revisit"))
    assert caps.pop(robots500) + revisits == 2
    assert all(n == 1 for n in caps.values()), [u for u, n in caps.items() if n > 1]


def test_no_disallowed_url_is_ever_requested(crawled):
    requested = {crawled.web.origin(r.host) + r.target for r in crawled.server.log}
    disallowed = crawled.web.disallowed(AGENT)
    assert disallowed, "the demo web must exercise robots rules"
    assert not requested & disallowed
    hosts = defaultdict(set)
    for r in crawled.server.log:
        hosts[r.host].add(r.target)
    assert hosts["robots500.demo"] == {"/robots.txt"}


def test_requests_to_a_site_are_sequential_and_rested(crawled):
    by_host = defaultdict(list)
    for r in crawled.server.log:
        by_host[r.host].append(r)
    delay_host = next(h for h in crawled.web.hosts
                      if b"Crawl-delay: 1" in crawled.web.respond(h, "/robots.txt").body)
    for host, requests in by_host.items():
        requests.sort(key=lambda r: r.start)
        rest = 1.0 if host == delay_host else MIN_REST
        for before, after in itertools.pairwise(requests):
            gap = after.start - before.end
            assert gap >= rest - 0.002, (host, before.target, after.target, gap)
    assert len(by_host[delay_host]) >= 3


def test_external_links_land_in_the_spool(crawled):
    spooled = set()
    for path in (crawled.root / "spool").glob("*.tsv"):
        for line in path.read_text().splitlines():
            url, source, stamp, hops, priority = line.split("\t")
            assert len(stamp) == 14 and stamp.isdigit()
            assert (hops, priority) == ("0", "0.0")          # every site is a seed site here
            spooled.add((source, url))
    assert not list((crawled.root / "spool").glob("*.open"))
    crawled_origins = {o for o in crawled.web.origins() if "robots500" not in o}
    expected = {(s, u) for s, u in crawled.web.external_links() if s in crawled_origins}
    assert expected and spooled == expected


def test_the_traps_stay_bounded(crawled):
    trap = [r for r in crawled.server.log if r.host == "trap.demo"]
    assert 3 <= len(trap) <= 3 * MAX_DEPTH * 10
    assert all(len(r.target) < 400 for r in trap)
    calendar = [r for r in crawled.server.log if "/events/" in r.target]
    assert 1 <= len(calendar) <= 2 * MAX_DEPTH + 1


def test_warcs_pass_warcio_check_and_hold_what_was_served(crawled):
    files = warc_files(crawled.root)
    assert files and not [f for f in files if f.name.endswith(".open")]
    check = warcio_check(files)
    assert check.returncode == 0, check.stdout + check.stderr
    checked = 0
    for record, payload in records(crawled.root):
        headers = record.rec_headers
        assert headers.get_header("WARC-Payload-Digest") == sha1_b32(payload)
        assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
        assert headers.get_header("WARC-Concurrent-To") is None  # carried by the request record
        url = headers.get_header("WARC-Target-URI")
        host, _, target = url.split("://", 1)[1].partition("/")
        reply = crawled.web.respond(host.split(":")[0], "/" + target)
        assert record.http_headers.get_statuscode() == str(reply.status)
        encoding = record.http_headers.get_header("Content-Encoding")
        assert decode_body(payload, encoding, 2**30) == reply.body, url
        checked += 1
    assert checked == sum(captures(crawled.root).values())
    requests = {r.rec_headers.get_header("WARC-Concurrent-To") for r, _ in records(crawled.root, "request")}
    answers = {r.rec_headers.get_header("WARC-Record-ID")
               for kind in ("response", "revisit") for r, _ in records(crawled.root, kind)}
    assert requests == answers
    warcinfo = list(records(crawled.root, "warcinfo"))
    assert len(warcinfo) == len(files)


def test_status_file_reports_the_crawl(crawled):
    import json

    status = json.loads((crawled.root / "state" / "crawl-0.json").read_text())
    revisits = sum(1 for _ in records(crawled.root, "revisit"))
    assert status["pages"] == sum(captures(crawled.root).values()) + revisits
    assert status["sites_done"] == len(crawled.web.hosts) - 1      # robots500 deferred
    assert status["sites"]["deferred"] == 1
    assert status["active"] == {}
