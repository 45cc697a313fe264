"""``archiver replay``: the replay app served by Hypercorn's trio worker (which sits on h11)."""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
from functools import partial

import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio import serve

from archiver.catalog import CatalogError
from archiver.config import Config
from archiver.reload import reread
from archiver.replay.app import create_app

DEFAULT_LISTEN = "127.0.0.1:8080"
# Seconds given to requests in flight after SIGINT/SIGTERM (Hypercorn's default is 3).
_GRACE = 5.0


def parse_listen(text: str) -> tuple[str, int]:
    """``"ADDRESS:PORT"`` (IPv6 as ``"[::1]:8080"``) or ``"PORT"`` alone (on 127.0.0.1) ->
    (address, port); ValueError with a message otherwise. Port 0 asks for any free port."""
    value = text.strip()
    if value.isdigit():
        host, port = "127.0.0.1", value
    elif value.startswith("["):
        host, close, rest = value[1:].partition("]")
        if not close or not rest.startswith(":"):
            raise ValueError(f"bad listen address {text!r}: write an IPv6 address as [::1]:8080")
        port = rest[1:]
    else:
        host, colon, port = value.rpartition(":")
        if not colon:
            raise ValueError(f"bad listen address {text!r}: give ADDRESS:PORT, e.g. {DEFAULT_LISTEN}")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"bad listen address {text!r}: {host!r} is not an IP address") from None
    if value.startswith("[") != (address.version == 6):
        raise ValueError(f"bad listen address {text!r}: write IPv6 addresses in brackets, [::1]:8080")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"bad listen address {text!r}: the port must be 0-65535")
    return str(address), int(port)


def hypercorn_config(bind: str) -> HyperConfig:
    """Hypercorn settings: one bind (``host:port`` or ``fd://N``), access log on stdout, errors on stderr."""
    hyper = HyperConfig()
    hyper.bind = [bind]
    hyper.accesslog = "-"
    hyper.errorlog = "-"
    hyper.graceful_timeout = _GRACE
    return hyper


def _bound_socket(host: str, port: int) -> int:
    """A socket bound to (host, port), as a file descriptor for Hypercorn's ``fd://`` bind.

    Binding here rather than in Hypercorn reports a busy address as a plain OSError, before the
    event loop starts, and closes the socket on failure (Hypercorn leaves it to the collector).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock.detach()


async def _serve(app: object, hyper: HyperConfig, config: Config) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:

        async def stop() -> None:
            current = config
            async for signum in signals:
                if signum != signal.SIGHUP:
                    return
                # The log level applies at once; the rest of the config at the next start.
                current = reread(current) or current

        await serve(app, hyper, shutdown_trigger=stop)  # type: ignore[arg-type]


def run(config: Config, listen: str = DEFAULT_LISTEN) -> int:
    """Serve until SIGINT or SIGTERM (then 0); 2 for a bad address, 1 when it cannot be used."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        print(f"archiver replay: {exc}", file=sys.stderr)
        return 2
    try:
        app = create_app(config)
    except CatalogError as exc:
        print(f"archiver replay: {exc}", file=sys.stderr)
        return 1
    try:
        fd = _bound_socket(host, port)
    except OSError as exc:
        app.state.archive.close()
        print(f"archiver replay: cannot listen on {listen}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    trio.run(partial(_serve, app, hypercorn_config(f"fd://{fd}"), config))
    return 0
