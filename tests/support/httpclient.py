"""The HTTP client of the fetch tests: short timeouts, loopback allowed; ``get`` for one page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archiver.config import CrawlConfig
from archiver.crawl.http import FetchResult, HttpClient
from tests.support.crawls import LOOPBACK


def client(extra_headers: Sequence[tuple[str, str]] = (), **crawl: Any) -> HttpClient:
    """A client with short timeouts; ``crawl`` overrides ``[crawl]`` settings."""
    settings = {"user_agent": "archiver-test/1.0", "connect_timeout": 1, "first_byte_timeout": 1,
                "total_timeout": 2, **crawl}
    return HttpClient(CrawlConfig(**settings), extra_headers=extra_headers, allowed_networks=LOOPBACK)


async def get(origin: str, path: str) -> FetchResult:
    """``origin + path`` fetched from a server on 127.0.0.1 (a replay the test started)."""
    http = client(total_timeout=10)
    try:
        result = await http.fetch(origin + path, "127.0.0.1")
    finally:
        await http.aclose()
    assert result.error is None, result.error
    return result
