"""One site's way to the network during a visit: the addresses of its hosts, the connection slot
of the address it fetches from (archiver.crawl.addressslots), its kept-alive HTTP client, and its
session (archiver.crawl.session: the cookies and credentials its requests carry, the cookies its
answers set; a request record holds the session's secrets replaced).

Every request of a site goes through its ``SiteConnection``, whichever fetcher makes it, so that
each holds an address's slot as the others do and none is sent once the site's lease is lost;
when to send it (the rest between fetches) is the visit's decision (archiver.crawl.visit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from archiver.config import CrawlConfig
from archiver.crawl.context import CrawlContext
from archiver.crawl.http import FetchResult, HttpClient
from archiver.crawl.session import SiteSession
from archiver.logs import event
from archiver.web import urls
from archiver.web.logins import redact_request, redact_text

log = logging.getLogger("archiver.crawl.connection")


class LeaseLost(Exception):
    """Another process holds the site now (our lease expired, or a write found a newer epoch)."""


class SiteConnection:
    """The addresses, connection slot, HTTP client and session of one site's visit."""

    def __init__(self, origin: str, ctx: CrawlContext, crawl: CrawlConfig,
                 session: SiteSession) -> None:
        """``crawl``: the site's [crawl] settings (its sheet's overrides applied)."""
        self.origin = origin
        self.ctx = ctx
        self.session = session
        self.addresses: dict[str, str] = {}  # host -> the address fetched from
        self.held: str | None = None  # the address whose connection slot this visit holds
        self.client = HttpClient(crawl)
        self._agent = crawl.user_agent  # the client's User-Agent

    async def fetch(self, url: str, conditions: list[tuple[str, str]], crawl: CrawlConfig, *,
                    method: str = "GET", body: bytes = b"",
                    headers: Sequence[tuple[str, str]] = ()) -> FetchResult:
        """Send ``url``'s request (with the ``conditions`` headers, the session's and
        ``headers``; ``method`` and ``body``: a login's form) from the address of its host,
        holding that address's slot; a host without an address is an answerless result. LeaseLost
        if the site's lease is no longer held once the slot is. One request at a time: the HTTP
        client is not for concurrent use (a rendered page's requests take turns,
        archiver.crawl.renderer)."""
        if self._agent != crawl.user_agent:  # a reload changed it
            await self.let_go()
            await self.client.aclose()
            self.client, self._agent = HttpClient(crawl), crawl.user_agent
        ip = await self.address(urls.origin_parts(urls.origin(url))[1])
        if ip is None:
            return FetchResult(url=url, ip="", started=time.time(), request=b"",
                               error="dns: no address")
        await self._hold(ip)
        if not self.ctx.may_fetch(self.origin):  # checked last: holding the slot may take a while
            raise LeaseLost
        session = self.session
        sent = [*session.request_headers(url, time.time(), method), *headers]
        result = await self.client.fetch(url, ip, conditions=conditions, method=method, body=body,
                                         headers=sent)
        if session.secrets:
            result.request = redact_request(result.request, session.secrets)
            if result.error is not None:
                result.error = redact_text(result.error, session.secrets)
        for refusal in session.answered(result, time.time()):
            event(log, logging.DEBUG, "cookie-refused", site=self.origin, url=url, reason=refusal)
        if self.ctx.slots.contended(ip):  # another site waits for this address: hand it over
            await self.let_go()
        return result

    async def address(self, host: str) -> str | None:
        """The address ``host`` is fetched from in this visit (looked up once), or None."""
        if host not in self.addresses:
            resolution = await self.ctx.lookup.resolve(host)
            if not resolution.addresses:
                return None
            self.addresses[host] = resolution.addresses[0]
        return self.addresses[host]

    async def _hold(self, ip: str) -> None:
        """Hold a connection slot of ``ip`` (see archiver.crawl.addressslots) before fetching
        from it."""
        if self.held != ip:
            await self.let_go()
            await self.ctx.slots.acquire(ip)
            self.held = ip

    async def let_go(self) -> None:
        """Close the connection and give its address's slot back."""
        if self.held is not None:
            await self.client.aclose()
            self.ctx.slots.release(self.held)
            self.held = None

    async def aclose(self) -> None:
        await self.let_go()
        await self.client.aclose()
