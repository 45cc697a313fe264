"""No page can make the crawler fetch from its own network: an "internal" listener on another
loopback address receives nothing, whatever the public site links to, redirects to, or resolves to."""

from __future__ import annotations

import functools
import json

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from tests.support.crawls import captures, load
from tests.support.dnsserver import TestZone, start_dns
from tests.support.linkbatch import batch_once
from tests.support.onesite import HOST, Answer, OneSite

INTERNAL = "127.0.0.2"


def internal_links(port: int) -> list[str]:
    """Every way a page can point at the internal listener."""
    return [
        f"http://{INTERNAL}:{port}/dotted",
        f"http://2130706434:{port}/integer",              # 127.0.0.2 as one number
        f"http://0x7f.2:{port}/hex",
        f"http://0177.0.0.2:{port}/octal",
        f"http://[::ffff:{INTERNAL}]:{port}/mapped",      # IPv4-mapped IPv6
        f"http://in-hosts.test:{port}/hosts-file",
        f"http://in-dns.test:{port}/dns",
        f"http://localhost:{port}/localhost",
        "/to-internal",                                   # a redirect, below
    ]


async def test_the_internal_listener_receives_nothing(tmp_path):
    knocks: list[str] = []

    async def internal(stream: trio.SocketStream) -> None:
        knocks.append("connection")
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, internal, 0, host=INTERNAL))
        port = listener.socket.getsockname()[1]
        zone = TestZone()
        zone.set("in-dns.test", a=[INTERNAL])
        zone.set("dns-site.test", a=[INTERNAL])          # a site whose very address is internal
        dns_port = await start_dns(nursery, zone)

        def gate(target: str, now: float) -> Answer | None:
            if target == "/":
                links = "".join(f'<a href="{url}">x</a>\n'
                                for url in [*internal_links(port), "/p1.html"])
                return Answer(200, links.encode())
            if target == "/robots.txt":
                return Answer(302, b"", headers=[("Location", f"http://{INTERNAL}:{port}/robots.txt")])
            if target == "/to-internal":
                return Answer(302, b"", headers=[("Location", f"http://in-hosts.test:{port}/r")])
            return None

        site = OneSite(pages=2, gate=gate)
        await site.serve(nursery)
        (tmp_path / "hosts").write_text(
            f"127.0.0.1 {HOST}\n{INTERNAL} in-hosts.test localhost\n")
        (tmp_path / "archiver.toml").write_text(
            '[archive]\nroot = "archive"\n'
            '[crawl]\nmin_rest = 0.0\nretry_delay = 0.05\nsite_retries = 1\nstatus_interval = 0.5\n'
            f'allowed_networks = ["127.0.0.1/32"]\n'
            f'[dns]\nhosts_file = "hosts"\nnameservers = ["127.0.0.1:{dns_port}"]\ntimeout = 0.5\n')
        config = load(tmp_path / "archiver.toml")
        enqueue_seeds(config, 0, [site.origin + "/", f"http://dns-site.test:{port}/"])
        for _ in range(2):  # crawl, then feed the external links back as sites, and crawl those
            await Crawler(config, until_idle=True).run()
            batch_once(config)
        nursery.cancel_scope.cancel()

    assert knocks == []
    caps = set(captures(config.root))
    assert site.origin + "/" in caps and site.origin + "/p1.html" in caps   # the public site
    assert not [url for url in caps if f":{port}/" in url]                  # nothing internal
    status = json.loads((config.root / "state" / "crawl-0.json").read_text())
    assert status["errors"]["address-refused"] >= 3
