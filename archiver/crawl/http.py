"""HTTP/1.1 client for the crawler: trio streams, h11, the exact bytes kept for the WARC.

One `HttpClient` talks to one site at a time, one request at a time (it is not meant for
concurrent use), and keeps the connection alive between fetches when the server allows it.
The address comes from the caller: nothing here resolves names. `fetch` never raises
(except `trio.Cancelled`), whatever the URL and whatever the server sends: every failure comes
back in `FetchResult.error` (no response head) or `FetchResult.truncated` (a head, then a body
cut short). `error` is "kind: detail", the kind one of: `url` (not an http(s) URL of printable
ASCII with a valid host and a port 1-65535: nothing is sent), `request` (h11 refused the
request, e.g. a configured header; a method other than GET, HEAD and POST; a body on a GET or
HEAD), `address-refused` (the address is not a public one and not
in `allowed_networks`: checked on the address connected to, see archiver.web.netpolicy; nothing is
sent), `connect`, `timeout` (connect, first-byte or total), `tls`,
`reset` (the connection broke before a response head) and `protocol` (the head broke HTTP/1.1).
Each failure class is caught by name, so a programming error still surfaces.

What is stored, and why:

- `request` is exactly what h11 produced and what went on the wire: the head, then a POST's
  body.
- `head` is the final response's status line and header block exactly as received (bare LF
  line endings and folded lines included). Interim 1xx responses are read and dropped: a WARC
  response record holds one HTTP response, and a 1xx head in front of the final one would be
  parsed by readers as the response itself, with the real head taken for body bytes.
- `body` is the entity as h11 delivers it. Without chunking that is byte for byte what followed
  the head. With chunking it is the de-chunked data, and every `Transfer-Encoding` header in
  `head` is renamed `X-Archiver-Transfer-Encoding`: WARC 1.1 defines WARC-Payload-Digest on
  the de-chunked entity, while `warcio check` recomputes it on the stored bytes, de-chunking
  them only when the header says they are chunked. Stored de-chunked under a renamed header,
  the record keeps a spec-correct digest that `warcio check` also confirms. The renamed
  header is longer than the original, so `head` differs in length from the bytes on the wire;
  chunk extensions and trailers are not kept.
- `body` keeps any `Content-Encoding`; `decode_body` undoes it for link extraction, with a cap
  on the output size against compression bombs.

Timeouts (seconds): `connect_timeout` covers the TCP connect and the TLS handshake;
`first_byte_timeout` runs from the moment the request is sent until the whole response head
has arrived; `total_timeout` bounds the whole fetch, connecting included. A response cut by
`total_timeout` or `max_size` is kept with `truncated` "time" or "length" (values WARC 1.1
defines for WARC-Truncated); a peer that closes or resets mid-body gives "disconnect", and a
body that breaks the protocol mid-way (a bad chunk header) gives "unspecified".
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import select
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11
import trio

from archiver.config import CrawlConfig
from archiver.web.netpolicy import Network, parse_networks, refusal

READ_SIZE = 64 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}
# What Firefox sends for a page: servers that vary on Accept give us what a reader would see.
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_ENCODING = "gzip, deflate, br"
METHODS = ("GET", "HEAD", "POST")
RENAMED_TE = b"X-Archiver-Transfer-Encoding:"
_TE_LINE = re.compile(rb"^transfer-encoding:", re.IGNORECASE | re.MULTILINE)
_MAX_REASON = 200
# A host as urlsplit gives it (lower-case, brackets gone): RFC 3986 reg-name characters, or the
# hex, dots, colons and %-zone of an IP literal. Nothing that would break the Host header.
_HOST = re.compile(r"[a-z0-9\-._~!$&'()*+,;=%:]+")


@dataclass
class FetchResult:
    """What one fetch sent and received; see the module docstring for the exact bytes kept."""

    url: str
    ip: str
    started: float
    request: bytes = b""
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    head: bytes = b""
    body: bytes = b""
    truncated: str | None = None
    error: str | None = None
    first_byte: float | None = None
    elapsed: float = 0.0

    def header(self, name: str) -> str | None:
        """The first value of response header `name` (case-insensitive), or None."""
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    target: str
    host_header: str

    @classmethod
    def parse(cls, url: str) -> _Target:
        """The request's parts; ValueError if `url` cannot become a request h11 will send.

        Only printable ASCII goes on the wire: a target or host with anything else would make
        h11 raise (UnicodeEncodeError, LocalProtocolError) instead of sending a bad request.
        `archiver.web.urls.normalize` output always passes; this guards every other caller.
        """
        if not (url.isascii() and url.isprintable()) or " " in url:
            raise ValueError("not an ASCII URI")
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"unsupported scheme {scheme!r}")
        host = parts.hostname
        if not host or _HOST.fullmatch(host) is None:
            raise ValueError("no host" if not host else f"bad host {host!r}")
        port = parts.port  # ValueError for a port that is not 0-65535 digits
        if port == 0:
            raise ValueError("port 0")
        port = port or DEFAULT_PORTS[scheme]
        # The path and query exactly as given: urlsplit would lose an empty query ("/p?").
        target = url.partition("#")[0][len(parts.scheme) + 3 + len(parts.netloc) :]
        if not target.startswith("/"):
            target = "/" + target
        host_header = f"[{host}]" if ":" in host else host
        if port != DEFAULT_PORTS[scheme]:
            host_header += f":{port}"
        return cls(scheme, host, port, target, host_header)


@dataclass
class _Connection:
    key: tuple[str, str, int, str]
    sock: trio.socket.SocketType
    stream: trio.abc.Stream
    http: h11.Connection
    reusable: bool = False

    def close(self) -> None:
        self.sock.close()

    def idle_alive(self) -> bool:
        """False if an idle connection has anything to read: EOF, a reset or stray bytes.

        urllib3 makes the same check (`is_connection_dropped`) before reusing a pooled
        connection; stray bytes would otherwise be parsed as the next response.
        """
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        return not poller.poll(0)


@dataclass(frozen=True)
class _Request:
    """One request ready for h11: where it goes, its head and its body."""

    target: _Target
    head: h11.Request
    body: bytes


class _Failed(Exception):
    """The fetch failed before a response head; the message is `FetchResult.error`."""


class _Dead(Exception):
    """The connection closed or broke before the first response byte; the message says how."""


class HttpClient:
    """HTTP/1.1 client for one site at a time, keeping one connection alive between fetches."""

    def __init__(
        self,
        settings: CrawlConfig,
        *,
        extra_headers: Sequence[tuple[str, str]] = (),
        allowed_networks: Sequence[Network] | None = None,
    ) -> None:
        """Timeouts, size limits, TLS checking and the user agent come from the ``[crawl]`` section.
        ``allowed_networks`` (default: ``crawl.allowed_networks``): non-public networks it may still
        connect to (see archiver.web.netpolicy); every other non-public address is refused at connect
        time."""
        if allowed_networks is None:
            allowed_networks = parse_networks(settings.allowed_networks)
        self.allowed_networks = tuple(allowed_networks)
        self.connect_timeout = settings.connect_timeout
        self.first_byte_timeout = settings.first_byte_timeout
        self.total_timeout = settings.total_timeout
        self.max_size = settings.max_response_size
        self.max_header_size = settings.max_header_size
        self.verify_tls = settings.verify_tls
        user_agent = settings.user_agent
        defaults = [
            ("User-Agent", user_agent),
            ("Accept", ACCEPT),
            ("Accept-Encoding", ACCEPT_ENCODING),
        ]
        # A configured header replaces the default of the same name.
        replaced = {name.lower() for name, _ in extra_headers}
        self._headers = [h for h in defaults if h[0].lower() not in replaced]
        self._headers += list(extra_headers)
        self._conn: _Connection | None = None

    async def fetch(
        self, url: str, ip: str, *, conditions: Sequence[tuple[str, str]] = (),
        method: str = "GET", body: bytes = b"", headers: Sequence[tuple[str, str]] = (),
    ) -> FetchResult:
        """Send `method` (GET, HEAD or POST) for `url` to address `ip`, with the request headers
        ``conditions`` (a conditional request: ``web.http.conditions``) and ``headers`` (each
        replaces a default, configured or condition header of the same name; Host is always the
        URL's, a second one a ``request`` error); redirects are returned, not
        followed. A POST sends ``body`` with its ``Content-Length`` and always goes on a new
        connection: it is not idempotent, so it is never sent on a kept-alive one the server may
        be closing, where a retry could submit it twice. Another method with a body is a
        ``request`` error."""
        result = FetchResult(url=url, ip=ip, started=time.time())
        t0 = trio.current_time()
        received = bytearray()
        try:
            request = self._request(url, method, body, conditions, headers)
            with trio.move_on_at(t0 + self.total_timeout) as total:
                await self._fetch(url, ip, request, result, t0, received)
            if total.cancelled_caught:
                if result.status is None:
                    result.error = "timeout: total"
                else:
                    result.truncated = "time"
        except _Failed as exc:
            result.error = str(exc)
        finally:
            if self._conn is not None and not self._conn.reusable:
                self._conn.close()
                self._conn = None
        result.body = bytes(received)
        result.elapsed = trio.current_time() - t0
        return result

    async def aclose(self) -> None:
        """Close the kept-alive connection, if any."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        await trio.lowlevel.checkpoint()

    def _request(
        self, url: str, method: str, body: bytes, conditions: Sequence[tuple[str, str]],
        headers: Sequence[tuple[str, str]],
    ) -> _Request:
        """The request to send; _Failed if it cannot be one."""
        try:
            target = _Target.parse(url)
        except ValueError as exc:
            raise _Failed(f"url: {exc}") from None
        if method not in METHODS:
            raise _Failed(f"request: unsupported method {method!r}")
        if body and method != "POST":
            raise _Failed(f"request: a {method} has no body")
        fields = [("Host", target.host_header), *self._headers, *conditions]
        if headers:
            replaced = {name.lower() for name, _ in headers}
            fields = [fields[0], *(h for h in fields[1:] if h[0].lower() not in replaced), *headers]
        if method == "POST":
            fields = [h for h in fields if h[0].lower() != "content-length"]
            fields.append(("Content-Length", str(len(body))))
        try:
            head = h11.Request(method=method, target=target.target, headers=fields)
        except (h11.LocalProtocolError, UnicodeError) as exc:  # a header h11 refuses
            raise _Failed(f"request: {_short(exc)}") from None
        return _Request(target, head, body)

    async def _fetch(
        self, url: str, ip: str, request: _Request, result: FetchResult, t0: float,
        received: bytearray,
    ) -> None:
        target = request.target
        key = (target.scheme, ip, target.port, target.host)
        conn = self._conn
        idempotent = request.head.method != b"POST"
        if conn is not None and not (
            idempotent and conn.key == key and conn.reusable and conn.idle_alive()
        ):
            conn.close()
            conn = self._conn = None
        if conn is not None:
            conn.reusable = False
            try:
                await self._exchange(conn, request, result, t0, received)
                return
            except _Dead:
                # The server closed the idle connection as we reused it: one retry on a new
                # connection, as browsers and urllib3 do for requests without side effects.
                conn.close()
                self._conn = None
        self._conn = await self._connect(target, ip, key)
        try:
            await self._exchange(self._conn, request, result, t0, received)
        except _Dead as exc:
            raise _Failed(f"reset: {exc}") from None

    async def _connect(
        self, target: _Target, ip: str, key: tuple[str, str, int, str]
    ) -> _Connection:
        try:
            family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
        except ValueError:
            raise _Failed(f"connect: not an IP address: {ip!r}") from None
        reason = refusal(ip, self.allowed_networks)
        if reason is not None:
            raise _Failed(f"address-refused: {ip} is {reason}")
        try:
            sock = trio.socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            raise _Failed(f"connect: {_os_reason(exc)}") from None
        try:
            with trio.move_on_after(self.connect_timeout) as scope:
                try:
                    await sock.connect((ip, target.port))
                except OSError as exc:
                    raise _Failed(f"connect: {_os_reason(exc)}") from None
                stream: trio.abc.Stream = trio.SocketStream(sock)
                if target.scheme == "https":
                    stream = await self._handshake(stream, target.host)
            if scope.cancelled_caught:
                raise _Failed("timeout: connect")
        except BaseException:
            sock.close()
            raise
        http = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=self.max_header_size)
        return _Connection(key, sock, stream, http)

    async def _handshake(self, stream: trio.abc.Stream, host: str) -> trio.SSLStream[trio.abc.Stream]:
        try:
            tls = trio.SSLStream(
                stream,
                _tls_context(self.verify_tls),
                server_hostname=host,
                # Most servers end HTTPS responses without a TLS close_notify; treat that
                # as a plain EOF, as browsers do (trio's documented setting for HTTPS).
                https_compatible=True,
            )
            await tls.do_handshake()
        except (trio.BrokenResourceError, ValueError) as exc:
            raise _Failed(f"tls: {_tls_reason(exc)}") from None
        return tls

    async def _exchange(
        self,
        conn: _Connection,
        request: _Request,
        result: FetchResult,
        t0: float,
        body: bytearray,
    ) -> None:
        http = conn.http
        try:
            sent = http.send(request.head) or b""
            if request.body:
                sent += http.send(h11.Data(data=request.body)) or b""
            result.request = sent + (http.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError as exc:  # only if the connection's state were wrong
            raise _Failed(f"request: {_short(exc)}") from None
        response = None
        with trio.move_on_after(self.first_byte_timeout):
            response = await self._read_head(conn, result, t0)
        if response is None:
            raise _Failed("timeout: first-byte")
        result.status = response.status_code
        result.reason = response.reason.decode("latin-1")
        result.headers = [
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw_items()
        ]
        await self._read_body(conn, result, body)

    async def _read_head(self, conn: _Connection, result: FetchResult, t0: float) -> h11.Response:
        """Send the request and read up to the final response head, kept in `result.head`."""
        http = conn.http
        raw = bytearray()  # bytes received since the start of the head being parsed
        try:
            await conn.stream.send_all(result.request)
            while True:
                event = http.next_event()
                if event is h11.NEED_DATA:
                    data = await conn.stream.receive_some(READ_SIZE)
                    if result.first_byte is None:
                        if not data:
                            raise _Dead("closed before response")
                        result.first_byte = trio.current_time() - t0
                    raw += data
                    http.receive_data(bytes(data))
                    continue
                consumed = len(raw) - len(http.trailing_data[0])
                if isinstance(event, h11.Response):
                    head = bytes(raw[:consumed])
                    result.head = _TE_LINE.sub(RENAMED_TE, head)
                    return event
                if not isinstance(event, h11.InformationalResponse):
                    # Not reachable with h11 today; looping on it would spin without a checkpoint.
                    raise _Failed(f"protocol: unexpected {type(event).__name__}")
                # An interim 1xx response: dropped (see the module docstring).
                del raw[:consumed]
        except (trio.BrokenResourceError, OSError) as exc:
            reason = _short(exc.__cause__ or exc)
            if result.first_byte is None:
                raise _Dead(reason) from None
            raise _Failed(f"reset: {reason}") from None
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint == 431:
                raise _Failed("protocol: headers too large") from None
            raise _Failed(f"protocol: {_short(exc)}") from None

    async def _read_body(self, conn: _Connection, result: FetchResult, body: bytearray) -> None:
        """Read the body into `body`; mark the connection reusable when the server allows."""
        http = conn.http
        eof = False
        try:
            while True:
                event = http.next_event()
                if event is h11.NEED_DATA:
                    data = await conn.stream.receive_some(READ_SIZE)
                    eof = not data
                    http.receive_data(bytes(data))
                elif isinstance(event, h11.Data):
                    room = self.max_size - len(body)
                    if len(event.data) > room:
                        body += event.data[:room]
                        result.truncated = "length"
                        return
                    body += event.data
                else:  # EndOfMessage, the only other event h11 gives in a response body
                    # Bytes beyond the declared length are not a response to anything: a
                    # connection holding some is not reused.
                    if (
                        http.our_state is h11.DONE
                        and http.their_state is h11.DONE
                        and http.trailing_data == (b"", False)
                    ):
                        http.start_next_cycle()
                        conn.reusable = True
                    return
        except (trio.BrokenResourceError, OSError):
            result.truncated = "disconnect"
        except h11.RemoteProtocolError:
            result.truncated = "disconnect" if eof else "unspecified"


def request_target(url: str) -> str | None:
    """The request target `HttpClient.fetch` sends for `url` (the path and query exactly as
    given: what a Digest ``uri=`` must repeat), or None for a URL it sends nothing for."""
    try:
        return _Target.parse(url).target
    except ValueError:
        return None


@functools.cache
def _tls_context(verify: bool) -> ssl.SSLContext:
    if verify:
        context = ssl.create_default_context()
    else:
        # An archive keeps what a site serves, whatever its certificate: Heritrix trusts
        # all certificates by default, and wget has --no-check-certificate for the same end.
        # Old protocol versions and ciphers stay allowed so old servers remain reachable.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.set_ciphers("ALL:@SECLEVEL=0")
    context.set_alpn_protocols(["http/1.1"])
    return context


def _tls_reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"certificate: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError) and cause.reason:
        return cause.reason.lower().replace("_", " ")
    return _short(cause) or type(cause).__name__


def _os_reason(exc: OSError) -> str:
    # trio's connect error names the address too; the caller knows it already.
    return os.strerror(exc.errno) if exc.errno else _short(exc)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON] + "..."
