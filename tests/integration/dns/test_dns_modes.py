"""``archiver dns`` in both modes: the hosts of the queued sites (every crawler's queue, or the
one shared queue in PostgreSQL) resolved by ``dns refresh --once`` from the test DNS server, then
answered by ``dns lookup`` and ``dns history`` from the mode's DNS history."""

from __future__ import annotations

import json
import subprocess
import time

import trio

from archiver.dns.service import queued_hosts
from tests.support.dnsserver import TestZone, start_dns
from tests.support.repo import ARCHIVER, archiver_here
from tests.support.storemodes import ModeArchive


async def cli(archive: ModeArchive, *args: str) -> trio.CompletedProcess:
    return await trio.run_process([*ARCHIVER, "dns", *args, "--config", str(archive.path)],
                                  capture_stdout=True, capture_stderr=True, check=False)


def here(archive: ModeArchive, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The verb run in this process (``archiver_here``): it reads the DNS history only."""
    return archiver_here("dns", *args, "--config", str(archive.path))


async def test_queued_hosts_are_resolved_and_answered(mode_archive: ModeArchive,
                                                       nursery: trio.Nursery) -> None:
    zone = TestZone()
    zone.set("www.queued.test", a=["192.0.2.1"])
    zone.set("alias.queued.test", cname="www.queued.test")
    zone.set("done.queued.test", a=["192.0.2.9"])
    zone.set("soon.queued.test", a=["192.0.2.7"])
    port = await start_dns(nursery, zone)
    mode_archive.path.write_text(mode_archive.path.read_text().replace(
        'nameservers = ["127.0.0.1:9"]', f'nameservers = ["127.0.0.1:{port}"]\ntimeout = 0.5'))
    # A revisit due before the next pass is resolved ahead; one due next week is not yet.
    mode_archive.queue_sites({0: ["http://www.queued.test", "https://www.queued.test"],
                              1: ["http://alias.queued.test:8080"]}, done=["http://done.queued.test"],
                             revisits={"http://soon.queued.test": time.time() + 30,
                                       "http://later.queued.test": time.time() + 7 * 86400})
    assert sorted(queued_hosts(mode_archive.stores)) == ["alias.queued.test", "www.queued.test"]
    assert sorted(queued_hosts(mode_archive.stores, time.time() + 60)) == [
        "alias.queued.test", "soon.queued.test", "www.queued.test"]

    refreshed = await cli(mode_archive, "refresh", "--once")
    assert refreshed.returncode == 0, refreshed.stderr
    # Both names asked at once: which of them records the shared canonical host first varies.
    assert b"dns refresh: 3 asked, 3 ok, " in refreshed.stdout
    lookup = await cli(mode_archive, "lookup", "alias.queued.test", "--json")
    assert lookup.returncode == 0, lookup.stderr
    answer = json.loads(lookup.stdout)
    assert (answer["canonical"], answer["addresses"]) == ("www.queued.test", ["192.0.2.1"])
    history = here(mode_archive, "history", "www.queued.test", "--json")
    rows = {(r["type"], r["value"]) for r in json.loads(history.stdout)}
    assert rows == {("canonical", "www.queued.test"), ("address", "192.0.2.1"),
                    ("alias", "alias.queued.test")}
    never = here(mode_archive, "lookup", "done.queued.test")
    assert never.returncode == 1 and b"no record" in never.stdout
