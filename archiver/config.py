"""Load and validate archiver's TOML configuration.

One file configures every service. Each section is a frozen dataclass whose field defaults are the
shipped defaults (``config/archiver.toml`` documents each one). Loading is strict: an unknown key, a
value of the wrong type or out of range raises :class:`ConfigError` naming the file, the key and the
problem, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from archiver.credentials import (
    ENVIRONMENT_VARIABLE,
    Credential,
    CredentialsError,
    credentials_path,
    load_credentials,
)
from archiver.web.fuzzy import DEFAULT_RULES, FuzzyError, FuzzyRule, make_rule
from archiver.web.gatekeepers import DEFAULT_RULES as GATEKEEPER_RULES
from archiver.web.gatekeepers import GatekeeperError, GatekeeperRule
from archiver.web.gatekeepers import make_rule as make_gatekeeper_rule
from archiver.web.netpolicy import parse_networks
from archiver.web.scope import Scope, ScopeError, scope_of
from archiver.web.sheets import LOGIN_KEYS, Sheet, SheetError, make_login, make_sheet


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class ArchiveConfig:
    root: Path = Path("archive")
    operator: str = ""


@dataclass(frozen=True)
class CrawlConfig:
    agent: str = "archiver"
    user_agent: str = "archiver/0.1 (+https://example.org/archiver; archival crawler)"
    processes: int = 1
    sites_per_process: int = 64
    # Connections to one IP address at once across the process, whatever names lead there.
    connections_per_address: int = 1
    # Rest between two fetches from one site: max(min_rest, Crawl-delay capped at max_rest,
    # rest_factor x last response time capped at max_rest). Heritrix's defaults are 3 s / 30 s / x5.
    min_rest: float = 3.0
    max_rest: float = 30.0
    rest_factor: float = 5.0
    # 429/503 (see archiver.crawl.politeness): Retry-After is waited out as given, up to max_retry_after;
    # without it the back-off doubles from backoff_start up to max_backoff and is gone after
    # backoff_recovery_fetches other answers. The URL goes back to the crawl queue, never dropped;
    # max_rate_limited such answers in a row end the visit (the site is retried later).
    max_retry_after: float = 600.0
    backoff_start: float = 5.0
    max_backoff: float = 600.0
    backoff_recovery_fetches: int = 8
    max_rate_limited: int = 10
    # A site whose robots.txt is unreachable or 5xx, or whose server fails max_failures times in a
    # row, goes back to the queue after retry_delay (doubling per attempt); after site_retries
    # attempts it is deferred for defer_delay and --until-idle stops waiting for it.
    max_failures: int = 5
    # An unexpected error while handling one URL costs that URL (logged with its traceback, counted
    # as errors=internal); only this many in a row end the visit.
    max_internal_errors: int = 5
    site_retries: int = 3
    retry_delay: float = 60.0
    defer_delay: float = 6 * 3600.0
    # Revisits (archiver.queues.revisits): a finished site is visited again after revisit_interval
    # seconds (0: never), then after the mean time its pages took to change on earlier visits,
    # held between revisit_min and revisit_max. A week, as wide crawls come back to most sites;
    # a day at least (a visit of a large site can take that long, at one fetch per rest); a
    # quarter at most, so a quiet site's removals are seen within one.
    revisit_interval: float = 7 * 86400.0
    revisit_min: float = 86400.0
    revisit_max: float = 90 * 86400.0
    # What a capture need not store again: "url" asks conditionally when the URL's last capture
    # had a validator and stores a 304 or the same payload again as a revisit record; "digest"
    # also stores as a revisit a payload the archive has under another URL (the catalog's digest
    # index); "off" stores every answer whole and asks unconditionally.
    dedupe: str = "url"
    # Per-site guards.
    max_pages: int = 100_000
    max_bytes: int = 10 * 2**30
    max_depth: int = 100
    max_url_length: int = 2048
    max_repeated_segments: int = 3
    # Fetched pages of one URL shape (path and query with digit runs as "#") that found no new link
    # of another shape, before new links of that shape are skipped (calendars, endless pagination).
    max_per_shape: int = 40
    # Decisions kept per site about URLs the crawl did not capture (robots.txt, guards, fetch
    # errors: archiver.queues.decisions), for `archiver why`; 0 keeps none. About 100 bytes each.
    max_decisions: int = 10_000
    # Per-fetch limits. A response is held in memory until written, so max_response_size bounds
    # memory per active site; max_decoded_size caps decompression for link extraction (gzip bombs).
    connect_timeout: float = 10.0
    first_byte_timeout: float = 30.0
    total_timeout: float = 120.0
    max_response_size: int = 16 * 2**20
    max_header_size: int = 64 * 1024
    max_decoded_size: int = 16 * 2**20
    verify_tls: bool = False
    # Non-public networks (CIDR) the crawler may still fetch from; every other loopback, private,
    # link-local, CGNAT, multicast or reserved address is refused at connect time
    # (archiver.web.netpolicy). The demo web and the tests, which live on 127.0.0.1, set 127.0.0.0/8.
    allowed_networks: tuple[str, ...] = ()
    site_bitmap_bits: int = 262_144
    site_bitmap_max_fp: float = 1e-3
    status_interval: float = 5.0
    poll_interval: float = 5.0
    # SIGTERM: stop taking sites, let fetches in flight finish for at most this long, then cancel
    # what is left; either way the process flushes, fsyncs and exits 0 (systemd's
    # TimeoutStopSec must be larger).
    drain_timeout: float = 30.0
    # With shared state in PostgreSQL, a claimed site is leased: the holder renews the lease while
    # it visits the site, and another process may take the site once lease_ttl seconds pass
    # without a renewal (its holder died or hung).
    lease_ttl: float = 300.0
    # A full disk (or EIO, EROFS, over quota): "pause" stops fetching and retries the writes every
    # warc.sync_interval until they succeed; "exit" stops the process with exit status 75.
    on_disk_full: str = "pause"
    # Focused crawling (archiver.crawl.focus): the relevance model `archiver focus train` wrote;
    # None: unfocused.
    focus: Path | None = None
    # How pages are captured (archiver.crawl.rendering): "http" fetches them; "browser" also
    # renders every HTML page in Chromium, whose every request archiver's client makes; "auto"
    # renders a page when it needs scripts to show its content (archiver.web.scriptneed).
    capture: str = "http"
    # Gatekeeper pages (archiver.web.gatekeepers, docs/gatekeepers.md): an answer that is a bot
    # challenge, a rate limit or a firewall's block page is kept in the WARC, labelled
    # gatekeeper=<kind>, and never counts as the URL's capture; false turns recognition off.
    # gatekeeper_rules ([[crawl.gatekeeper_rules]] tables) are tried before the shipped rules;
    # a sheet cannot change either.
    gatekeepers: bool = True
    gatekeeper_rules: tuple[GatekeeperRule, ...] = ()
    # Sessions (archiver.crawl.session): a cookie jar per site, kept between visits and shared
    # with its rendering browser; the sitemaps of robots.txt and /sitemap.xml read as links; the
    # TOML file of login credentials the sheets name (readable only by the service user;
    # ARCHIVER_CREDENTIALS_FILE in the environment may name it instead).
    cookies: bool = True
    sitemaps: bool = True
    credentials_file: Path | None = None


@dataclass(frozen=True)
class ScopeConfig:
    # Rules (archiver.web.scope): a SURT prefix "com,example)/news/", "host:example.org",
    # "domain:example.org" or "re:<RE2 expression>" matching the whole normalised URL. A URL is
    # in scope when it matches no exclude rule and, if include is not empty, an include rule.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # How many site-to-site links from a seed site the crawl may go: 0 = the seed sites only;
    # -1 (the default) = unlimited.
    max_hops: int = -1

    def rules(self) -> Scope:
        """The rules parsed (once per distinct lists; loading checked them)."""
        return scope_of(self.include, self.exclude)


@dataclass(frozen=True)
class PluginsConfig:
    # The plugins that run (entry point names of group "archiver.plugins"), in this order; an
    # installed plugin not named here never runs.
    enable: tuple[str, ...] = ()
    # Each plugin's own table, [plugins.<name>], given to its factory as a dict.
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class DnsConfig:
    hosts_file: Path | None = Path("/etc/hosts")
    nameservers: tuple[str, ...] = ()
    timeout: float = 5.0
    # The history is refreshed per the answers' TTLs, clamped to [min_age, max_age]; failures are
    # retried after retry_base, doubling up to retry_max. `archiver dns` runs a pass every
    # refresh_interval with at most `concurrency` queries in flight.
    min_age: float = 300.0
    max_age: float = 86_400.0
    retry_base: float = 60.0
    retry_max: float = 6 * 3600.0
    refresh_interval: float = 60.0
    concurrency: int = 32


@dataclass(frozen=True)
class WarcConfig:
    prefix: str = "ARCHIVER"
    max_size: int = 2**30
    gzip_level: int = 6
    sync_interval: float = 2.0
    # Seconds a bundle may stay open before it is closed (and, with an object store, shipped).
    max_age: float = 3600.0
    # Where closed bundles live: "" for <archive.root>/warcs, another folder, or
    # "s3://bucket/prefix" for S3-compatible object storage (see [s3]).
    store: str = ""
    # With an object store: bytes of a crawler process's bundles that may be on this machine's
    # disk (the open one and those not shipped yet, waiting while the store is away); past it
    # fetching pauses until the store takes them. At least twice max_size: the open bundle and
    # one being shipped. 8 GiB: 40 minutes of a flat-out 3.5 MiB/s (README, "Benchmarks").
    local_limit: int = 8 * 2**30


@dataclass(frozen=True)
class StoreConfig:
    # Where the shared state lives (site queues, crawl queues, catalog, DNS history, links
    # state): "sqlite" for files under archive.root, or a PostgreSQL URL such as
    # "postgresql://archiver@db.example.org:5432/archive". The password is never written here
    # (refused in the user part and as a password or sslpassword parameter): it comes from
    # PGPASSWORD, ~/.pgpass or PGPASSFILE, as for every libpq client. Several hosts reach a
    # primary and its standbys: "postgresql://archiver@db1:5432,db2:5432/archive?
    # target_session_attrs=read-write" (libpq connects to the one that takes writes).
    url: str = "sqlite"
    # The longest pause, in seconds, between two attempts to reach a PostgreSQL store that went
    # away (a restart, a failover): the first attempt is made at once, the next 0.1 s later,
    # doubling up to this. Crawlers, the DNS service and the links batch wait; replay answers 503.
    retry_max: float = 10.0


@dataclass(frozen=True)
class S3Config:
    # The endpoint of S3-compatible storage other than AWS (MinIO, Ceph...), e.g.
    # "http://127.0.0.1:9000"; "" for AWS. Credentials come from the standard AWS environment
    # variables or files (AWS_ACCESS_KEY_ID, ~/.aws/credentials...), never from this file.
    endpoint_url: str = ""
    region: str = ""
    # Seconds an S3 request waits to connect, and for each read of its answer, before botocore
    # tries again (3 attempts): what a hung server can hold a call for, bounded.
    timeout: float = 20.0


@dataclass(frozen=True)
class CatalogConfig:
    # About a thousand tables, as the 1997 Internet Archive catalog used; changing it is a reindex.
    shards: int = 1000


@dataclass(frozen=True)
class SpoolConfig:
    max_lines: int = 100_000
    max_age: float = 300.0


@dataclass(frozen=True)
class LinksConfig:
    # The global bitmap: 16 bits (2 bytes) per expected URL, as the 1997 Internet Archive crawler
    # sized it; with 11 hash functions that is a 0.05 % false-positive rate at the design load.
    expected_urls: int = 10_000_000
    bits_per_url: int = 16
    # Spool lines read per checkpoint (slices saved, ledger committed).
    checkpoint_urls: int = 1_000_000
    # Seconds between looks for new spool files when running as a service (without --once).
    poll_interval: float = 60.0
    # The bitmap is split into this many slices by a hash of the normalised URL
    # (archiver.links.slicing), each sized for expected_urls / slices.
    slices: int = 4
    # "local": in this process; "dask": on a Dask cluster, at `scheduler` ("tcp://host:8786"),
    # or, when that is empty, on a LocalCluster of `workers` processes started for the run.
    engine: str = "local"
    scheduler: str = ""
    workers: int = 2


@dataclass(frozen=True)
class ReplayConfig:
    # `archiver replay` serves its own pages (home, capture lists, Memento, CDX, DNS, status) on
    # `listen`, and archived content on `content_listen`: another origin, so archived scripts
    # cannot read the replay's own pages (archiver.replay.app says why and what else isolates).
    listen: str = "127.0.0.1:8080"
    content_listen: str = "127.0.0.1:8081"
    # The public URLs of the two listeners, written into links, redirects and TimeMaps (never
    # taken from a request's Host header). "" means http://<listen> and http://<content_listen>.
    base_url: str = ""
    content_origin: str = ""
    # Listings (CDX, capture and URL lists, TimeMaps) read the catalog off the event loop and let
    # other requests in every scan_slice_rows rows examined; one request examines at most
    # scan_max_rows rows and runs for at most scan_deadline seconds.
    scan_slice_rows: int = 1000
    scan_max_rows: int = 2_000_000
    scan_deadline: float = 30.0
    # At most scan_listings listings run at once (each in a worker thread of its own); one more
    # is answered 503 with Retry-After at once. A capture's replay reads by lookups, which go
    # first and never count here (archiver.replay.scan).
    scan_listings: int = 8
    # A TimeMap answers at most timemap_page mementos, with links to the pages before and after
    # it (RFC 7089 TimeMap paging), so its memory is the page's whatever a URL's captures.
    timemap_page: int = 10_000
    # Temporal coherence (archiver.replay.coherence): a replayed page's banner flags each embed
    # (image, stylesheet, script, frame, media) served from a capture more than max_skew seconds
    # from the page's. One day, as crawl.revisit_min: embeds captured in the page's own visit are
    # hours away at most on all but the largest sites, one from another visit at least that far.
    max_skew: int = 86400
    # CPU-heavy work runs in bounded pools (archiver.replay.workers): rewrite_workers processes
    # rewrite documents (HTML, CSS, scripts) of more than 16 KiB, search_workers threads run
    # full-text searches; past them up to max_waiting requests of each kind wait their turn, and
    # one more is answered 503 with Retry-After. A document larger than max_rewrite_size bytes
    # (content codings undone) is served as archived, not rewritten, with a note (the
    # X-Archiver-Not-Rewritten header).
    rewrite_workers: int = 2
    search_workers: int = 2
    max_waiting: int = 64
    max_rewrite_size: int = 16 * 2**20
    # Fuzzy matching (archiver.web.fuzzy): a URL a replayed page asks for with no capture of its
    # own is served the capture a rule maps it to (a cache buster or session id ignored), marked
    # with an X-Archiver-Fuzzy-Match header; false turns it off. fuzzy_rules ([[replay.fuzzy_rules]]
    # tables: name, optional host and path, ignore or keep) are tried first, then the shipped ones.
    fuzzy: bool = True
    fuzzy_rules: tuple[FuzzyRule, ...] = ()


@dataclass(frozen=True)
class ImportConfig:
    # Temporary disk one `archiver import` of a file may use (bytes): the file rewritten as one
    # gzip member per record, and warcio's copy of a record whose digests it computes. A file
    # needing more is refused; a whole-file gzip is never expanded on disk.
    max_temp_bytes: int = 4 * 2**30


@dataclass(frozen=True)
class BrowserConfig:
    """[browser]: the Chromium that renders pages when crawl.capture asks for it."""

    executable: str = "chromium"  # the distribution's package, found on PATH
    tabs: int = 4  # pages rendered at once per crawler process
    page_timeout: float = 30.0  # seconds per page; at the bound the page is kept as it is
    max_resources: int = 500  # requests answered per page; later ones get a network error
    memory_limit: int = 2 * 2**30  # bytes of the browser's processes; past it, it is restarted
    # Rest between the requests a page makes to its own site (the page itself waits the full
    # crawl rest, and the site rests the full rest after the page's last request).
    embed_rest: float = 0.5
    max_scrolls: int = 20  # scroll steps of the behaviours per page
    # Seconds with no request of the page in flight that end a behaviour step, and the page.
    quiet: float = 0.5
    viewport: str = "1280x900"  # width x height of the page and its screenshot
    screenshot_format: str = "png"  # or "webp"
    idle_timeout: float = 60.0  # seconds without a page to render before the browser is stopped
    # Bytes of answers a visit keeps in memory for its later pages' requests; past them, an answer
    # is read back from the record written (the visit never fetches a URL twice).
    kept_answers: int = 32 * 2**20


@dataclass(frozen=True)
class LogConfig:
    level: str = "info"


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)
    crawl: CrawlConfig = field(default_factory=CrawlConfig)
    scope: ScopeConfig = field(default_factory=ScopeConfig)
    plugins: PluginsConfig = field(default_factory=PluginsConfig)
    dns: DnsConfig = field(default_factory=DnsConfig)
    warc: WarcConfig = field(default_factory=WarcConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    s3: S3Config = field(default_factory=S3Config)
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    links: LinksConfig = field(default_factory=LinksConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    import_: ImportConfig = field(default_factory=ImportConfig)  # [import]: a Python keyword
    browser: BrowserConfig = field(default_factory=BrowserConfig)
    log: LogConfig = field(default_factory=LogConfig)
    # [[sheets]]: per-site overrides (archiver.web.sheets), in the file's order.
    sheets: tuple[Sheet, ...] = ()
    # The credentials the sheets' logins name, by table (crawl.credentials_file): never shown.
    credentials: Mapping[str, Credential] = field(default_factory=dict, repr=False)
    # Warnings about the file that do not stop it from loading (retired keys), for the caller to show.
    notices: tuple[str, ...] = ()

    @property
    def root(self) -> Path:
        return self.archive.root


# Keys older configs may still hold: accepted with a warning and otherwise ignored.
RETIRED = {
    ("crawl", "retries_per_url"): "a URL answered 429/503 now goes back to the crawl queue until "
                                  "it is fetched; it is never dropped after a fixed count",
    ("crawl", "backoff_recovery"): "the back-off now recovers linearly: see "
                                   "crawl.backoff_recovery_fetches",
}
# Sections and keys renamed (issue 39: one word per thing): the old name is read, with a notice,
# until the next release.
RENAMED_SECTIONS = {"outlinks": "spool"}
RENAMED_KEYS = {("links", "partitions"): "slices"}


def section_name(attribute: str) -> str:
    """The TOML section a Config attribute holds: its name without the ``_`` a keyword takes."""
    return attribute.removesuffix("_")


# The Config attributes that are no [section] of the file.
NOT_SECTIONS = ("path", "notices", "sheets", "credentials")
_SECTIONS = {section_name(f.name): f.type for f in dataclasses.fields(Config)
             if f.name not in NOT_SECTIONS}
# The Config attribute of each section whose name is a Python keyword.
_ATTRIBUTES = {section_name(f.name): f.name for f in dataclasses.fields(Config)}
# What a [[sheets]] table may hold: its own keys, and the [crawl] keys it overrides for its sites.
SHEET_KEYS = ("match", "window", "time_zone", "daily_pages", *LOGIN_KEYS)
SHEET_CRAWL_KEYS = ("min_rest", "max_rest", "rest_factor", "max_pages", "max_bytes", "max_depth",
                    "user_agent", "capture", "cookies", "sitemaps")
CAPTURES = ("http", "browser", "auto")
_LEVELS = ("debug", "info", "warning", "error")
_INT64 = (-(2**63), 2**63 - 1)
# Keys where -1 means unlimited (every other number must not be negative).
_UNLIMITED = {("scope", "max_hops")}
_POSITIVE = {
    ("crawl", "processes"), ("crawl", "sites_per_process"), ("crawl", "connections_per_address"),
    ("crawl", "max_pages"),
    ("crawl", "max_bytes"), ("crawl", "max_url_length"), ("crawl", "max_repeated_segments"),
    ("crawl", "connect_timeout"), ("crawl", "first_byte_timeout"), ("crawl", "total_timeout"),
    ("crawl", "max_response_size"), ("crawl", "max_header_size"), ("crawl", "max_decoded_size"),
    ("crawl", "site_bitmap_bits"), ("crawl", "status_interval"), ("crawl", "poll_interval"),
    ("crawl", "max_failures"), ("crawl", "max_internal_errors"), ("crawl", "max_rate_limited"),
    ("crawl", "backoff_recovery_fetches"), ("crawl", "max_per_shape"), ("crawl", "drain_timeout"),
    ("crawl", "lease_ttl"), ("warc", "max_age"), ("warc", "local_limit"), ("s3", "timeout"),
    ("store", "retry_max"),
    ("dns", "timeout"), ("dns", "refresh_interval"),
    ("dns", "concurrency"), ("warc", "max_size"),
    ("spool", "max_lines"), ("spool", "max_age"), ("catalog", "shards"),
    ("import", "max_temp_bytes"),
    ("links", "expected_urls"), ("links", "bits_per_url"), ("links", "checkpoint_urls"),
    ("links", "poll_interval"), ("links", "slices"), ("links", "workers"),
    ("replay", "scan_slice_rows"), ("replay", "scan_max_rows"), ("replay", "scan_deadline"),
    ("replay", "timemap_page"), ("replay", "scan_listings"),
    ("replay", "rewrite_workers"), ("replay", "search_workers"), ("replay", "max_waiting"),
    ("replay", "max_rewrite_size"),
    ("browser", "tabs"), ("browser", "page_timeout"), ("browser", "max_resources"),
    ("browser", "memory_limit"), ("browser", "idle_timeout"),
}


def viewport(text: str) -> tuple[int, int]:
    """``"1280x900"`` -> (1280, 900); ValueError unless both are 100-10000 pixels."""
    width, x, height = text.partition("x")
    if not x or not width.isdigit() or not height.isdigit() or not (
            100 <= int(width) <= 10_000 and 100 <= int(height) <= 10_000):
        raise ValueError(f"expected WIDTHxHEIGHT in pixels, each 100-10000, like \"1280x900\", "
                         f"got {text!r}")
    return int(width), int(height)


def parse_nameserver(entry: str) -> tuple[str, int]:
    """``"host"`` or ``"host:port"`` (IPv6 as ``"[::1]:53"`` or bare) -> (host, port).

    Raises ValueError for an empty host or a port outside 1..65535.
    """
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "53"
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    else:
        host, port = entry, "53"
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad nameserver {entry!r}")
    return host, int(port)


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
            raise ValueError(f"bad listen address {text!r}: give ADDRESS:PORT, e.g. 127.0.0.1:8080")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"bad listen address {text!r}: {host!r} is not an IP address") from None
    if value.startswith("[") != (address.version == 6):
        raise ValueError(f"bad listen address {text!r}: write IPv6 addresses in brackets, [::1]:8080")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"bad listen address {text!r}: the port must be 0-65535")
    return str(address), int(port)


def public_url(text: str, *, origin_only: bool) -> str:
    """An http(s) URL given as a replay's public address, without a trailing slash; ValueError
    if it is not one (``origin_only``: scheme, host and port, no path)."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError as e:
        raise ValueError(f"{text!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http or https URL")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{text!r} must have no user, query or fragment")
    if origin_only and parts.path not in ("", "/"):
        raise ValueError(f"{text!r} must be an origin (scheme, host and port), with no path")
    return text.rstrip("/")


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def parse_s3_url(text: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix without slashes at its ends); ValueError."""
    parts = urlsplit(text)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"{text!r} is not s3://bucket/prefix")
    if not _BUCKET.fullmatch(parts.netloc) or ".." in parts.netloc:
        raise ValueError(f"{parts.netloc!r} is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-')")
    if parts.query or parts.fragment:
        raise ValueError(f"{text!r}: no query or fragment in an s3:// URL")
    return parts.netloc, parts.path.strip("/")


# libpq's connection parameters that hold a secret: the password, and the client key's passphrase.
_SECRET_PARAMETERS = ("password", "sslpassword")
# A keyword/value setting of either inside another value (a conninfo string given as the dbname).
_PASSWORD_SETTING = re.compile(r"(?:ssl)?password\s*=", re.IGNORECASE)
_PASSWORD_ELSEWHERE = ("give it in PGPASSWORD, ~/.pgpass or the file PGPASSFILE names, as for psql "
                       "(a config file is read by every service and copied into migrate.json)")


def database_url(text: str) -> str | None:
    """None for ``"sqlite"`` (the embedded stores), else the PostgreSQL URL ``text`` (with one host
    or several: ``h1:p1,h2:p2``, as libpq takes them); ValueError if it is neither, or if it
    holds a password anywhere: in its user part, as a ``password`` or ``sslpassword`` parameter
    (in any case or percent-encoding), or as a ``password=`` setting inside a parameter or the
    database name (PGPASSWORD, ~/.pgpass or PGPASSFILE hold it)."""
    if text == "sqlite":
        return None
    try:
        parts = urlsplit(text)
        # Several hosts (a primary and its standbys) are host:port pairs separated by commas.
        for host in parts.netloc.rpartition("@")[2].split(","):
            urlsplit("//" + host).port  # noqa: B018 - raises for a port out of range
    except ValueError as e:
        raise ValueError(f"not a URL: {e}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError('"sqlite", or a URL postgresql://user@host:port/dbname')
    if parts.password is not None:
        raise ValueError(f"no password here: {_PASSWORD_ELSEWHERE}")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name.strip().lower() in _SECRET_PARAMETERS:
            raise ValueError(f"no {name.strip().lower()} parameter here: {_PASSWORD_ELSEWHERE}")
        if _PASSWORD_SETTING.search(value):
            raise ValueError(f"the {name} parameter holds a password setting: {_PASSWORD_ELSEWHERE}")
    if _PASSWORD_SETTING.search(unquote(parts.path)):
        raise ValueError(f"the database name holds a password setting: {_PASSWORD_ELSEWHERE}")
    if not parts.path.strip("/"):
        raise ValueError("name the database: postgresql://user@host:port/dbname")
    return text


def origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL, the port filled in."""
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def load(path: str | Path) -> Config:
    """Read, validate and return the config at ``path``; relative paths resolve against its folder."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 (TOML files are): byte {e.start} cannot be read") from None
    return from_dict(data, path)


def from_dict(data: dict[str, Any], path: Path | None = None) -> Config:
    """Validate a parsed TOML document (``path`` names it in errors and anchors relative paths)."""
    where = str(path) if path else "<config>"
    base = path.resolve().parent if path else Path.cwd()
    sections: dict[str, Any] = {}
    notices: list[str] = []
    data = _renamed(where, data, notices)
    for name, value in data.items():
        if name == "sheets":
            continue  # read once [crawl] is (a sheet's rests are checked against it)
        if name not in _SECTIONS:
            raise ConfigError(f"{where}: unknown section [{name}] (known: {', '.join(_SECTIONS)})")
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [{name}] must be a table")
        if name == "plugins":
            sections[name] = _plugins(where, value)
            continue
        sections[name] = _section(where, base, name, _section_class(name), value, notices)
    archive = sections.get("archive", ArchiveConfig())
    if not archive.root.is_absolute():
        sections["archive"] = dataclasses.replace(archive, root=base / archive.root)
    warc = sections.get("warc", WarcConfig())
    if warc.store and not warc.store.startswith("s3:") and not Path(warc.store).is_absolute():
        sections["warc"] = dataclasses.replace(warc, store=str(base / warc.store))
    sheets = _sheets(where, data.get("sheets", []), sections.get("crawl", CrawlConfig()))
    credentials = _credentials(where, sections.get("crawl", CrawlConfig()), sheets)
    return Config(path=path, notices=tuple(notices), sheets=sheets, credentials=credentials,
                  **{_ATTRIBUTES[name]: section for name, section in sections.items()})


def site_crawl(crawl: CrawlConfig, sheet: Sheet | None) -> CrawlConfig:
    """The ``[crawl]`` settings for a site ``sheet`` applies to (its overrides on top)."""
    return crawl if sheet is None or not sheet.overrides else dataclasses.replace(
        crawl, **dict(sheet.overrides))


def _sheets(where: str, tables: Any, crawl: CrawlConfig) -> tuple[Sheet, ...]:
    """The [[sheets]] tables, parsed; ConfigError naming the sheet (index and match) and key."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{where}: sheets: must be tables, written [[sheets]]")
    hints = typing.get_type_hints(CrawlConfig)
    sheets = []
    for index, table in enumerate(tables):
        match = table.get("match")
        label = f"{where}: sheets[{index}]"
        if match is None:
            raise ConfigError(f"{label}: match: missing (a list of scope rules naming its sites)")
        if not isinstance(match, list) or not all(isinstance(r, str) for r in match):
            raise ConfigError(f"{label}: match: expected a list of strings, got {match!r}")
        label += f" (match {json.dumps(match, ensure_ascii=False)})"
        overrides = []
        for key, value in table.items():
            if "robots" in key or key == "agent":
                raise ConfigError(f"{label}: {key}: a sheet cannot change robots.txt: it is "
                                  "always obeyed, with the rules for crawl.agent")
            if key in SHEET_CRAWL_KEYS:
                converted = _convert(f"{label}: {key}", hints[key], value, Path.cwd())
                if ("crawl", key) in _POSITIVE and converted <= 0:
                    raise ConfigError(f"{label}: {key}: must be greater than 0, got {value!r}")
                if not isinstance(converted, str) and converted < 0:
                    raise ConfigError(f"{label}: {key}: must not be negative, got {value!r}")
                overrides.append((key, converted))
            elif key not in SHEET_KEYS:
                raise ConfigError(f"{label}: {key}: unknown key (known in a sheet: "
                                  f"{', '.join(sorted(SHEET_KEYS + SHEET_CRAWL_KEYS))})")
        values = {key: _convert(f"{label}: {key}", hint, table[key], Path.cwd())
                  for key, hint in (("window", str), ("time_zone", str), ("daily_pages", int))
                  if key in table}
        try:
            login = make_login(_login_values(label, table))
            sheet = make_sheet(index, match, overrides=overrides, login=login, **values)
        except SheetError as e:
            raise ConfigError(f"{label}: {e}") from None
        effective = site_crawl(crawl, sheet)
        if effective.max_rest < effective.min_rest:
            raise ConfigError(f"{label}: max_rest: must be >= min_rest (the sheet's, or crawl's)")
        if not effective.user_agent.isprintable() or not effective.user_agent.isascii():
            raise ConfigError(f"{label}: user_agent: must be printable ASCII (it is an HTTP header)")
        if effective.capture not in CAPTURES:
            raise ConfigError(f"{label}: capture: must be \"http\", \"browser\" or \"auto\"")
        sheets.append(sheet)
    return tuple(sheets)


def _credentials(where: str, crawl: CrawlConfig, sheets: tuple[Sheet, ...]
                 ) -> Mapping[str, Credential]:
    """The credentials file's tables (crawl.credentials_file, or ARCHIVER_CREDENTIALS_FILE);
    ConfigError if it cannot be used or lacks a table a sheet's login names."""
    configured = crawl.credentials_file
    path = credentials_path(str(configured) if configured else None, os.environ)
    logins = [(sheet, sheet.login) for sheet in sheets if sheet.login is not None]
    if path is None:
        if logins:
            sheet = logins[0][0]
            raise ConfigError(f"{where}: sheets[{sheet.index}]: credentials: no credentials file "
                              f"(set crawl.credentials_file or {ENVIRONMENT_VARIABLE})")
        return {}
    try:
        credentials = load_credentials(path)
    except CredentialsError as e:
        raise ConfigError(f"{where}: crawl.credentials_file: {e}") from None
    for sheet, login in logins:
        if login.credentials not in credentials:
            raise ConfigError(f"{where}: sheets[{sheet.index}]: credentials: {path} has no table "
                              f"[{login.credentials}]")
    return credentials


def _login_values(label: str, table: dict[str, Any]) -> dict[str, Any]:
    """A sheet's login keys, their types checked (``login_fields``: a table of strings,
    ``session_scope``: a list of strings, the others strings)."""
    values: dict[str, Any] = {}
    for key in LOGIN_KEYS:
        if key not in table:
            continue
        value = table[key]
        if key == "login_fields":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise ConfigError(f"{label}: login_fields: expected a table of strings, "
                                  "e.g. { remember = \"1\" }")
            values[key] = value
        elif key == "session_scope":
            values[key] = _convert(f"{label}: {key}", tuple[str, ...], value, Path.cwd())
        else:
            values[key] = _convert(f"{label}: {key}", str, value, Path.cwd())
    return values


# What a running crawler takes from a new config on SIGHUP; everything else needs a restart.
# (dedupe: the catalog is opened with its digest index or without; max_decisions: the crawl
# queues are opened with it; focus: the plugins are loaded at start.)
_FIXED_CRAWL_KEYS = ("processes", "sites_per_process", "dedupe", "max_decisions", "focus")
_FIXED_SECTIONS = ("archive", "warc", "store", "s3", "catalog", "plugins")


def reloaded(old: Config, new: Config) -> tuple[Config, list[str]]:
    """``new`` with the settings a running crawler cannot change kept from ``old``, and the names
    of those that differed (for a warning): the archive root, the WARC and catalog layout, and the
    number of processes and of site slots."""
    kept = []
    for name in _FIXED_SECTIONS:
        if getattr(old, name) != getattr(new, name):
            kept.append(f"[{name}]")
            new = dataclasses.replace(new, **{name: getattr(old, name)})
    crawl = new.crawl
    for key in _FIXED_CRAWL_KEYS:
        if getattr(old.crawl, key) != getattr(crawl, key):
            kept.append(f"crawl.{key}")
            crawl = dataclasses.replace(crawl, **{key: getattr(old.crawl, key)})
    return dataclasses.replace(new, crawl=crawl), kept


_PLUGIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _plugins(where: str, values: dict[str, Any]) -> PluginsConfig:
    """[plugins]: ``enable`` (names) and one sub-table per plugin, kept as given for its factory."""
    tables = {key: value for key, value in values.items() if isinstance(value, dict)}
    for key in values.keys() - tables.keys() - {"enable"}:
        raise ConfigError(f"{where}: plugins.{key}: unknown key (known: enable, and a table "
                          "[plugins.<name>] per plugin)")
    enable = _convert(f"{where}: plugins.enable", tuple[str, ...], values.get("enable", []), Path())
    for name in enable:
        if not _PLUGIN_NAME.fullmatch(name):
            raise ConfigError(f"{where}: plugins.enable: {name!r} is not an entry point name")
    if len(set(enable)) != len(enable):
        raise ConfigError(f"{where}: plugins.enable: a plugin is named twice")
    return PluginsConfig(enable=enable, tables=tables)


def _renamed(where: str, data: dict[str, Any], notices: list[str]) -> dict[str, Any]:
    """``data`` with the renamed sections and keys under their new names (a notice for each);
    ConfigError if a file holds both names of one."""
    data = dict(data)
    for old, new in RENAMED_SECTIONS.items():
        if old in data:
            if new in data:
                raise ConfigError(f"{where}: [{old}] and [{new}] are one section ([{old}] is its "
                                  f"old name): keep [{new}] only")
            notices.append(f"{where}: [{old}] is now [{new}]; rename it (the old name is read "
                           "until the next release)")
            data[new] = data.pop(old)
    for (name, old), new in RENAMED_KEYS.items():
        section = data.get(name)
        if isinstance(section, dict) and old in section:
            if new in section:
                raise ConfigError(f"{where}: {name}.{old} and {name}.{new} are one key ({old} is "
                                  f"its old name): keep {new} only")
            notices.append(f"{where}: {name}.{old} is now {name}.{new}; rename it (the old name "
                           "is read until the next release)")
            data[name] = {new if key == old else key: value for key, value in section.items()}
    return data


def _section_class(name: str) -> type:
    cls = _SECTIONS[name]
    return globals()[cls] if isinstance(cls, str) else cls


def _section(where: str, base: Path, name: str, cls: type, values: dict[str, Any],
             notices: list[str]) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        label = f"{where}: {name}.{key}"
        if (name, key) in RETIRED:
            notices.append(f"{label}: no longer used ({RETIRED[name, key]}); remove it")
            continue
        if key not in known:
            raise ConfigError(f"{label}: unknown key (known in [{name}]: {', '.join(sorted(known))})")
        if (name, key) == ("replay", "fuzzy_rules"):
            out[key] = _named_rules(label, value, "replay.fuzzy_rules", DEFAULT_RULES, make_rule,
                                    FuzzyError)
            continue
        if (name, key) == ("crawl", "gatekeeper_rules"):
            out[key] = _named_rules(label, value, "crawl.gatekeeper_rules", GATEKEEPER_RULES,
                                    make_gatekeeper_rule, GatekeeperError)
            continue
        out[key] = _convert(label, hints[key], value, base)
        if (name, key) in _POSITIVE and out[key] <= 0:
            raise ConfigError(f"{label}: must be greater than 0, got {value!r}")
        if isinstance(out[key], (int, float)) and not isinstance(out[key], bool) and out[key] < 0 and (
                (name, key) not in _UNLIMITED or out[key] != -1):
            raise ConfigError(f"{label}: must not be negative"
                              + (" (-1: unlimited)" if (name, key) in _UNLIMITED else "")
                              + f", got {value!r}")
    section = cls(**out)
    _check(where, name, section)
    return section


_Rule = TypeVar("_Rule", FuzzyRule, GatekeeperRule)


def _named_rules(label: str, tables: Any, written: str, shipped: Iterable[_Rule],
                 make: Callable[[Any], _Rule], error: type[ValueError]) -> tuple[_Rule, ...]:
    """Operator rules of ``[[written]]`` tables (the fuzzy and gatekeeper rules), parsed by
    ``make``; ConfigError naming the rule (index) and key, or a name ``shipped`` already holds."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{label}: must be tables, written [[{written}]]")
    rules: list[_Rule] = []
    taken = {rule.name for rule in shipped}
    for index, table in enumerate(tables):
        try:
            rule = make(table)
        except error as e:
            raise ConfigError(f"{label}[{index}]: {e}") from None
        if rule.name in taken:
            raise ConfigError(f"{label}[{index}]: name: {rule.name!r} is taken (by a shipped rule "
                              "or an earlier one): give each rule a name of its own")
        taken.add(rule.name)
        rules.append(rule)
    return tuple(rules)


def _convert(label: str, hint: Any, value: Any, base: Path) -> Any:
    """Check ``value`` against the field's type hint and convert it (paths, tuples)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value == "" and len(options) < len(typing.get_args(hint)):
            return None
        return _convert(label, options[0], value, base)
    if hint is Path:
        if not isinstance(value, str) or not value or "\x00" in value:
            raise ConfigError(f"{label}: expected a path (a non-empty string without NUL), got {value!r}")
        try:
            p = Path(value).expanduser()
        except RuntimeError:  # "~user" naming no user
            raise ConfigError(f"{label}: {value!r} names a home directory that does not exist") from None
        return p if p.is_absolute() else base / p
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{label}: expected a list of strings, got {value!r}")
        return tuple(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{label}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{label}: expected an integer, got {value!r}")
        if not _INT64[0] <= value <= _INT64[1]:  # TOML's range; Python's parser takes any size
            raise ConfigError(f"{label}: out of range, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{label}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{label}: expected a finite number, got {value!r}")
        if abs(value) > _INT64[1]:
            raise ConfigError(f"{label}: out of range, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{label}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{label}: unsupported type {hint!r}")  # pragma: no cover - schema bug


def _check(where: str, name: str, section: Any) -> None:
    """Cross-field rules that a type alone cannot express."""
    if name == "crawl":
        if section.max_rest < section.min_rest:
            raise ConfigError(f"{where}: crawl.max_rest: must be >= crawl.min_rest")
        if not 0 < section.site_bitmap_max_fp < 1:
            raise ConfigError(f"{where}: crawl.site_bitmap_max_fp: must be in (0, 1)")
        if not section.agent or any(c.isspace() or c == "/" for c in section.agent):
            raise ConfigError(f"{where}: crawl.agent: must be a product token like 'archiver'")
        try:
            parse_networks(section.allowed_networks)
        except ValueError as e:
            raise ConfigError(f"{where}: crawl.allowed_networks: {e}") from None
        if not section.user_agent.isprintable() or not section.user_agent.isascii():
            raise ConfigError(f"{where}: crawl.user_agent: must be printable ASCII (it is an HTTP header)")
        if section.revisit_interval and not (
                0 < section.revisit_min <= section.revisit_interval <= section.revisit_max):
            raise ConfigError(f"{where}: crawl.revisit_interval: must lie between crawl.revisit_min "
                              "(above 0) and crawl.revisit_max, or be 0 (no revisits)")
        if section.max_decisions < 0:
            raise ConfigError(f"{where}: crawl.max_decisions: must be 0 or more")
        if section.dedupe not in ("url", "digest", "off"):
            raise ConfigError(f"{where}: crawl.dedupe: must be \"url\", \"digest\" or \"off\"")
        if section.on_disk_full not in ("pause", "exit"):
            raise ConfigError(f"{where}: crawl.on_disk_full: must be \"pause\" or \"exit\"")
        if section.capture not in CAPTURES:
            raise ConfigError(f"{where}: crawl.capture: must be \"http\", \"browser\" or \"auto\"")
    elif name == "browser":
        try:
            viewport(section.viewport)
        except ValueError as e:
            raise ConfigError(f"{where}: browser.viewport: {e}") from None
        if section.quiet >= section.page_timeout:
            raise ConfigError(f"{where}: browser.quiet: must be less than browser.page_timeout")
        if section.screenshot_format not in ("png", "webp"):
            raise ConfigError(f"{where}: browser.screenshot_format: must be \"png\" or \"webp\"")
        if not section.executable:
            raise ConfigError(f"{where}: browser.executable: must name a program")
    elif name == "scope":
        for key in ("include", "exclude"):
            try:
                scope_of(getattr(section, key), ())
            except ScopeError as e:
                raise ConfigError(f"{where}: scope.{key}: {e}") from None
    elif name == "dns":
        for ns in section.nameservers:
            try:
                parse_nameserver(ns)
            except ValueError:
                raise ConfigError(f"{where}: dns.nameservers: bad entry {ns!r} "
                                  "(want 'host', 'host:port' or '[v6]:port')") from None
    elif name == "links":
        if section.engine not in ("local", "dask"):
            raise ConfigError(f"{where}: links.engine: must be \"local\" or \"dask\", got {section.engine!r}")
        if section.scheduler and not re.fullmatch(r"(tcp|tls|inproc|ucx)://\S+", section.scheduler):
            raise ConfigError(f"{where}: links.scheduler: expected a Dask scheduler address like "
                              f"\"tcp://host:8786\", or \"\" for a LocalCluster, got {section.scheduler!r}")
    elif name == "warc":
        if not 0 <= section.gzip_level <= 9:
            raise ConfigError(f"{where}: warc.gzip_level: must be 0..9")
        if not section.prefix or "/" in section.prefix or "\x00" in section.prefix:
            raise ConfigError(f"{where}: warc.prefix: must be a non-empty name without '/'")
        if section.store.startswith("s3:"):
            try:
                parse_s3_url(section.store)
            except ValueError as e:
                raise ConfigError(f"{where}: warc.store: {e}") from None
        elif "\x00" in section.store:
            raise ConfigError(f"{where}: warc.store: a folder or s3://bucket/prefix, got {section.store!r}")
        if section.local_limit < 2 * section.max_size:
            raise ConfigError(f"{where}: warc.local_limit: must be at least twice warc.max_size "
                              f"({2 * section.max_size}: the open bundle and one being shipped), "
                              f"got {section.local_limit}")
    elif name == "store":
        try:
            database_url(section.url)
        except ValueError as e:
            raise ConfigError(f"{where}: store.url: {e}") from None
    elif name == "s3" and section.endpoint_url:
        try:
            public_url(section.endpoint_url, origin_only=True)
        except ValueError as e:
            raise ConfigError(f"{where}: s3.endpoint_url: {e}") from None
    elif name == "replay":
        for key in ("listen", "content_listen"):
            try:
                parse_listen(getattr(section, key))
            except ValueError as e:
                raise ConfigError(f"{where}: replay.{key}: {e}") from None
        if section.listen == section.content_listen and parse_listen(section.listen)[1] != 0:
            raise ConfigError(f"{where}: replay.content_listen: must differ from replay.listen")
        for key, origin_only in (("base_url", False), ("content_origin", True)):
            if getattr(section, key):
                try:
                    public_url(getattr(section, key), origin_only=origin_only)
                except ValueError as e:
                    raise ConfigError(f"{where}: replay.{key}: {e}") from None
        both = section.base_url and section.content_origin
        if both and origin_of(section.base_url) == origin_of(section.content_origin):
            raise ConfigError(f"{where}: replay.content_origin: must be another origin than "
                              "replay.base_url (another host name or port)")
    elif name == "log" and section.level not in _LEVELS:
        raise ConfigError(f"{where}: log.level: must be one of {', '.join(_LEVELS)}")
