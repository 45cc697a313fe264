"""One way to run a service: the signals every long-running archiver process answers.

The crawler, the DNS service, the links batch and replay each run their main task under a
``Service``:

- SIGTERM or SIGINT stops gently: ``stopping`` is set and ``on_stop`` runs; the main task has
  ``drain_timeout(config)`` seconds to finish (None: as long as it needs). A second signal, or the
  deadline, cancels it.
- SIGHUP reads the config file again (``archiver.reload.reread``): ``config`` holds the new one
  and ``on_reload`` runs; a file that fails validation changes nothing.
- What the main task raises comes out of ``run`` as it is, not in the nursery's exception group:
  the command reports an error it knows in a line (a slice cut short, a store that fails).

A process lock, where a role needs one (a crawler process number, the links batch), is taken by
the object that owns the state, through ``Stores.lock``, before it reads that state.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable

import trio

from archiver.config import Config
from archiver.logs import event
from archiver.reload import reread

log = logging.getLogger("archiver.service")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _no_drain_limit(_config: Config) -> float | None:
    return None


class Service:
    """A main task under the service signals; ``run`` returns when the task ends or is stopped."""

    def __init__(self, config: Config, *,
                 drain_timeout: Callable[[Config], float | None] = _no_drain_limit,
                 on_stop: Callable[[], object] | None = None,
                 on_reload: Callable[[Config], object] | None = None) -> None:
        self.config = config
        self.stopping = trio.Event()
        self.drain_expired = False  # the drain deadline, not the main task, ended the run
        self._drain_timeout = drain_timeout
        self._on_stop = on_stop
        self._on_reload = on_reload
        self._scope: trio.CancelScope | None = None
        self._cancelled = False

    async def run(self, main: Callable[[], Awaitable[object]]) -> None:
        """Run ``main`` with the signal watcher beside it. What ``main`` raises comes out as it is
        (not in a nursery's exception group), for the command to report in a line."""
        finished = False
        failed: Exception | None = None
        with trio.open_signal_receiver(*STOP_SIGNALS, signal.SIGHUP) as signals:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._watch, signals)
                event(log, logging.INFO, "service-ready", stop="SIGTERM,SIGINT", reload="SIGHUP")
                try:
                    await main()
                    finished = True
                except Exception as e:  # (a cancellation is no Exception: it goes on up)
                    failed = e
                nursery.cancel_scope.cancel()
        if failed is not None:
            raise failed
        if not finished and not self._cancelled and self.stopping.is_set():
            self.drain_expired = True
            event(log, logging.WARNING, "drain-timeout", seconds=self._drain_timeout(self.config))

    def stop_now(self) -> None:
        """Cancel the main task (what a second signal does)."""
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    def reload(self) -> None:
        """What SIGHUP does."""
        new = reread(self.config)
        if new is not None:
            self.config = new
            if self._on_reload is not None:
                self._on_reload(new)

    def stop(self, reason: str) -> None:
        """What the first SIGTERM/SIGINT does; a second call cancels."""
        if self.stopping.is_set():
            event(log, logging.WARNING, "stopping-now", signal=reason)
            self.stop_now()
            return
        timeout = self._drain_timeout(self.config)
        event(log, logging.INFO, "stopping", signal=reason, drain_timeout=timeout)
        self.stopping.set()
        if self._on_stop is not None:
            self._on_stop()
        if timeout is not None and self._scope is not None:
            self._scope.deadline = trio.current_time() + timeout

    async def _watch(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            if signum == signal.SIGHUP:
                self.reload()
            else:
                self.stop(signal.Signals(signum).name)
