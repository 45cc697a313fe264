"""The work a response's body sets, kept off the event loop once the body is large.

Hashing, compressing into the WARC, decoding, link extraction, robots.txt parsing and the page text
plugins read all cost time in proportion to the body: about 60 ms per MiB for link extraction and
up to 70 ms per MiB for WARC compression, up to 0.5 s per MiB for the page text of deeply nested
markup, up to 1 ms per KiB for robots.txt. A 16 MiB response (``crawl.max_response_size``) read on
the event loop stopped every site of the process for 1.5 to 3.5 s. So a visit does that work in its
own task step only for a body of at most ``LARGE`` bytes, decoded (a few milliseconds; robots.txt
is always parsed in a thread); a larger one goes to a worker thread, at most ``THREADS`` at once
(the visits with a large body wait their turn, the others go on), and the links it yields are
routed ``ROUTE_SLICE`` at a time, each slice its own task step. Link extraction keeps links as
strings (``web.extract.html_urls``), so that a page of a million links sets off no full garbage
collection, which would pause the event loop's thread too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import trio

P = ParamSpec("P")
T = TypeVar("T")

LARGE = 64 * 1024  # bytes: a body of more is worked on in a worker thread
THREADS = 2  # worker threads for large bodies at once (the crawler's machine has a few cores)
ROUTE_SLICE = 500  # links routed per task step


class BodyWork:
    """The worker threads of one crawler process for large bodies, ``THREADS`` at once."""

    def __init__(self) -> None:
        self._limiter = trio.CapacityLimiter(THREADS)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, once one is free."""
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs),
                                             limiter=self._limiter)
