"""A crawl of the demo web's odd-links site: every link a correct crawler fetches is captured once
under its normalised URI, nothing else is asked for, and every request line is ASCII (issue 11)."""

from __future__ import annotations

import json

import trio

from archiver.web.urls import normalize, split_origin
from demoweb import WebSpec, start_demo
from demoweb.model import ODD_EXTERNAL, ODD_LINKS
from tests.support.crawls import Crawled, captures, records, warc_files, warcio_check


def is_request_line(line: bytes) -> bool:
    """'GET <target> HTTP/1.1' in printable ASCII: no byte above 0x7E, no control."""
    method, target, version = [*line.split(b" "), b"", b""][:3]
    return (all(0x20 <= byte <= 0x7E for byte in line) and line.count(b" ") == 2
            and method == b"GET" and target.startswith(b"/") and version == b"HTTP/1.1")


async def test_odd_links_are_fetched_as_uris_and_the_site_is_archived(tmp_path):
    crawl = Crawled(tmp_path, WebSpec(sites=1, pages_per_site=4, port=0, trap=False, odd=True))
    await crawl.run()
    web, server = crawl.web, crawl.server
    odd = web.origin("odd.demo")
    caps = captures(crawl.root)

    # Every page of every site (the odd site's ordinary and odd pages included) was captured,
    # each exactly once, under the normalised URI the model states by hand.
    expected = web.expected("archiver")
    assert expected <= set(caps), sorted(expected - set(caps))
    mine = {url for url in caps if url.startswith(odd + "/")}
    assert mine == {url for url in expected if url.startswith(odd + "/")}
    assert all(caps[url] == 1 for url in mine), {u: n for u, n in caps.items() if n > 1}
    fetched_targets = {target for _, target in ODD_LINKS if target}
    assert {odd + target for target in fetched_targets} <= mine
    assert odd + "/q?http://example.org/%C3%A9" in mine and odd + "/p?http://example.org/a%20b" in mine
    assert odd + "/landing%20page.html" in mine  # the redirect whose Location held a space

    # The server saw only valid ASCII request lines, one per fetch, and for the odd site only
    # the targets the model expects (the links a crawler must not follow were not followed).
    assert server.request_lines and all(map(is_request_line, server.request_lines)), [
        line for line in server.request_lines if not is_request_line(line)]
    assert len(server.request_lines) == len(server.log)
    requested = {entry.target for entry in server.log if entry.host == "odd.demo"}
    assert requested == {split_origin(url)[1] for url in mine}

    # The links to hosts outside the web went to the spool in normal form, not to the server.
    spooled = "".join(path.read_text() for path in (crawl.root / "spool").glob("*.tsv*"))
    port = odd[len("http://odd.demo") :]
    for _, url in ODD_EXTERNAL:
        assert url.replace("{port}", port) in spooled

    # The links no crawler can fetch are counted by reason, not silently lost.
    status = json.loads((crawl.root / "state" / "crawl-0.json").read_text())
    assert {"url-scheme", "url-port"} <= set(status["skipped"]), status["skipped"]

    # Every response record is a valid WARC record whose target is a URI normalize keeps as is.
    assert warcio_check(warc_files(crawl.root)).returncode == 0
    for record, _ in records(crawl.root):
        target = record.rec_headers.get_header("WARC-Target-URI")
        assert target.isascii() and normalize(target) == target


async def test_demo_server_keeps_request_lines_it_refuses(nursery):
    web, server = await start_demo(nursery, WebSpec(sites=1, pages_per_site=2, port=0, trap=False))
    for line in (b"GET / HTTP/1.1", b"GET /caf\xc3\xa9 x HTTP/1.1"):
        stream = await trio.open_tcp_stream("127.0.0.1", web.spec.port)
        await stream.send_all(line + b"\r\nHost: site-000.demo\r\n\r\n")
        reply = await stream.receive_some()
        await stream.aclose()
        assert reply.startswith(b"HTTP/1.1 200" if line == b"GET / HTTP/1.1" else b"HTTP/1.1 400")
    assert server.request_lines == [b"GET / HTTP/1.1", b"GET /caf\xc3\xa9 x HTTP/1.1"]
    assert not is_request_line(server.request_lines[1])
