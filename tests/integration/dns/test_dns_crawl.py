"""The DNS history in use: the service resolves ahead, the crawler reads it, the CLI answers by date."""

from __future__ import annotations

import json
import subprocess

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.dns.service import refresh_pass
from archiver.store.embedded.dnshistory import DnsHistory
from demoweb import WebSpec, start_demo
from tests.support.crawls import captures, load, records, write_config
from tests.support.dnsserver import DnsServer, TestZone
from tests.support.repo import ARCHIVER, archiver_here


async def cli(*args: str) -> trio.CompletedProcess:
    return await trio.run_process([*ARCHIVER, *args], capture_stdout=True, capture_stderr=True,
                                  check=False)


def cli_here(*args: str) -> subprocess.CompletedProcess[bytes]:
    """A reading verb run in this process (``archiver_here``): no child's start-up each time."""
    return archiver_here(*args)


async def test_service_history_and_lookup_by_date(tmp_path):
    zone = TestZone()
    zone.set("www.example.test", a=["127.0.0.1"])
    async with trio.open_nursery() as nursery:
        server = DnsServer(zone)
        port = await nursery.start(server.serve)
        web_stub = type("Web", (), {"hosts_file": lambda self: ""})()
        cfg = write_config(tmp_path, web_stub, dns_port=port)
        names = tmp_path / "names.txt"
        names.write_text("# names to keep fresh\nwww.example.test\nalias.example.test\n")
        conf = ["--config", str(cfg)]
        first = await cli("dns", "refresh", *conf, "--once", "--hosts", str(names), "--force")
        assert first.returncode == 0, first.stderr
        assert b"2 asked, 1 ok" in first.stdout                      # alias.example.test: NXDOMAIN
        zone.set("www.example.test", a=["127.0.0.1", "127.0.0.2"])
        zone.set("alias.example.test", cname="www.example.test")
        second = await cli("dns", "refresh", *conf, "--once", "--hosts", str(names), "--force")
        assert b"2 asked, 2 ok" in second.stdout
        zone.set("www.example.test", a=["127.0.0.2"])
        third = await cli("dns", "refresh", *conf, "--once", "--hosts", str(names), "--force")
        assert third.returncode == 0
        history = cli_here("dns", "history", "www.example.test", *conf, "--json")
        nursery.cancel_scope.cancel()

    rows = json.loads(history.stdout)
    ids = {r["id"] for r in rows}
    assert len(ids) == 1                                  # one canonical host, one id
    by_value = {(r["type"], r["value"]): r for r in rows}
    assert by_value[("canonical", "www.example.test")]["superseded"] is None
    assert by_value[("alias", "alias.example.test")]["superseded"] is None
    first_address = by_value[("address", "127.0.0.1")]
    assert first_address["superseded"] is not None     # 127.0.0.1 went away in the third pass
    assert by_value[("address", "127.0.0.2")]["superseded"] is None
    before = cli_here("dns", "lookup", "www.example.test", "--at", "1996-12-01", "--config", str(cfg))
    assert before.returncode == 1 and b"no record" in before.stdout
    now = cli_here("dns", "lookup", "alias.example.test", "--json", "--config", str(cfg))
    answer = json.loads(now.stdout)
    assert answer["canonical"] == "www.example.test" and answer["addresses"] == ["127.0.0.2"]
    # Between-the-changes answers are asserted with an exact clock in test_dnsresolver.py; the
    # passes here fall within one second, finer than the CLI's dates.
    later = cli_here("dns", "lookup", "www.example.test", "--at", "2100", "--config", str(cfg))
    assert later.returncode == 0 and b"address 127.0.0.2" in later.stdout
    bad = cli_here("dns", "lookup", "www.example.test", "--at", "1996-13-01", "--config", str(cfg))
    assert bad.returncode == 2 and b"date" in bad.stderr.lower()


async def test_crawler_reads_the_history_and_survives_dns_failures(tmp_path):
    zone = TestZone()
    async with trio.open_nursery() as nursery:
        web, _ = await start_demo(nursery, WebSpec(sites=3, pages_per_site=5, port=0, trap=False))
        for host in web.hosts:
            zone.set(host, a=["127.0.0.1"])
        for name in ("gone.demo", "late.demo"):
            zone.set(name, a=["127.0.0.1"])
        zone.servfail("broken.demo")
        zone.blackhole("silent.demo")
        server = DnsServer(zone)
        port = await nursery.start(server.serve)
        config = load(write_config(tmp_path, web, dns_port=port, site_retries=1, retry_delay=0.1))
        origins = web.origins()
        port_of_web = origins[0].rsplit(":", 1)[1]
        failing = [f"http://{h}:{port_of_web}/" for h in ("gone.demo", "broken.demo", "silent.demo")]
        enqueue_seeds(config, 0, [o + "/" for o in origins] + failing)
        with DnsHistory(config.root / "dns.sqlite") as history:
            stats = await refresh_pass(config, history)
        assert stats.ok == len(web.hosts) + 1
        assert stats.failed == {"servfail": 1, "timeout": 1}
        zone.remove("gone.demo")
        with DnsHistory(config.root / "dns.sqlite") as history:
            await refresh_pass(config, history, force=True)     # the failures are recorded
        asked_before = len(server.queries)
        late = f"http://late.demo:{port_of_web}/"                # never seen by the service
        enqueue_seeds(config, 0, [late])
        with trio.fail_after(60):  # a guard against a stall, not a speed target
            await Crawler(config, until_idle=True).run()
        nursery.cancel_scope.cancel()

    asked_during_crawl = {q[0] for q in server.queries[asked_before:]}
    # Only the name the service never saw, and the failed ones once their retry time came.
    assert "late.demo" in asked_during_crawl
    assert asked_during_crawl <= {"late.demo", "broken.demo", "silent.demo"}
    caps = captures(config.root)
    expected = {u for u in web.expected("archiver") if "robots500" not in u}
    assert expected <= set(caps)
    assert not [u for u in caps if any(b in u for b in ("gone.", "broken.", "silent."))]
    assert {r.rec_headers.get_header("WARC-IP-Address") for r, _ in records(config.root)} == {
        "127.0.0.1"}
    with DnsHistory(config.root / "dns.sqlite") as history:
        assert history.state("gone.demo").outcome == "nxdomain"
        assert history.state("broken.demo").outcome == "servfail"
        assert history.state("silent.demo").outcome == "timeout"
        late_rows = [r for r in history.history("late.demo") if r.type == "address"]
        assert [(r.value, r.source) for r in late_rows] == [("127.0.0.1", "inline")]
        assert history.current("gone.demo") is None or not history.current("gone.demo").addresses
