"""The temporal DNS history: which names and addresses a host had, and when (``<root>/dns.sqlite``).

One table of rows, each a value (a name or an address), a type, an entry date (first seen), a
superseded date (NULL while current), the id of the canonical host it is about, and its source.
Per canonical host, while it exists: one ``canonical`` row (its name), one ``address`` row (its
first address, when it has any) and ``alias`` rows for every other name that leads to it and every
further address. A row is valid on ``[entered, superseded)``; a change supersedes rows and enters
new ones, and nothing is ever deleted, so "www.example.org as of 1996-12-01" is answered from the
rows valid then, in one indexed query.

Decisions:

- One id per canonical name, forever: the id of a canonical name is that of any of its canonical
  rows, current or not, so a host that vanishes (NXDOMAIN) and comes back keeps its id and its
  whole history reads as one. A new canonical name takes ``max(id) + 1``.
- The ``address`` row is the first address seen that is still answered. Servers and resolvers
  rotate the order of answers (round-robin, RFC 1794; BIND's default ``rrset-order cyclic``), so
  an order change is no change; when the address of the ``address`` row goes away, the first
  address of the answer takes its place (promoted from an alias row if it was one).
- An observation of NAME speaks for NAME's CNAME chain and its canonical host's addresses only:
  names of that chain become aliases of the canonical host (leaving any other host they were
  alias of), and other aliases of the host (learnt from other names) stay as they are.
- A canonical name that stops being one (it is now a CNAME, or NXDOMAIN) takes its whole host
  with it: all current rows of its id are superseded, aliases included, since they led to a name
  that no longer has an address of its own. Those aliases come back when next resolved.
- NXDOMAIN supersedes the name's current rows (a name that does not exist has no address now);
  every other failure (SERVFAIL, timeout, refused, no-address...) supersedes nothing: it is
  transient, or says too little. A name that exists without A/AAAA is best recorded as an
  Observation with no addresses, which supersedes the address rows and keeps the names.
- Dates never go backwards: a ``now`` earlier than the latest date already written (a wall-clock
  step back) is taken as that date, so no row is superseded before it was entered.
- Names are compared lower-case without the trailing dot. A name made only of digits and dots is
  refused: getaddrinfo/inet_aton read it as an address ("10.1" is 10.0.0.1), and it keeps names
  and addresses, which share the value column, apart.

current() and at() answer with every row of the host valid then, its aliases included, so their
cost grows with the host's alias count: a hosting platform's canonical name aliased by 20,000
shops takes about 0.1 s to read (record() reads only a host's address rows, so stays cheap).

Dates are unix seconds stored as REAL (exact for the API's floats). WAL with ``synchronous=NORMAL``:
a process crash loses nothing, a power cut may lose the last commits (re-observed at their next
check) but never corrupts. Like the catalog, a DnsHistory is used from one thread at a time (it
may be a different thread each time); several processes may share the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

from archiver.store.dnsrows import (
    HistoryWriter,
    checked_name,
    checked_observation,
    due_among,
    is_address,
    normalize,
    resolved_from,
)
from archiver.store.embedded import sqlite
from archiver.store.models import DnsRow, NameState, Observation, Resolved

SCHEMA_VERSION = 1
# Names per "IN (...)" query in due(); SQLite allows 32766 parameters since 3.32.
_CHUNK = 500

# SQL for "the value is an address", as dnsrows.is_address says; dns_address_now is made with it, and a
# query can use that index only when its WHERE holds these very words.
_ADDRESS = "(instr(value, ':') > 0 OR value NOT GLOB '*[^0-9.]*')"
_SCHEMA = f"""
CREATE TABLE dns (
    row INTEGER PRIMARY KEY,
    id INTEGER NOT NULL,
    value TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('canonical', 'address', 'alias')),
    entered REAL NOT NULL,
    superseded REAL CHECK (superseded >= entered),
    source TEXT NOT NULL
);
CREATE INDEX dns_value ON dns (value, entered);
CREATE INDEX dns_id ON dns (id, entered);
CREATE INDEX dns_value_now ON dns (value) WHERE superseded IS NULL;
CREATE INDEX dns_id_now ON dns (id) WHERE superseded IS NULL;
CREATE INDEX dns_address_now ON dns (id) WHERE superseded IS NULL AND {_ADDRESS};
CREATE TABLE names (
    name TEXT PRIMARY KEY,
    checked REAL,
    next_check REAL NOT NULL,
    outcome TEXT NOT NULL,
    failures INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX names_due ON names (next_check);
CREATE TABLE clock (last REAL NOT NULL);
INSERT INTO clock VALUES (0);
"""
_COLUMNS = "r.row, r.id, r.value, r.type, r.entered, r.superseded, r.source"
# The name's row valid then gives the id, whose rows valid then are the answer. CROSS JOIN keeps
# the name side outer (SQLite never reorders it); each side is a SEARCH of one index.
_CURRENT = (
    f"SELECT {_COLUMNS} FROM dns n CROSS JOIN dns r ON r.id = n.id"
    " WHERE n.value = :name AND n.superseded IS NULL AND r.superseded IS NULL"
    " ORDER BY r.entered, r.row"
)
AT_QUERY = (
    f"SELECT {_COLUMNS} FROM dns n CROSS JOIN dns r ON r.id = n.id"
    " WHERE n.value = :name AND n.entered <= :when AND (n.superseded IS NULL OR n.superseded > :when)"
    " AND r.entered <= :when AND (r.superseded IS NULL OR r.superseded > :when)"
    " ORDER BY r.entered, r.row"
)
_HISTORY = (
    f"SELECT {_COLUMNS} FROM dns r WHERE r.id IN (SELECT id FROM dns WHERE value = ?)"
    " ORDER BY r.entered, r.row"
)
# Through dns_address_now: a host shared by many names (a hosting platform's canonical name,
# aliased by every shop or blog it hosts) has many alias rows but few addresses.
_HOST_ADDRESSES = f"SELECT row, value, type FROM dns WHERE id = ? AND superseded IS NULL AND {_ADDRESS}"
_INSERT = "INSERT INTO dns (id, value, type, entered, superseded, source) VALUES (?, ?, ?, ?, NULL, ?)"


class _Writer(HistoryWriter):
    ID_OF = "SELECT id FROM dns WHERE value = ? AND type = 'canonical' LIMIT 1"
    NEXT_ID = "SELECT coalesce(max(id), 0) + 1 FROM dns"
    ROLES = "SELECT row, id, type FROM dns WHERE value = ? AND superseded IS NULL"
    INSERT = _INSERT
    SUPERSEDE = "UPDATE dns SET superseded = ? WHERE row = ?"
    RETIRE_HOST = "UPDATE dns SET superseded = ? WHERE id = ? AND superseded IS NULL"
    HOST_ADDRESSES = _HOST_ADDRESSES
    CLOCK = "UPDATE clock SET last = ?"


class DnsHistory:
    """The DNS history in the SQLite file ``path`` (made on first open unless ``readonly``)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            if not self.path.exists():
                raise FileNotFoundError(f"no DNS history at {self.path}")
            self._db = sqlite.open_reader(self.path, sqlite.DNS_HISTORY_TIMEOUT)
        else:
            self._db = sqlite.open_writer(self.path, sqlite.DNS_HISTORY_TIMEOUT)
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> DnsHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        sqlite.close(self._db, writer=not self.readonly)

    # -- writes

    def record(self, obs: Observation, now: float, *, next_check: float) -> bool:
        """Apply one observation made at ``now`` in one transaction; True if any row changed.

        Recording the same observation again changes no row, only the name's state (checked,
        next_check, outcome "ok" or "no-address", failures 0).
        """
        name, canonical, chain, addresses = checked_observation(obs)
        with self._transaction(now) as now:
            write = _Writer(self._db, now, obs.source)
            write.observation(canonical, chain, addresses)
            outcome = "ok" if addresses else "no-address"
            self._db.execute(
                "INSERT INTO names VALUES (?, ?, ?, ?, 0) ON CONFLICT (name) DO UPDATE SET"
                " checked = excluded.checked, next_check = excluded.next_check,"
                " outcome = excluded.outcome, failures = 0",
                (name, now, next_check, outcome),
            )
            return write.commit_clock()

    def record_failure(self, name: str, outcome: str, now: float, *, next_check: float) -> None:
        """Count a failed check of ``name`` in its state; an ``nxdomain`` also supersedes its rows
        (all rows of its host when it was a canonical name, else its alias row)."""
        name = checked_name(name)
        if outcome in ("ok", ""):
            raise ValueError(f"not a failure outcome: {outcome!r}")
        with self._transaction(now) as now:
            write = _Writer(self._db, now)
            if outcome == "nxdomain":
                write.retire(write.roles(name))
            self._db.execute(
                "INSERT INTO names VALUES (?, ?, ?, ?, 1) ON CONFLICT (name) DO UPDATE SET"
                " checked = excluded.checked, next_check = excluded.next_check,"
                " outcome = excluded.outcome, failures = names.failures + 1",
                (name, now, next_check, outcome),
            )
            write.commit_clock()

    # -- reads

    def current(self, name: str) -> Resolved | None:
        """What ``name`` resolves to now, as last observed; None if it has no current rows."""
        name = normalize(name)
        if is_address(name):
            return None
        return resolved_from(name, self._rows(_CURRENT, {"name": name}))

    def at(self, name: str, when: float) -> Resolved | None:
        """What ``name`` resolved to at ``when``; None if it had no rows valid then."""
        name = normalize(name)
        if is_address(name):
            return None
        return resolved_from(name, self._rows(AT_QUERY, {"name": name, "when": when}))

    def history(self, name: str) -> list[DnsRow]:
        """Every row ever about the hosts ``name`` ever belonged to, by entered then row."""
        name = normalize(name)
        return [] if is_address(name) else self._rows(_HISTORY, (name,))

    def state(self, name: str) -> NameState | None:
        found = self._db.execute(
            "SELECT name, checked, next_check, outcome, failures FROM names WHERE name = ?",
            (normalize(name),),
        ).fetchone()
        return None if found is None else NameState(*found)

    def due(self, now: float, names: Iterable[str] | None = None, *, limit: int | None = None) -> list[str]:
        """Names to check by ``now``, most overdue first: every known name whose next_check has
        come, or, given ``names``, those of them that have come due or were never checked."""
        if names is None:
            sql = "SELECT name FROM names WHERE next_check <= ? ORDER BY next_check, name LIMIT ?"
            return [n for (n,) in self._db.execute(sql, (now, -1 if limit is None else limit))]
        wanted = list(dict.fromkeys(normalize(n) for n in names))
        known: dict[str, float] = {}
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT name, next_check FROM names WHERE name IN ({marks})"
            known.update(self._db.execute(sql, chunk).fetchall())
        return due_among(wanted, known, now, limit)

    def all_rows(self) -> Iterator[DnsRow]:
        """Every row, by row number (for ``archiver store migrate``)."""
        yield from (DnsRow(*r) for r in self._db.execute(
            "SELECT row, id, value, type, entered, superseded, source FROM dns ORDER BY row"))

    def all_states(self) -> Iterator[NameState]:
        """Every name's state, by name (for ``archiver store migrate``)."""
        yield from (NameState(*r) for r in self._db.execute(
            "SELECT name, checked, next_check, outcome, failures FROM names ORDER BY name"))

    def clock(self) -> float:
        """The latest date written: no later write is dated before it."""
        return float(self._db.execute("SELECT last FROM clock").fetchone()[0])

    # -- internals

    def _rows(self, sql: str, params: tuple[str, ...] | Mapping[str, object]) -> list[DnsRow]:
        return [DnsRow(*r) for r in self._db.execute(sql, params)]

    def _setup(self) -> None:
        db = self._db
        if self.readonly:
            version = db.execute("PRAGMA user_version").fetchone()[0]
        else:
            with sqlite.transaction(db):
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path}: DNS history schema {version}, this program reads {SCHEMA_VERSION}"
            )

    @contextmanager
    def _transaction(self, now: float) -> Iterator[float]:
        """A write transaction; yields ``now`` raised to the latest date already written."""
        with sqlite.transaction(self._db):
            (last,) = self._db.execute("SELECT last FROM clock").fetchone()
            yield max(now, last)


def _chunks(items: list[str]) -> Iterator[list[str]]:
    it = iter(items)
    while chunk := list(islice(it, _CHUNK)):
        yield chunk
