"""Hosts-file parsing, nameserver parsing, and the resolver's hosts/literal paths."""


from archiver.dns.lookup import Lookup, parse_hosts
from archiver.dns.resolver import Resolver, parse_nameserver
from archiver.store.embedded.dnshistory import DnsHistory


def test_parse_hosts():
    table = parse_hosts("""
# comment
127.0.0.1   localhost site-a.demo  Site-B.Demo.   # trailing
::1 ip6-localhost
not-an-ip  bogus
127.0.0.2 site-a.demo
""")
    assert table["site-a.demo"] == ["127.0.0.1", "127.0.0.2"]
    assert table["site-b.demo"] == ["127.0.0.1"]
    assert table["ip6-localhost"] == ["::1"]
    assert "bogus" not in table


def test_parse_nameserver():
    assert parse_nameserver("127.0.0.1") == ("127.0.0.1", 53)
    assert parse_nameserver("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_nameserver("[::1]:5353") == ("::1", 5353)
    assert parse_nameserver("::1") == ("::1", 53)


async def test_resolver_uses_literals_and_hosts_file(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.5 www.demo\n")
    history = DnsHistory(tmp_path / "dns.sqlite")
    r = Lookup(hosts_file=hosts, history=history,
                 dns=Resolver(nameservers=("127.0.0.1:9",), timeout=1),
                 min_age=60, max_age=3600, retry_base=10, retry_max=100)
    got = await r.resolve("www.demo")
    assert got.addresses == ("127.0.0.5",) and got.source == "hosts"
    [row] = [r for r in history.history("www.demo") if r.type == "address"]
    assert (row.value, row.source) == ("127.0.0.5", "hosts")   # the override is recorded as such
    literal = await r.resolve("127.0.0.9")
    assert literal.addresses == ("127.0.0.9",) and literal.source == "literal"
    v6 = await r.resolve("[::1]")
    assert v6.addresses == ("::1",)
