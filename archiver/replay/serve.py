"""``archiver replay``: the replay's two apps (archiver.replay.app) served by Hypercorn's trio
worker (which sits on h11), the replay's own pages on ``replay.listen`` and archived content on
``replay.content_listen``."""

from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Awaitable, Callable
from functools import partial

import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio import serve

from archiver.config import Config, origin_of, parse_listen
from archiver.replay.app import ReplayApps, create_apps
from archiver.service import Service
from archiver.store.models import CatalogError

__all__ = ["ListenError", "Listeners", "hypercorn_config", "listeners", "parse_listen", "run", "serve_apps"]

# Seconds given to requests in flight after SIGINT/SIGTERM (Hypercorn's default is 3).
_GRACE = 5.0


def hypercorn_config(bind: str) -> HyperConfig:
    """Hypercorn settings: one bind (``host:port`` or ``fd://N``), access log on stdout, errors on stderr."""
    hyper = HyperConfig()
    hyper.bind = [bind]
    hyper.accesslog = "-"
    hyper.errorlog = "-"
    hyper.graceful_timeout = _GRACE
    return hyper


class ListenError(Exception):
    """A listener that cannot be bound; the message names its address."""


def _bound_socket(listen: str) -> socket.socket:
    """A socket bound to (host, port), for Hypercorn's ``fd://`` bind.

    Binding here rather than in Hypercorn reports a busy address as a plain OSError, before the
    event loop starts, tells the port given for port 0 (the public URLs may need it), and closes
    the socket on failure (Hypercorn leaves it to the collector).
    """
    host, port = parse_listen(listen)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    return sock


def _url(address: tuple[str, int]) -> str:
    host, port = address[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclasses.dataclass
class Listeners:
    """The two bound sockets (as ``fd://`` binds) and the config with its public URLs known."""

    config: Config
    app_bind: str
    content_bind: str


def listeners(config: Config, listen: str | None = None) -> Listeners:
    """Bind the app's and the content's listeners (``listen`` overrides ``replay.listen``) and fill
    an empty ``replay.base_url`` or ``replay.content_origin`` from the addresses bound.

    ValueError for a bad address or two public URLs of one origin, ListenError if one cannot be
    bound.
    """
    replay = config.replay
    app_sock = _bound_socket(listen or replay.listen)
    try:
        content_sock = _bound_socket(replay.content_listen)
    except (ValueError, ListenError):
        app_sock.close()
        raise
    replay = dataclasses.replace(
        replay,
        base_url=replay.base_url or _url(app_sock.getsockname()),
        content_origin=replay.content_origin or _url(content_sock.getsockname()),
    )
    if origin_of(replay.base_url) == origin_of(replay.content_origin):
        app_sock.close()
        content_sock.close()
        raise ValueError(f"the replay's pages and archived content would share the origin {replay.base_url}")
    return Listeners(
        dataclasses.replace(config, replay=replay),
        f"fd://{app_sock.detach()}",
        f"fd://{content_sock.detach()}",
    )


async def serve_apps(
    apps: ReplayApps,
    binds: Listeners,
    shutdown: Callable[[], Awaitable[object]],
    *,
    task_status: trio.TaskStatus[tuple[list[str], list[str]]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve both apps until ``shutdown()`` returns, then close the archive; reports the bound
    addresses (app, content) to ``nursery.start``."""
    try:
        async with trio.open_nursery() as nursery:
            stop = trio.Event()
            served = []
            for app, bind in ((apps.app, binds.app_bind), (apps.content, binds.content_bind)):
                config = hypercorn_config(bind)
                # Starlette is an ASGI 3 app; Hypercorn's hint names its own scope and event types.
                asgi = partial(serve, app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
                served.append(await nursery.start(asgi))
            task_status.started((served[0], served[1]))
            await shutdown()
            stop.set()
    finally:
        apps.archive.close()


def run(config: Config, listen: str | None = None) -> int:
    """Serve until SIGINT or SIGTERM (then 0); 2 for a bad address, 1 when it cannot be used.
    ``listen`` overrides ``replay.listen``."""
    try:
        binds = listeners(config, listen)
    except ValueError as exc:
        print(f"archiver replay: {exc}", file=sys.stderr)
        return 2
    except ListenError as exc:
        print(f"archiver replay: {exc}", file=sys.stderr)
        return 1
    try:
        apps = create_apps(binds.config)
    except CatalogError as exc:
        for bind in (binds.app_bind, binds.content_bind):
            socket.close(int(bind.removeprefix("fd://")))
        print(f"archiver replay: {exc}", file=sys.stderr)
        return 1
    # SIGHUP: the log level applies at once, the rest of the config at the next start.
    service = Service(binds.config)
    trio.run(service.run, partial(serve_apps, apps, binds, service.stopping.wait))
    return 0
