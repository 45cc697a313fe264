"""A redirect from http to https on the same host stays inside the site's visit."""

from __future__ import annotations

import functools
import ssl

import h11
import trio
import trustme

from archiver.crawl.crawler import Crawler, enqueue_seeds
from tests.support.crawls import captures, load

HOST = "alias.test"
ADDRESS = "127.0.0.77"


def page(body: bytes, status: int = 200, headers: tuple = ()) -> tuple[int, list, bytes]:
    return status, [("Content-Type", "text/html"), ("Content-Length", str(len(body))), *headers], body


async def serve(stream, routes, log, scheme) -> None:
    """A minimal keep-alive HTTP/1.1 server answering from ``routes``."""
    conn = h11.Connection(h11.SERVER)
    target = ""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:  # a client may drop TLS without close_notify
                return
            if not data:
                return
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            target = event.target.decode()
            log.append((scheme, target))
        elif isinstance(event, h11.EndOfMessage):
            status, headers, body = routes.get(target, page(b"missing", 404))
            await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers))
                                  + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
            conn.start_next_cycle()
        elif isinstance(event, h11.ConnectionClosed):
            return


async def test_http_to_https_redirect_keeps_the_visit(tmp_path):
    log: list[tuple[str, str]] = []
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOST).configure_cert(context)
    async with trio.open_nursery() as nursery:
        https_routes: dict = {}
        http_routes: dict = {}
        # An alias is only http <-> https on the default ports: the servers take 80 and 443 on an
        # address of their own (the tests run as root, as the README's test command does).
        await nursery.start(functools.partial(
            trio.serve_ssl_over_tcp, lambda s: serve(s, https_routes, log, "https"), 443, context,
            host=ADDRESS))
        await nursery.start(functools.partial(
            trio.serve_tcp, lambda s: serve(s, http_routes, log, "http"), 80, host=ADDRESS))
        [other] = await nursery.start(functools.partial(
            trio.serve_tcp, lambda s: serve(s, http_routes, log, "other-port"), 0, host=ADDRESS))
        other_port = other.socket.getsockname()[1]
        secure = f"https://{HOST}"
        http_routes["/robots.txt"] = page(b"User-agent: *\nDisallow:\n")
        http_routes["/"] = page(b"", 301, (("Location", secure + "/"),))
        https_routes["/robots.txt"] = page(b"User-agent: *\nDisallow: /private\n")
        https_routes["/"] = page(b'<a href="/next.html">next</a> <a href="/private/x">no</a>'
                                 b'<a href="http://elsewhere.test/">out</a>')
        https_routes["/next.html"] = page(b'<a href="/moved">moved</a>')
        # A same-host redirect to another port is another site, not an alias of this one.
        https_routes["/moved"] = page(b"", 302, (("Location", f"http://{HOST}:{other_port}/x"),))
        (tmp_path / "hosts").write_text(f"{ADDRESS} {HOST} elsewhere.test\n")
        (tmp_path / "c.toml").write_text(
            '[archive]\nroot = "archive"\n[crawl]\nmin_rest = 0.01\nmax_rest = 0.1\n'
            'allowed_networks = ["127.0.0.0/8"]\nsitemaps = false\n'
            '[dns]\nhosts_file = "hosts"\nnameservers = ["127.0.0.1:9"]\n')
        config = load(tmp_path / "c.toml")
        enqueue_seeds(config, 0, [f"http://{HOST}/"])
        await Crawler(config, until_idle=True).run()
        nursery.cancel_scope.cancel()

    assert set(captures(config.root)) == {
        f"http://{HOST}/robots.txt", f"http://{HOST}/",
        secure + "/robots.txt", secure + "/", secure + "/next.html", secure + "/moved"}
    assert ("https", "/private/x") not in log            # the https origin's own robots.txt
    assert not [entry for entry in log if entry[0] == "other-port"]
    spooled = "".join(p.read_text() for p in (config.root / "spool").glob("*.tsv"))
    assert "http://elsewhere.test/" in spooled and secure + "/" not in spooled
    assert f"http://{HOST}:{other_port}/x" in spooled
