"""A one-site test web on 127.0.0.1 whose answers a *gate* decides: rate limits, drips, faults.

``OneSite`` serves ``/robots.txt`` (404 unless given), a home page linking every page, and the pages
``/p1.html`` ... Each request is logged with the server's clock (trio's) before the gate sees it;
every answer is logged with the moment it was sent and the Retry-After it carried, so tests can check
that the crawler honoured every Retry-After.
"""

from __future__ import annotations

import email.utils
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import h11
import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from tests.support.crawls import load, write_config

HOST = "limited.test"


@dataclass
class Answer:
    status: int
    body: bytes = b""
    retry_after: str | None = None  # the header value sent
    not_before: float = 0.0  # trio time the Retry-After asks the next request to wait for
    drip: float = 0.0  # seconds between body bytes (0: send at once)
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Hit:
    target: str
    at: float  # trio time the request arrived
    status: int = 0
    sent: float = 0.0  # trio time the answer was sent
    not_before: float = 0.0


Gate = Callable[[str, float], Answer | None]  # (target, now) -> an answer, or None to serve


@dataclass
class OneSite:
    pages: int = 12
    gate: Gate | None = None
    robots: bytes | None = None
    hits: list[Hit] = field(default_factory=list)
    port: int = 0

    def hosts_file(self) -> str:
        return f"127.0.0.1 {HOST}\n"

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def page_urls(self) -> set[str]:
        return {self.origin + "/"} | {f"{self.origin}/p{i}.html" for i in range(1, self.pages + 1)}

    def content(self, target: str) -> Answer:
        if target == "/robots.txt":
            return Answer(200, self.robots) if self.robots is not None else Answer(404, b"none")
        if target == "/":
            links = "".join(f'<a href="/p{i}.html">{i}</a>\n' for i in range(1, self.pages + 1))
            return Answer(200, f"<html><body>{links}</body></html>".encode())
        if target.startswith("/p") and target.endswith(".html"):
            return Answer(200, f"<html><body>page {target}</body></html>".encode())
        return Answer(404, b"not here")

    async def serve(self, nursery: trio.Nursery) -> None:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, self._connection, 0,
                                                           host="127.0.0.1"))
        self.port = listener.socket.getsockname()[1]

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        hit: Hit | None = None
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    hit = Hit(event.target.decode("ascii"), trio.current_time())
                    self.hits.append(hit)
                elif isinstance(event, h11.EndOfMessage) and hit is not None:
                    await self._answer(stream, conn, hit)
                    conn.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return

    async def _answer(self, stream: trio.SocketStream, conn: h11.Connection, hit: Hit) -> None:
        answer = self.gate(hit.target, hit.at) if self.gate else None
        if answer is None:
            answer = self.content(hit.target)
        headers = [("Content-Type", "text/html"), ("Content-Length", str(len(answer.body)))]
        if answer.retry_after is not None:
            headers.append(("Retry-After", answer.retry_after))
        headers += answer.headers
        head = conn.send(h11.Response(status_code=answer.status, headers=headers))
        hit.status, hit.not_before = answer.status, answer.not_before
        hit.sent = trio.current_time()
        if not answer.drip:
            await stream.send_all(head + conn.send(h11.Data(data=answer.body))
                                  + conn.send(h11.EndOfMessage()))
            return
        await stream.send_all(head)
        for i in range(len(answer.body)):
            await stream.send_all(conn.send(h11.Data(data=answer.body[i : i + 1])))
            await trio.sleep(answer.drip)
        await stream.send_all(conn.send(h11.EndOfMessage()))

    # -- what the crawler did ----------------------------------------------------------------

    def served(self) -> list[Hit]:
        """Requests answered 200, in order."""
        return [h for h in self.hits if h.status == 200]

    def early(self) -> list[tuple[Hit, Hit]]:
        """(limited answer, next request) pairs where the next request came before the
        Retry-After allowed (a small allowance for clock granularity)."""
        pairs = zip(self.hits, self.hits[1:], strict=False)
        return [(a, b) for a, b in pairs if a.not_before and b.at < a.not_before - 0.02]


def retry_after_seconds(seconds: int, now: float) -> Answer:
    return Answer(429, b"slow down", str(seconds), now + seconds)


def retry_after_date(seconds: int, now: float, status: int = 429) -> Answer:
    """A Retry-After HTTP-date at least ``seconds`` ahead (dates have whole seconds)."""
    wall = time.time()
    when = math.ceil(wall + seconds)
    return Answer(status, b"come back later", email.utils.formatdate(when, usegmt=True),
                  now + (when - wall))


class EveryNth:
    """Answers every ``n``-th page request (robots.txt aside) with ``make(now)``."""

    def __init__(self, n: int, make: Callable[[float], Answer]) -> None:
        self.n, self.make, self.count = n, make, 0

    def __call__(self, target: str, now: float) -> Answer | None:
        if target == "/robots.txt":
            return None
        self.count += 1
        return self.make(now) if self.count % self.n == 0 else None


class TokenBucket:
    """Allows ``rate`` requests a second with bursts of ``burst``; refuses the rest with
    ``status`` and no Retry-After."""

    def __init__(self, rate: float, burst: float, status: int = 429) -> None:
        self.rate, self.burst, self.status = rate, burst, status
        self.tokens, self.last = burst, None

    def __call__(self, target: str, now: float) -> Answer | None:
        if target == "/robots.txt":
            return None
        if self.last is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return Answer(self.status, b"too fast")


async def crawl_site(tmp_path: Path, site: OneSite, **crawl: object) -> Path:
    """Serve ``site``, crawl it until idle, return the archive root."""
    async with trio.open_nursery() as nursery:
        await site.serve(nursery)
        config = load(write_config(tmp_path, site, **crawl))
        enqueue_seeds(config, 0, [site.origin + "/"])
        with trio.fail_after(120):  # a guard against a hang, not a speed target
            await Crawler(config, until_idle=True).run()
        nursery.cancel_scope.cancel()
    return config.root
