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

import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from archiver.store import sqlite

CANONICAL, ADDRESS, ALIAS = "canonical", "address", "alias"
SCHEMA_VERSION = 1
# Writers wait this long for another process's write transaction (SQLite's busy timeout).
_SPACE = re.compile(r"\s")
# Names per "IN (...)" query in due(); SQLite allows 32766 parameters since 3.32.
_CHUNK = 500

# SQL for "the value is an address", as _is_address says; dns_address_now is made with it, and a
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



@dataclass(frozen=True, slots=True)
class DnsRow:
    row: int
    id: int
    value: str
    type: str  # "canonical", "address" or "alias"
    entered: float
    superseded: float | None
    source: str  # "dns", "hosts" (the hosts-file override) or "inline" (resolved by the crawler)


@dataclass(frozen=True, slots=True)
class Observation:
    name: str  # the name asked for (lower-case, no trailing dot)
    canonical: str  # the end of its CNAME chain (== name when there is no CNAME)
    chain: tuple[str, ...]  # CNAME names from name to canonical, excluding canonical (empty when none)
    addresses: tuple[str, ...]  # A then AAAA addresses as answered (IPv6 compressed form)
    ttl: float  # smallest TTL seen in the answers, seconds (the caller turns it into next_check)
    source: str = "dns"


@dataclass(frozen=True, slots=True)
class Resolved:
    name: str
    id: int
    canonical: str
    addresses: tuple[str, ...]  # addresses[0] is the `address` row, then the alias addresses
    aliases: tuple[str, ...]  # alias names, in entry order
    rows: tuple[DnsRow, ...]  # rows of that id valid at the asked time, by entered then row


@dataclass(frozen=True, slots=True)
class NameState:
    name: str
    checked: float | None
    next_check: float
    outcome: str  # "ok", "no-address" (an answer without A/AAAA), "nxdomain", "servfail", "timeout"...
    failures: int  # consecutive failed checks (reset by any answer)


def normalize(name: str) -> str:
    """A name as stored: lower-case, no trailing dot."""
    return name.lower().rstrip(".")


def _is_address(value: str) -> bool:
    # Exact for stored values (addresses are normalised by ipaddress, names refused when they
    # match); the same test as _ADDRESS in SQL.
    return ":" in value or not value.strip("0123456789.")


def _name(raw: str) -> str:
    name = normalize(raw)
    if not name or _is_address(name) or _SPACE.search(name):
        raise ValueError(f"not a host name: {raw!r}")
    return name


def _addresses(raw: Iterable[str]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for text in raw:
        try:
            out[str(ipaddress.ip_address(text))] = None
        except ValueError:
            raise ValueError(f"not an IP address: {text!r}") from None
    return tuple(out)


def _check(obs: Observation) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """The observation's name, canonical, chain and addresses, normalised; ValueError if incoherent."""
    name, canonical = _name(obs.name), _name(obs.canonical)
    chain = tuple(_name(n) for n in obs.chain)
    if chain and chain[0] != name:
        raise ValueError(f"CNAME chain {chain} does not start at {name!r}")
    if not chain and canonical != name:
        raise ValueError(f"{name!r} has canonical {canonical!r} but no CNAME chain")
    if canonical in chain or len(set(chain)) != len(chain):
        raise ValueError(f"CNAME chain {chain} -> {canonical!r} loops")
    return name, canonical, chain, _addresses(obs.addresses)


def _resolved(name: str, rows: list[DnsRow]) -> Resolved | None:
    if not rows:
        return None
    canonical, address = "", ()  # type: tuple[str, tuple[str, ...]]
    aliases: list[str] = []
    extra: list[str] = []
    for r in rows:
        if r.type == CANONICAL:
            canonical = r.value
        elif r.type == ADDRESS:
            address = (r.value,)
        else:
            (extra if _is_address(r.value) else aliases).append(r.value)
    return Resolved(name, rows[0].id, canonical, (*address, *extra), tuple(aliases), tuple(rows))


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
        name, canonical, chain, addresses = _check(obs)
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
        name = _name(name)
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
        if _is_address(name):
            return None
        return _resolved(name, self._rows(_CURRENT, {"name": name}))

    def at(self, name: str, when: float) -> Resolved | None:
        """What ``name`` resolved to at ``when``; None if it had no rows valid then."""
        name = normalize(name)
        if _is_address(name):
            return None
        return _resolved(name, self._rows(AT_QUERY, {"name": name, "when": when}))

    def history(self, name: str) -> list[DnsRow]:
        """Every row ever about the hosts ``name`` ever belonged to, by entered then row."""
        name = normalize(name)
        return [] if _is_address(name) else self._rows(_HISTORY, (name,))

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
        unseen = float("-inf")
        found = [n for n in wanted if known.get(n, unseen) <= now]
        found.sort(key=lambda n: known.get(n, unseen))  # stable: ties keep the caller's order
        return found if limit is None else found[:limit]

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


class _Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SqlConnection(Protocol):
    """What _Writer needs of a database connection (sqlite3's, psycopg's)."""

    def execute(self, sql: str, params: Sequence[object], /) -> _Cursor: ...


class _Writer:
    """The row changes of one write transaction, all dated ``now``. The statements are SQLite's; a
    subclass gives another database's (``store.pgdnshistory``)."""

    ID_OF = "SELECT id FROM dns WHERE value = ? AND type = 'canonical' LIMIT 1"
    NEXT_ID = "SELECT coalesce(max(id), 0) + 1 FROM dns"
    ROLES = "SELECT row, id, type FROM dns WHERE value = ? AND superseded IS NULL"
    INSERT = _INSERT
    SUPERSEDE = "UPDATE dns SET superseded = ? WHERE row = ?"
    RETIRE_HOST = "UPDATE dns SET superseded = ? WHERE id = ? AND superseded IS NULL"
    HOST_ADDRESSES = _HOST_ADDRESSES
    CLOCK = "UPDATE clock SET last = ?"

    def __init__(self, db: SqlConnection, now: float, source: str = "dns") -> None:
        self.db, self.now, self.source = db, now, source
        self.changed = False

    def observation(self, canonical: str, chain: tuple[str, ...], addresses: tuple[str, ...]) -> None:
        """Make the rows say what one checked observation says (see the module doc)."""
        target = self.id_of(canonical)
        roles = self.roles(canonical)
        for row, _, kind in roles:
            if kind == ALIAS:  # a former alias, now a canonical name of its own
                self.supersede(row)
        if not any(kind == CANONICAL for _, _, kind in roles):
            self.insert(target, canonical, CANONICAL)
        for alias in chain:
            roles = self.roles(alias)
            if (target, ALIAS) not in {(rid, kind) for _, rid, kind in roles}:
                self.retire(roles)
                self.insert(target, alias, ALIAS)
        self.addresses(target, addresses)

    def id_of(self, canonical: str) -> int:
        """The id of a canonical name: the one it always had, or a new one."""
        found = self.db.execute(self.ID_OF, (canonical,)).fetchone()
        if found is None:
            found = self.db.execute(self.NEXT_ID, ()).fetchone()
        return int(found[0])

    def roles(self, name: str) -> list[tuple[int, int, str]]:
        """(row, id, type) of the current rows whose value is ``name``."""
        return self.db.execute(self.ROLES, (name,)).fetchall()

    def insert(self, rid: int, value: str, kind: str) -> None:
        self.db.execute(self.INSERT, (rid, value, kind, self.now, self.source))
        self.changed = True

    def supersede(self, row: int) -> None:
        self.db.execute(self.SUPERSEDE, (self.now, row))
        self.changed = True

    def retire(self, roles: list[tuple[int, int, str]]) -> None:
        """End a name's ``roles``: an alias row alone; a canonical row with all of its host's rows."""
        for row, rid, kind in roles:
            if kind == CANONICAL:
                self.db.execute(self.RETIRE_HOST, (self.now, rid))
                self.changed = True
            else:
                self.supersede(row)

    def addresses(self, rid: int, answered: tuple[str, ...]) -> None:
        """Make the current address rows of host ``rid`` the ``answered`` set (see module doc)."""
        first: tuple[int, str] | None = None
        extra: dict[str, int] = {}
        for row, value, kind in self.db.execute(self.HOST_ADDRESSES, (rid,)).fetchall():
            if kind == ADDRESS:
                first = (row, value)
            else:
                extra[value] = row
        primary: str | None
        if first is not None and first[1] in answered:
            primary = first[1]
        else:
            if first is not None:
                self.supersede(first[0])
            primary = answered[0] if answered else None
            if primary is not None:
                self.insert(rid, primary, ADDRESS)
        for value, row in extra.items():
            if value == primary or value not in answered:
                self.supersede(row)
        for value in answered:
            if value != primary and value not in extra:
                self.insert(rid, value, ALIAS)

    def commit_clock(self) -> bool:
        """Move the clock to ``now`` if rows changed; return whether they did."""
        if self.changed:
            self.db.execute(self.CLOCK, (self.now,))
        return self.changed


def _chunks(items: list[str]) -> Iterator[list[str]]:
    it = iter(items)
    while chunk := list(islice(it, _CHUNK)):
        yield chunk
