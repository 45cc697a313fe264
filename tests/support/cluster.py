"""Crawler processes that share one PostgreSQL store and one S3 bucket, standing for machines:
their configs, starting, killing and freezing them (``Cluster``), and checks made from outside:
requests at once to one site (``overlapping``), writes and fetches without the site's lease
(``lease_breaches``), and what the crawl left in the bucket and the catalog (``check_archive``).

No test framework in here: ``tools/bench_chaos.py`` uses them too. The S3 server's credentials
must be in the environment (``tools.s3server.CREDENTIALS``): the crawlers inherit it."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import psycopg

from archiver.config import Config
from archiver.store.objectstore import open_object
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.s3.objectstore import S3Store
from archiver.store.warcindex import index_stream
from tests.support.crawls import HasHosts, warcio_check, write_config
from tests.support.repo import ARCHIVER


class HasExpected(Protocol):
    """A demo web (``demoweb.DemoWeb``): the URLs a crawler named ``agent`` must capture."""

    def expected(self, agent: str) -> set[str]: ...


class Bucket(Protocol):
    """A bucket on an S3 server (``tests.support.objectstore.S3Bucket``)."""

    @property
    def endpoint(self) -> str: ...
    @property
    def name(self) -> str: ...


def archivable(web: HasExpected) -> set[str]:
    """The URLs of the demo web a crawl must capture (the site whose robots.txt answers 500 is
    not crawled: RFC 9309 takes that for a full disallow)."""
    return {url for url in web.expected("archiver") if "robots500" not in url}


def shared_config(directory: Path, web: HasHosts, *, store_url: str, bucket: Bucket,
                  warc: dict[str, object] | None = None, **crawl: object) -> Path:
    """A config for one machine of a cluster: its own ``directory/archive``, the shared store and
    bucket. ``warc`` adds [warc] keys (max_age, sync_interval...)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_config(directory, web, **crawl)
    extra = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in (warc or {}).items())
    path.write_text(path.read_text() + (
        f'[store]\nurl = "{store_url}"\n'
        f'[warc]\nstore = "s3://{bucket.name}/crawl"\n{extra}'
        f'[s3]\nendpoint_url = "{bucket.endpoint}"\nregion = "us-east-1"\n'))
    return path


def requests(log: Path) -> list[dict]:
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` (the crawlers are other processes) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def overlapping(log: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of requests to the same site whose [start, end] intervals overlap: a site fetched by
    two holders at once (one holder fetches a site one request at a time, resting between)."""
    by_host = defaultdict(list)
    for entry in log:
        by_host[entry["host"]].append(entry)
    pairs = []
    for entries in by_host.values():
        entries.sort(key=lambda e: e["start"])
        for before, after in pairwise(entries):
            if after["start"] < before["end"]:
                pairs.append((before, after))
    return pairs


# -- crawler "machines" started, killed and frozen from outside (the fault tests, tools/bench_chaos)

AGENT = "archiver-test-{}"  # machine n's User-Agent: its requests in the demo server's log


def role_url(store_url: str, role: str) -> str:
    """``store_url`` (one host or several) connecting as database role ``role``."""
    scheme, _, rest = store_url.partition("://")
    return f"{scheme}://{role}@{rest.rpartition('@')[2]}"


class Cluster:
    """Crawler processes standing for machines that share one PostgreSQL database and one bucket.

    Machine ``n`` has its own directory (``directory/machine<n>``: its config, hosts file and
    local archive), database role (``role(n)``: its writes told apart in the write log), and
    User-Agent (``AGENT``: its requests told apart in the demo server's log); its crawler runs as
    ``archiver crawl --process n`` and logs to ``directory/machine<n>.log``, across restarts.

    Typical use: ``configure`` each machine, ``seed`` once, ``start`` them, inject faults
    (``kill``, ``freeze`` then ``thaw``, ``start`` again), ``wait`` for the ``--until-idle`` ones
    or ``stop`` the others, and ``close`` in a ``finally`` (kills whatever still runs). Then read
    ``faults`` and ``log``, and check from outside: ``check_archive``, ``overlapping``,
    ``lease_breaches`` (with ``install_write_log`` called before the crawl)."""

    def __init__(self, directory: Path, web: HasHosts, *, store_url: str, bucket: Bucket) -> None:
        """``store_url``: the shared PostgreSQL database (a superuser's URL: roles are made in
        it); ``web``: the demo web the machines crawl (its hosts file goes to each machine)."""
        self.directory, self.web, self.store_url, self.bucket = directory, web, store_url, bucket
        self.configs: dict[int, Path] = {}
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self._database = store_url.rsplit("/", 1)[1].split("?")[0]

    def role(self, n: int) -> str:
        """Machine ``n``'s database role (a superuser, as the crawler's own would own the schema)."""
        return f"{self._database}_m{n}"

    def configure(self, n: int, *, warc: dict[str, object] | None = None, **crawl: object) -> Path:
        """Write machine ``n``'s config: [crawl] keys ``crawl`` (over the tests' fast defaults),
        [warc] keys ``warc``, the shared store (as ``role(n)``, made here) and bucket. Its path."""
        with psycopg.connect(self.store_url, autocommit=True) as db:
            if db.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (self.role(n),)).fetchone() is None:
                db.execute(f'CREATE ROLE "{self.role(n)}" LOGIN SUPERUSER')
        self.configs[n] = shared_config(self.directory / f"machine{n}", self.web,
                                        store_url=role_url(self.store_url, self.role(n)),
                                        bucket=self.bucket, warc=warc,
                                        **{"user_agent": AGENT.format(n), **crawl})
        return self.configs[n]

    def seed(self, seeds: list[str], n: int = 0) -> None:
        """Queue ``seeds`` (``archiver seeds``, with machine ``n``'s config)."""
        path = self.directory / "seeds.txt"
        path.write_text("".join(url + "\n" for url in seeds))
        done = subprocess.run([*ARCHIVER, "seeds", "--config", str(self.configs[n]), str(path)],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"archiver seeds exited {done.returncode}: {done.stderr[-3000:]}")

    def start(self, n: int, *args: str) -> subprocess.Popen[str]:
        """Start machine ``n``'s crawler, with ``args`` (``--until-idle``...). After ``kill`` it
        stands for a new machine with the same number and an empty disk."""
        with (self.directory / f"machine{n}.log").open("a") as log:
            self.procs[n] = subprocess.Popen(
                [*ARCHIVER, "crawl", "run", "--config", str(self.configs[n]), "--process", str(n), *args],
                stdout=subprocess.DEVNULL, stderr=log, text=True)
        return self.procs[n]

    def alive(self, n: int) -> bool:
        """Machine ``n``'s crawler is running (or frozen)."""
        return n in self.procs and self.procs[n].poll() is None

    def kill(self, n: int) -> float:
        """Machine ``n`` vanishes: its crawler SIGKILLed, its local archive deleted (bundles,
        spool, state; its config stays). The time it happened."""
        self.procs[n].send_signal(signal.SIGCONT)  # a frozen one is killed as well
        self.procs[n].kill()
        self.procs[n].wait()
        shutil.rmtree(self.directory / f"machine{n}" / "archive", ignore_errors=True)
        return time.time()

    def freeze(self, n: int) -> float:
        """SIGSTOP machine ``n``'s crawler (a VM paused, a partition); when."""
        self.procs[n].send_signal(signal.SIGSTOP)
        return time.time()

    def thaw(self, n: int) -> float:
        """SIGCONT machine ``n``'s crawler; when."""
        self.procs[n].send_signal(signal.SIGCONT)
        return time.time()

    def wait(self, n: int, timeout: float) -> str:
        """Wait for machine ``n``'s crawler to end by itself (``--until-idle``); its log. An
        AssertionError (with the log's end) if it runs past ``timeout`` (then killed) or exits
        with a status other than 0."""
        try:
            code = self.procs[n].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.procs[n].kill()
            self.procs[n].wait()
            raise AssertionError(f"machine {n} did not finish within {timeout} s:\n"
                                 f"{self.log(n)[-3000:]}") from None
        if code != 0:
            raise AssertionError(f"machine {n} exited {code}:\n{self.log(n)[-3000:]}")
        return self.log(n)

    def stop(self, n: int, timeout: float = 120) -> str:
        """SIGTERM (after SIGCONT) to machine ``n``'s crawler, which drains and exits 0; its log."""
        self.procs[n].send_signal(signal.SIGCONT)
        self.procs[n].send_signal(signal.SIGTERM)
        return self.wait(n, timeout)

    def close(self) -> None:
        """Kill whatever still runs (a test or a round that failed half-way)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()

    def log(self, n: int) -> str:
        """Machine ``n``'s log lines so far (``key=value`` events), every run of it."""
        path = self.directory / f"machine{n}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def faults(self, n: int) -> dict[str, int]:
        """Machine ``n``'s faults by event (``lease-lost``: 3...), as its last status says
        (``Stats.fault``: the counts of its current or last run)."""
        with psycopg.connect(self.store_url, autocommit=True) as db:
            row = db.execute("SELECT status->'faults' FROM crawlers WHERE process = %s", (n,)).fetchone()
        return dict(row[0] or {}) if row else {}


# -- who wrote what, and when: a trigger log of the writes to the sites' rows

_WRITE_LOG = """
CREATE TABLE cluster_writes (
    id bigserial PRIMARY KEY,
    tbl text NOT NULL,
    op text NOT NULL,
    origin text NOT NULL,
    who text NOT NULL DEFAULT session_user,
    at double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
    kind text NOT NULL
);
CREATE FUNCTION cluster_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    new_row jsonb := CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE to_jsonb(NEW) END;
    old_row jsonb := CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END;
    kind text := 'held';
BEGIN
    IF TG_TABLE_NAME = 'sites' THEN
        IF TG_OP = 'UPDATE' AND (new_row->>'epoch')::bigint > (old_row->>'epoch')::bigint THEN
            kind := 'claim';
        ELSIF TG_OP <> 'UPDATE' OR old_row->>'state' <> 'active'
                OR new_row - 'inlinks' - 'hops' - 'priority' = old_row - 'inlinks' - 'hops' - 'priority' THEN
            kind := 'other';  -- a site added, woken, or its link counts: not the holder's
        END IF;
    ELSIF TG_TABLE_NAME = 'crawl_inbox' AND TG_OP = 'INSERT' THEN
        kind := 'other';      -- anyone may queue URLs for a site
    END IF;
    INSERT INTO cluster_writes (tbl, op, origin, kind)
        VALUES (TG_TABLE_NAME, TG_OP, coalesce(new_row, old_row)->>'origin', kind);
    RETURN NULL;
END $$;
""" + "".join(f"CREATE TRIGGER {table}_written AFTER INSERT OR UPDATE OR DELETE ON {table}"
              " FOR EACH ROW EXECUTE FUNCTION cluster_write();\n"
              for table in ("sites", "crawl_cursors", "crawl_entries", "crawl_decisions", "crawl_inbox"))


def install_write_log(store_url: str) -> None:
    """Log every write to the sites' rows (site queue, crawl queues, inboxes, decision logs) with
    the database role that made it and when (``lease_breaches`` reads it)."""
    with psycopg.connect(store_url, autocommit=True) as db:
        db.execute(_WRITE_LOG)


@dataclass
class Breaches:
    """Writes and fetches made for a site by a machine that did not hold its lease then."""

    writes: list[tuple[str, str, str, str]]  # (table, operation, origin, role)
    fetches: list[dict]  # demo server log entries

    def __bool__(self) -> bool:
        return bool(self.writes or self.fetches)


def lease_breaches(store_url: str, log: list[dict], roles: dict[str, str]) -> Breaches:
    """From the write log and the demo server's request ``log`` (``roles``: User-Agent -> role):
    each write only a site's lease holder may make (its crawl queue, decisions, inbox deletes,
    its row while active) made by another role than the last claim's, and each request to a site
    whose last claim before it was another role's."""
    with psycopg.connect(store_url, autocommit=True) as db:
        rows = db.execute("SELECT tbl, op, origin, who, at, kind FROM cluster_writes ORDER BY id").fetchall()
    holder: dict[str, str] = {}
    claims: dict[str, list[tuple[float, str]]] = defaultdict(list)
    writes = []
    for table, op, origin, who, at, kind in rows:
        if kind == "claim":
            holder[origin] = who
            claims[origin].append((at, who))
        elif kind == "held" and holder.get(origin) != who:
            writes.append((table, op, origin, who))
    fetches = []
    for entry in log:
        origin = next((o for o in claims if urlsplit(o).hostname == entry["host"]), None)
        before = [who for at, who in claims[origin] if at <= entry["start"]] if origin else []
        if entry["agent"] in roles and (not before or before[-1] != roles[entry["agent"]]):
            fetches.append(entry)
    return Breaches(writes, fetches)


# -- what the crawl left: the bucket's WARCs and the catalog, against what the web serves

@dataclass
class ArchiveCheck:
    """The bucket's WARCs and the catalog after a crawl, against the URLs the web serves."""

    missing: set[str]  # served, but in no WARC of the bucket or not in the catalog
    captures: Counter[str]  # catalog entries by URL
    duplicates: set[tuple[str, int]]  # records (file, offset) the catalog names more than once
    uncatalogued: set[tuple[str, int]]  # records in the bucket the catalog lacks (file, offset)
    unserved: set[tuple[str, int]]  # catalog entries naming no record of the bucket
    warcs_valid: bool
    warcs: int
    bundles: dict[str, bytes]  # the bucket's bundles by name, their bytes

    @property
    def twice(self) -> dict[str, int]:
        """URLs (robots.txt aside: each visit asks for it) captured more than once."""
        return {url: n for url, n in self.captures.items() if n > 1 and not url.endswith(".txt")}


def check_archive(config: Config, store_url: str, expected: set[str], scratch: Path) -> ArchiveCheck:
    """Read back every WARC of the bucket (``warcio check`` on a copy in ``scratch``) and every
    catalog entry; ``expected``: the URLs the web serves that the crawl must have."""
    store = S3Store.from_config(config.warc.store, config.s3)
    scratch.mkdir(parents=True, exist_ok=True)
    indexed: set[tuple[str, int]] = set()
    urls_in_warcs: set[str] = set()
    names = [name for name in store.list() if name.endswith(".warc.gz")]
    bundles: dict[str, bytes] = {}
    for name in names:
        with open_object(store, name) as f:
            bundles[name] = f.read()
        (scratch / name).write_bytes(bundles[name])
        with (scratch / name).open("rb") as f:
            for capture in index_stream(f, name, name):
                indexed.add((capture.filename, capture.offset))
                urls_in_warcs.add(capture.url)
    valid = warcio_check(sorted(scratch.glob("*.warc.gz"))).returncode == 0 if names else True
    catalog = PgCatalog(store_url, config.catalog.shards, readonly=True)
    try:
        entries = list(catalog.iter_all())
    finally:
        catalog.close()
    records = Counter((c.filename, c.offset) for c in entries)
    catalogued = set(records)
    captures = Counter(c.url for c in entries)
    return ArchiveCheck(missing={u for u in expected if u not in captures or u not in urls_in_warcs},
                        captures=captures, duplicates={r for r, n in records.items() if n > 1},
                        uncatalogued=indexed - catalogued,
                        unserved=catalogued - indexed, warcs_valid=valid, warcs=len(names),
                        bundles=bundles)
