"""The systemd units in systemd/ as files: the archiver command lines they run, their hardening,
their timeouts and the target that pulls them in."""

from __future__ import annotations

import ipaddress
import re
import shlex

import pytest

from archiver import cli, config
from archiver.config import Config
from archiver.crawl.openfiles import CONNECTIONS_PER_SITE, budget
from archiver.web.netpolicy import NON_PUBLIC
from tests.support.systemdunits import INSTALLED, SERVICES, UNIT_FILES, directives, one

CONFIG = "/etc/archiver/archiver.toml"
# Every service runs as this user on these directories, with at least this sandbox.
SHARED = {
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectControlGroups": "yes",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "SystemCallArchitectures": "native",
    "User": "archiver",
    "ConfigurationDirectory": "archiver",
}
# The only address the crawler and DNS units let through among those they deny: systemd-resolved's
# stub resolver.
RESOLVER_STUB = ipaddress.ip_network("127.0.0.53/32")


@pytest.mark.parametrize("service", SERVICES)
def test_exec_start_is_a_valid_archiver_command(service):
    argv = shlex.split(one(service, "Service.ExecStart").replace("%i", "0"))
    assert argv[0] == INSTALLED
    args = cli.parser().parse_args(argv[1:])
    assert args.config == CONFIG == f"/etc/{one(service, 'Service.ConfigurationDirectory')}/archiver.toml"
    expected = {
        "archiver-crawl@.service": ["crawl", "run", "--process", "0"],
        "archiver-dns.service": ["dns", "run"],
        "archiver-links.service": ["links", "run", "--once"],
        "archiver-replay.service": ["replay", "run"],
    }[service]
    assert [a for a in argv[1:] if a not in ("--config", CONFIG)] == expected


@pytest.mark.parametrize("service", SERVICES)
def test_every_service_is_hardened_alike(service):
    found = directives(service)
    assert {k: found.get(f"Service.{k}") for k in SHARED} == {k: [v] for k, v in SHARED.items()}
    assert found["Unit.PartOf"] == ["archiver.target"]


@pytest.mark.parametrize("service", ["archiver-crawl@.service", "archiver-dns.service"])
@pytest.mark.parametrize(("network", "reason"), NON_PUBLIC, ids=lambda value: str(value))
def test_fetching_units_deny_every_range_the_crawler_refuses(service, network, reason):
    """The kernel's layer (IPAddressDeny=) covers every non-public range archiver.web.netpolicy
    refuses, as the application derives them, and lets through only the resolver stub."""
    denied = [ipaddress.ip_network(value)
              for line in directives(service)["Service.IPAddressDeny"] for value in line.split()]
    assert any(network.version == net.version and network.subnet_of(net) for net in denied), (
        f"{service} does not deny {network} ({reason})")
    assert [ipaddress.ip_network(v) for v in one(service, "Service.IPAddressAllow").split()] == [
        RESOLVER_STUB]
    assert one(service, "Service.StateDirectory") == "archiver"


def test_replay_reads_a_read_only_archive_and_reaches_no_network():
    found = directives("archiver-replay.service")
    assert found["Service.ReadOnlyPaths"] == ["/var/lib/archiver"]
    assert "Service.StateDirectory" not in found and "Service.ReadWritePaths" not in found
    assert found["Service.IPAddressDeny"] == ["any"]
    assert found["Service.IPAddressAllow"] == ["localhost"]


@pytest.mark.parametrize("service", SERVICES)
def test_every_service_sets_its_open_files_limit(service):
    assert int(one(service, "Service.LimitNOFILE")) >= 1024


def test_the_crawler_limit_holds_its_whole_budget():
    """The default crawl gets its full pools of shard connections under the unit's limit."""
    defaults = Config()
    sites, shards = defaults.crawl.sites_per_process, defaults.catalog.shards
    limit = int(one("archiver-crawl@.service", "Service.LimitNOFILE"))
    assert budget(limit, sites, shards).catalog_connections == min(
        shards, CONNECTIONS_PER_SITE * sites)


def _bytes(value: str) -> int:
    return int(value[:-1]) * 1024 ** "KMGT".index(value[-1]) * 1024


def test_replay_memory_is_limited_above_its_bounds():
    """SQLite's memory per shard connection (a 64 KiB page cache and its statements; 1 MiB
    counted), its rewriting processes (about 500 MiB each
    for a document of replay.max_rewrite_size) and the answers in flight: about 2.5 GiB."""
    replay = config.Config().replay
    high = _bytes(one("archiver-replay.service", "Service.MemoryHigh"))
    most = _bytes(one("archiver-replay.service", "Service.MemoryMax"))
    bounds = config.Config().catalog.shards * 2**20 + replay.rewrite_workers * 500 * 2**20 + 2**29
    assert bounds < high < most
    assert replay.max_rewrite_size <= 16 * 2**20  # the size the 500 MiB a worker was measured at


def test_crawler_stop_timeout_exceeds_the_drain():
    stop = int(one("archiver-crawl@.service", "Service.TimeoutStopSec"))
    assert stop >= config.Config().crawl.drain_timeout + 30  # room to flush and fsync after it


def test_target_pulls_in_shipped_units():
    wanted = one("archiver.target", "Unit.Wants").split()
    assert wanted == [
        "archiver-dns.service",
        "archiver-links.timer",
        "archiver-replay.service",
        "archiver-crawl@0.service",
    ]
    shipped = {re.sub(r"@[^.]+\.", "@.", name) for name in wanted}
    assert shipped <= set(UNIT_FILES)
    assert one("archiver-crawl@.service", "Install.WantedBy") == "archiver.target"
