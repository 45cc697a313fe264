"""The PostgreSQL schema of archiver's shared state: versioned migrations, and the connections to it.

Every migration is a version, a description and SQL; ``schema_version`` records those applied.
``init_schema`` applies the missing ones in one transaction under an advisory lock, so two
``archiver store init`` at once are safe (the second waits, then finds nothing to do), and a
failed migration leaves the database as it was. Processes open their stores only on a database at
exactly this archiver's version (``connect_current``, ``check_version``): an older one needs
``archiver store init``, a newer one a newer archiver.

The catalog table is hash-partitioned on ``shard``, the catalog's own shard of a key
(``catalog.shard_of``, the SQLite catalog's shard function), and ``shard`` leads its primary key:
a Citus deployment can distribute it on that column unchanged (``catalog_files``, a small
name table, would be a reference table). Text that is compared or sorted (keys, timestamps) has
the "C" collation: byte order, the order of the SQLite catalog, whatever the database's locale.

Version 2 holds the crawl's shared state. ``sites`` is the site queue of every crawler process:
a claim sets ``holder``, bumps ``epoch`` and sets ``lease_until``; every later write of that visit
names its epoch, so a holder that comes back after its lease expired is fenced off. A site's crawl
queue is ``crawl_entries`` (its URLs in discovery order, ``seq`` from 1), ``crawl_cursors`` (the
seq of the last finished entry, the totals, and the epoch allowed to write) and ``crawl_inbox``
(URLs other processes add; ``refetch`` ones bypass the site's Bloom bitmap). ``crawlers`` holds
each crawler process's own lease (``epoch``, ``heartbeat``) and status. ``bundles`` lists every
WARC bundle a process opened, until it is shipped to the object store or declared lost with its
process; ``pending_captures`` holds the catalog entries of bundles not shipped yet, which go to
the catalog when their bundle is shipped (the catalog never names bytes the object store cannot
serve) and back to their sites' inboxes when it is lost.

Version 3 holds the external-link batch's state, as ``queues/embedded/linksstate.py`` keeps it in SQLite:
``links_ledger`` (the spool files done, each with the generation that committed it),
``links_sites`` (each target site's in-link count; ``dirty`` 1: the count is still to be pushed to
the site queue, 2: new URLs too, so a finished site waits again) and ``links_meta`` (the
generation of the global bitmap, whose object ``links/bitmap-<generation>.bloom`` matches them).

Version 4 splits that bitmap into slices (archiver.links.slices): ``links_slices`` holds each
slice's generation (their number is the slice count), committed with the ledger; a state with no
rows there and a generation above 0 still has its one bitmap of version 3, read as one slice.

Version 9 gives ``sites`` and ``links_sites`` each site's ``hops`` (site-to-site links from a
seed site, the lowest found; ``scope.max_hops``) and ``priority`` (the highest a link gave it),
and the site queue's claim order ``priority DESC, inlinks DESC, due`` its index; rows from before
read as hops 0 and priority 0.

Version 8 holds the full-text index (archiver.store.postgres.fulltext): ``fulltext_documents``, one
row per distinct page text (URL and payload digest) with its ``tsvector`` under a GIN index, and
``fulltext_captures``, every catalog entry indexed (WARC file and offset) with its document.

Version 10 adds ``catalog_captures.labels``: a capture's plugin labels as a JSON object's text
(``catalog.labels_text``), NULL for none.

Version 12 indexes ``pending_captures`` by the URL key of each entry: replay asks whether a URL
it has no catalogued capture of waits in a bundle not shipped yet (a 503, not a 404).

Version 13 gives ``sites`` the state ``paused`` (a visit found its session lost; ``archiver site
resume``), each site's ``cookies`` (its cookie jar's JSON text, kept between visits) and
``gatekeepers`` (the gatekeeper answers its visits met, a JSON object of counts by kind); rows
from before read as no cookies and no gatekeeper answers.

Connections come from ``connect``: autocommit (every store call is its own transaction, so no
reader holds one open between calls), and errors with any password taken out of their text.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

# pg_advisory_xact_lock key of schema changes: "arch" in ASCII.
_LOCK_KEY = 0x61726368
CATALOG_PARTITIONS = 32
Connection = psycopg.Connection[tuple[Any, ...]]


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: str


def _catalog_partitions() -> str:
    return "".join(
        f"CREATE TABLE catalog_captures_{n:02d} PARTITION OF catalog_captures"
        f" FOR VALUES WITH (MODULUS {CATALOG_PARTITIONS}, REMAINDER {n});\n"
        for n in range(CATALOG_PARTITIONS)
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "card catalog (hash-partitioned on its shard) and DNS history", f"""
CREATE TABLE catalog_meta (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    shards integer NOT NULL,
    shard_function text NOT NULL
);
CREATE TABLE catalog_files (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE
);
CREATE TABLE catalog_captures (
    shard integer NOT NULL,
    urlkey text COLLATE "C" NOT NULL,
    ts text COLLATE "C" NOT NULL,
    file integer NOT NULL,
    pos bigint NOT NULL,
    url text NOT NULL,
    status integer,
    mime text NOT NULL,
    digest text NOT NULL,
    redirect text,
    length bigint NOT NULL,
    revisit boolean NOT NULL,
    PRIMARY KEY (shard, urlkey, ts, file, pos)
) PARTITION BY HASH (shard);
{_catalog_partitions()}
CREATE TABLE dns (
    row bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id integer NOT NULL,
    value text COLLATE "C" NOT NULL,
    type text NOT NULL CHECK (type IN ('canonical', 'address', 'alias')),
    entered double precision NOT NULL,
    superseded double precision CHECK (superseded >= entered),
    source text NOT NULL
);
CREATE INDEX dns_value ON dns (value, entered);
CREATE INDEX dns_id ON dns (id, entered);
CREATE INDEX dns_value_now ON dns (value) WHERE superseded IS NULL;
CREATE INDEX dns_id_now ON dns (id) WHERE superseded IS NULL;
CREATE INDEX dns_address_now ON dns (id)
    WHERE superseded IS NULL AND (strpos(value, ':') > 0 OR value !~ '[^0-9.]');
CREATE TABLE dns_names (
    name text COLLATE "C" PRIMARY KEY,
    checked double precision,
    next_check double precision NOT NULL,
    outcome text NOT NULL,
    failures integer NOT NULL
);
CREATE INDEX dns_names_due ON dns_names (next_check, name);
CREATE TABLE dns_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    last double precision NOT NULL
);
INSERT INTO dns_clock (last) VALUES (0);
"""),
    Migration(2, "shared crawl state: site leases, crawl queues, inboxes, crawlers, bundles", """
CREATE TABLE sites (
    origin text COLLATE "C" PRIMARY KEY,
    state text NOT NULL DEFAULT 'waiting'
        CHECK (state IN ('waiting', 'active', 'retry', 'deferred', 'done')),
    due double precision NOT NULL DEFAULT 0,
    inlinks bigint NOT NULL DEFAULT 0,
    attempts integer NOT NULL DEFAULT 0,
    added double precision NOT NULL,
    visits integer NOT NULL DEFAULT 0,
    note text NOT NULL DEFAULT '',
    restart boolean NOT NULL DEFAULT false,
    holder integer,
    epoch bigint NOT NULL DEFAULT 0,
    lease_until timestamptz
);
CREATE INDEX sites_ready ON sites (state, inlinks DESC, due);
CREATE INDEX sites_leased ON sites (lease_until) WHERE state = 'active';
CREATE TABLE crawl_cursors (
    origin text COLLATE "C" PRIMARY KEY,
    epoch bigint NOT NULL DEFAULT 0,
    cursor bigint NOT NULL DEFAULT 0,
    pages bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    restarted double precision
);
CREATE TABLE crawl_entries (
    origin text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    depth integer NOT NULL,
    url text NOT NULL,
    PRIMARY KEY (origin, seq)
);
CREATE TABLE crawl_inbox (
    origin text COLLATE "C" NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    depth integer NOT NULL,
    url text NOT NULL,
    refetch boolean NOT NULL DEFAULT false,
    PRIMARY KEY (origin, id)
);
CREATE TABLE crawlers (
    process integer PRIMARY KEY,
    epoch bigint NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    started double precision NOT NULL,
    heartbeat timestamptz NOT NULL,
    status jsonb
);
CREATE TABLE bundles (
    name text COLLATE "C" PRIMARY KEY,
    process integer NOT NULL,
    process_epoch bigint NOT NULL,
    state text NOT NULL CHECK (state IN ('open', 'shipped', 'lost', 'reopened')),
    opened double precision NOT NULL,
    shipped double precision
);
CREATE INDEX bundles_open ON bundles (process, process_epoch) WHERE state IN ('open', 'reopened');
CREATE TABLE pending_captures (
    bundle text COLLATE "C" NOT NULL,
    origin text COLLATE "C" NOT NULL,
    url text NOT NULL,
    capture jsonb NOT NULL
);
CREATE INDEX pending_captures_bundle ON pending_captures (bundle);
"""),
    Migration(3, "external-link batch: ledger of spool files, in-link counts, bitmap generation", """
CREATE TABLE links_meta (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation bigint NOT NULL CHECK (generation >= 0)
);
INSERT INTO links_meta (generation) VALUES (0);
CREATE TABLE links_ledger (
    name text COLLATE "C" PRIMARY KEY,
    generation bigint NOT NULL,
    lines bigint NOT NULL,
    new_urls bigint NOT NULL,
    bad bigint NOT NULL,
    done double precision NOT NULL
);
CREATE TABLE links_sites (
    origin text COLLATE "C" PRIMARY KEY,
    inlinks bigint NOT NULL DEFAULT 0,
    dirty smallint NOT NULL DEFAULT 0 CHECK (dirty BETWEEN 0 AND 2)
);
CREATE INDEX links_sites_dirty ON links_sites (origin) WHERE dirty > 0;
"""),
    Migration(4, "external-link batch: the global bitmap in slices, each with its generation", """
CREATE TABLE links_slices (
    slice integer PRIMARY KEY CHECK (slice >= 0),
    generation bigint NOT NULL CHECK (generation >= 0)
);
"""),
    Migration(5, "revisits: a site's next visit and its change history", """
ALTER TABLE sites DROP CONSTRAINT sites_state_check;
ALTER TABLE sites ADD CONSTRAINT sites_state_check
    CHECK (state IN ('waiting', 'active', 'retry', 'deferred', 'revisit', 'done'));
ALTER TABLE sites
    ADD COLUMN next_visit double precision NOT NULL DEFAULT 0,
    ADD COLUMN compared double precision NOT NULL DEFAULT 0,
    ADD COLUMN changed double precision NOT NULL DEFAULT 0,
    ADD COLUMN compared_seconds double precision NOT NULL DEFAULT 0;
"""),
    Migration(6, "the catalog's digest index: the earliest response with each payload digest", """
CREATE TABLE catalog_digests (
    digest text COLLATE "C" PRIMARY KEY,
    url text NOT NULL,
    ts text COLLATE "C" NOT NULL,
    file integer NOT NULL
);
"""),
    Migration(7, "the crawl's decision log: why a URL was not captured (archiver why)", """
CREATE TABLE crawl_decisions (
    id bigserial PRIMARY KEY,
    origin text COLLATE "C" NOT NULL,
    url text COLLATE "C" NOT NULL,
    at double precision NOT NULL,
    kind text NOT NULL,
    detail text NOT NULL
);
CREATE INDEX crawl_decisions_url ON crawl_decisions (origin, url);
"""),
    Migration(8, "full-text search: page texts with a tsvector (GIN) and the captures indexed", """
CREATE TABLE fulltext_documents (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url text COLLATE "C" NOT NULL,
    digest text COLLATE "C" NOT NULL,
    title text NOT NULL,
    headings text NOT NULL,
    body text NOT NULL,
    words tsvector NOT NULL,
    UNIQUE (url, digest)
);
CREATE INDEX fulltext_documents_words ON fulltext_documents USING gin (words);
CREATE INDEX fulltext_documents_digest ON fulltext_documents (digest);
CREATE TABLE fulltext_captures (
    file text COLLATE "C" NOT NULL,
    pos bigint NOT NULL,
    ts text COLLATE "C" NOT NULL,
    doc bigint REFERENCES fulltext_documents (id),
    PRIMARY KEY (file, pos)
);
CREATE INDEX fulltext_captures_doc ON fulltext_captures (doc, ts);
"""),
    Migration(9, "scope.max_hops and site priority: each site's hop count and priority", """
ALTER TABLE sites
    ADD COLUMN hops integer NOT NULL DEFAULT 0,
    ADD COLUMN priority double precision NOT NULL DEFAULT 0;
DROP INDEX sites_ready;
CREATE INDEX sites_order ON sites (state, priority DESC, inlinks DESC, due);
ALTER TABLE links_sites
    ADD COLUMN hops integer NOT NULL DEFAULT 0,
    ADD COLUMN priority double precision NOT NULL DEFAULT 0;
"""),
    Migration(10, "plugins' labels of a capture (archiver.plugins), as the catalog's labels text", """
ALTER TABLE catalog_captures ADD COLUMN labels text;
"""),
    Migration(11, "each site's daily page count for its sheet's budget", """
ALTER TABLE crawl_cursors ADD COLUMN budget_day integer NOT NULL DEFAULT 0,
    ADD COLUMN budget_pages bigint NOT NULL DEFAULT 0;
"""),
    Migration(12, "the catalog entries of bundles not shipped yet, found by URL key (replay)", """
CREATE INDEX pending_captures_urlkey ON pending_captures ((capture ->> 'urlkey'));
"""),
    Migration(13, "sessions: a site paused, its cookies, its gatekeeper answers by kind", """
ALTER TABLE sites DROP CONSTRAINT sites_state_check;
ALTER TABLE sites ADD CONSTRAINT sites_state_check
    CHECK (state IN ('waiting', 'active', 'retry', 'deferred', 'paused', 'revisit', 'done'));
ALTER TABLE sites
    ADD COLUMN cookies text NOT NULL DEFAULT '',
    ADD COLUMN gatekeepers text NOT NULL DEFAULT '';
"""),
)
CURRENT_VERSION = MIGRATIONS[-1].version


class StoreError(Exception):
    """The PostgreSQL store cannot be reached or used; the message holds no password."""


class SchemaError(StoreError):
    """The database's schema is not this archiver's version."""


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every password taken out: from URLs, ``password=`` settings, and PGPASSWORD's."""
    text = _URL_PASSWORD.sub(r"\1***@", text)
    text = _KEYWORD_PASSWORD.sub(r"\1***", text)
    secret = os.environ.get("PGPASSWORD")
    return text.replace(secret, "***") if secret else text


def connect(url: str, *, readonly: bool = False) -> Connection:
    """An autocommit connection to ``url`` (read-only transactions if ``readonly``); StoreError,
    password-free, if it cannot be made."""
    options = "-c default_transaction_read_only=on" if readonly else None
    attrs = None  # the URL's target_session_attrs
    if readonly:  # read-write would refuse the session it makes read-only: the primary, then
        with contextlib.suppress(psycopg.ProgrammingError):
            if conninfo_to_dict(url).get("target_session_attrs") == "read-write":
                attrs = "primary"
    try:
        return psycopg.connect(url, autocommit=True, options=options, application_name="archiver",
                               target_session_attrs=attrs)
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to the PostgreSQL store: {redact(str(e)).strip()}") from None


def _version(conn: Connection) -> int:
    if conn.execute("SELECT to_regclass('schema_version')").fetchone() == (None,):
        return 0
    found = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(found[0]) if found and found[0] is not None else 0


def schema_version(url: str) -> int:
    """The schema version of the database at ``url`` (0: none)."""
    with connect(url, readonly=True) as conn:
        return _version(conn)


def check_version(conn: Connection) -> None:
    """SchemaError, saying what to run, unless the database is at this archiver's version."""
    found = _version(conn)
    if found < CURRENT_VERSION:
        state = "has no archiver schema" if found == 0 else f"has schema version {found}"
        raise SchemaError(f"the PostgreSQL store {state}; this archiver needs version {CURRENT_VERSION}: "
                          "run `archiver store init --config FILE`")
    if found > CURRENT_VERSION:
        raise SchemaError(f"the PostgreSQL store has schema version {found}, newer than this archiver "
                          f"(version {CURRENT_VERSION}): upgrade archiver")


def connect_current(url: str, *, readonly: bool = False) -> Connection:
    """``connect``, then ``check_version``: a store's connection, closed again if the database is
    not at this archiver's schema."""
    conn = connect(url, readonly=readonly)
    try:
        check_version(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def init_schema(url: str) -> list[Migration]:
    """Bring the database at ``url`` to this archiver's schema; the migrations applied (none if it
    was current). SchemaError if it is newer than this archiver."""
    with connect(url) as conn:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY,"
                    " description text NOT NULL, applied timestamptz NOT NULL DEFAULT now())"
                )
                found = _version(conn)
                if found > CURRENT_VERSION:
                    check_version(conn)
                applied = [m for m in MIGRATIONS if m.version > found]
                for migration in applied:
                    conn.execute(migration.sql)
                    conn.execute("INSERT INTO schema_version (version, description) VALUES (%s, %s)",
                                 (migration.version, migration.description))
        except psycopg.Error as e:
            raise StoreError(f"schema change failed: {redact(str(e)).strip()}") from None
    return applied
