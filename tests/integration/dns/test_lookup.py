"""The resolver's inline answers (from the test DNS server on 127.0.0.1)."""

import trio

from archiver.dns.lookup import Lookup, Resolution
from archiver.dns.resolver import Resolver
from archiver.store.embedded.dnshistory import DnsHistory
from tests.support.dnsserver import LOCAL, TestZone, start_dns


async def test_an_inline_answer_the_history_refuses_is_an_error(tmp_path, nursery: trio.Nursery):
    zone = TestZone()
    zone.set("odd.test", cname="10.1")  # valid DNS, but "10.1" reads as an address to the history
    zone.set("10.1", a=["192.0.2.1"])
    port = await start_dns(nursery, zone)
    with DnsHistory(tmp_path / "dns.sqlite") as history:
        r = Lookup(hosts_file=None, history=history,
                     dns=Resolver(nameservers=(f"{LOCAL}:{port}",), timeout=0.5),
                     min_age=60, max_age=3600, retry_base=10, retry_max=100)
        assert await r.resolve("odd.test") == Resolution("odd.test", (), "dns", "error")
        state = history.state("odd.test")
        assert (state.outcome, state.failures) == ("error", 1) and history.current("odd.test") is None
