"""A small authoritative DNS server on 127.0.0.1 for the tests (dnspython messages over trio sockets).

It answers A, AAAA and CNAME queries from a :class:`TestZone` the test mutates between passes: NXDOMAIN for
unknown names, CNAME chains followed inside the zone, NOERROR with no data for a known name without the asked
type, SERVFAIL or silence on demand, and the TC bit over UDP when an answer does not fit (512 bytes, RFC 1035
section 4.2.1, or the client's EDNS payload size) so the client retries over TCP (RFC 7766).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import trio

LOCAL = "127.0.0.1"
UDP_LIMIT = 512  # RFC 1035 section 4.2.1: UDP messages without EDNS are limited to 512 bytes
MAX_CHAIN = 16  # CNAME hops followed before giving up, as dnspython's resolve_chaining does


def _key(name: str | dns.name.Name) -> str:
    text = name.to_text(omit_final_dot=True) if isinstance(name, dns.name.Name) else name
    return text.lower().rstrip(".")


@dataclass
class _Entry:
    a: tuple[str, ...] = ()
    aaaa: tuple[str, ...] = ()
    cname: str | None = None
    ttl: int = 60
    mode: str = "answer"  # "answer", "servfail" or "blackhole"


class TestZone:
    """The names the server knows; mutable from the test between passes."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def set(
        self, name: str, *, a: list[str] = (), aaaa: list[str] = (), cname: str | None = None, ttl: int = 60
    ) -> None:
        if cname is not None and (a or aaaa):
            raise ValueError("a CNAME owner has no other data (RFC 1034 section 3.6.2)")
        self._entries[_key(name)] = _Entry(tuple(a), tuple(aaaa), cname and _key(cname), ttl)

    def remove(self, name: str) -> None:
        self._entries.pop(_key(name), None)

    def servfail(self, name: str) -> None:
        self._entries.setdefault(_key(name), _Entry()).mode = "servfail"

    def blackhole(self, name: str) -> None:
        self._entries.setdefault(_key(name), _Entry()).mode = "blackhole"

    def respond(self, query: dns.message.Message) -> dns.message.Message | None:
        """The response to ``query``, or None to stay silent."""
        question = query.question[0]
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        owner, rdtype = question.name, question.rdtype
        for _ in range(MAX_CHAIN):
            entry = self._entries.get(_key(owner))
            if entry is None:
                response.set_rcode(dns.rcode.NXDOMAIN)  # RFC 6604: rcode of the last name in the chain
                return response
            if entry.mode == "blackhole":
                return None
            if entry.mode == "servfail":
                response.answer.clear()
                response.set_rcode(dns.rcode.SERVFAIL)
                return response
            if entry.cname is None or rdtype == dns.rdatatype.CNAME:
                break
            target = dns.name.from_text(entry.cname)
            response.answer.append(dns.rrset.from_text(owner, entry.ttl, "IN", "CNAME", target.to_text()))
            owner = target
        values = {dns.rdatatype.A: entry.a, dns.rdatatype.AAAA: entry.aaaa}.get(rdtype, ())
        if rdtype == dns.rdatatype.CNAME and entry.cname is not None:
            values = (dns.name.from_text(entry.cname).to_text(),)
        if values:
            response.answer.append(dns.rrset.from_text_list(owner, entry.ttl, "IN", rdtype, list(values)))
        return response


class DnsServer:
    """Serves a :class:`TestZone` over UDP and TCP on one free port of 127.0.0.1."""

    def __init__(self, zone: TestZone) -> None:
        self.zone = zone
        self.queries: list[tuple[str, str, str]] = []  # (qname, qtype, transport)

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        udp, listeners = await self._bind()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._serve_udp, udp)
            nursery.start_soon(trio.serve_listeners, self._serve_tcp, listeners)
            task_status.started(udp.getsockname()[1])

    async def _bind(self) -> tuple[trio.socket.SocketType, list[trio.SocketListener]]:
        """A TCP listener on a free port, then UDP on the same port (retried if UDP's is taken)."""
        for _ in range(20):
            listeners = await trio.open_tcp_listeners(0, host=LOCAL)
            udp = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
            try:
                await udp.bind((LOCAL, listeners[0].socket.getsockname()[1]))
            except OSError:
                udp.close()
                for listener in listeners:
                    await listener.aclose()
                continue
            return udp, listeners
        raise OSError("no port free for both UDP and TCP on 127.0.0.1")

    def _reply(self, wire: bytes, transport: str) -> bytes | None:
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None  # garbage: ignore it, as servers do with unparseable datagrams
        if len(query.question) != 1:
            return None
        question = query.question[0]
        self.queries.append((_key(question.name), dns.rdatatype.to_text(question.rdtype), transport))
        response = self.zone.respond(query)
        if response is None:
            return None
        # Records in zone order, not dnspython's default shuffle (BIND's rrset-order fixed), so that
        # tests can assert the order a client keeps.
        reply = response.to_wire(want_shuffle=False)
        limit = max(UDP_LIMIT, query.payload) if query.edns >= 0 else UDP_LIMIT
        if transport == "udp" and len(reply) > limit:
            truncated = dns.message.make_response(query)
            truncated.flags |= dns.flags.AA | dns.flags.TC
            reply = truncated.to_wire()
        return reply

    async def _serve_udp(self, sock: trio.socket.SocketType) -> None:
        with sock:
            while True:
                wire, peer = await sock.recvfrom(65535)
                reply = self._reply(wire, "udp")
                if reply is not None and peer[0] == LOCAL:
                    await sock.sendto(reply, peer)

    async def _serve_tcp(self, stream: trio.SocketStream) -> None:
        """RFC 1035 section 4.2.2 framing: each message is preceded by its 2-byte length."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                while (head := await _receive_exactly(stream, 2)) is not None:
                    wire = await _receive_exactly(stream, int.from_bytes(head, "big"))
                    if wire is None:
                        return
                    reply = self._reply(wire, "tcp")
                    if reply is not None:
                        await stream.send_all(len(reply).to_bytes(2, "big") + reply)


async def _receive_exactly(stream: trio.SocketStream, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


async def start_dns(nursery: trio.Nursery, zone: TestZone) -> int:
    """Start a :class:`DnsServer` for ``zone`` in ``nursery``; return its port."""
    return await nursery.start(DnsServer(zone).serve)
