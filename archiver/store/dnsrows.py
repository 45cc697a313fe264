"""How observations become the DNS history's rows, whichever database holds them (the rules are in
``store.embedded.dnshistory``'s docstring): names checked and normalised, the rows of a host read
into a ``Resolved``, and ``HistoryWriter``, the row changes of one write transaction, given each
database's statements by its backend. Pure logic over a connection protocol: no backend here.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from archiver.store.models import ADDRESS, ALIAS, CANONICAL, DnsRow, Observation, Resolved

_SPACE = re.compile(r"\s")


def normalize(name: str) -> str:
    """A host name as the DNS history keeps it and the resolver asks for it: lower-case, no
    trailing dot (the one normaliser of host names for DNS)."""
    return name.lower().rstrip(".")


def is_address(value: str) -> bool:
    # Exact for stored values (addresses are normalised by ipaddress, names refused when they
    # match); the same test as each backend's ``_ADDRESS`` in SQL.
    return ":" in value or not value.strip("0123456789.")


def checked_name(raw: str) -> str:
    name = normalize(raw)
    if not name or is_address(name) or _SPACE.search(name):
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


def checked_observation(obs: Observation) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """The observation's name, canonical, chain and addresses, normalised; ValueError if incoherent."""
    name, canonical = checked_name(obs.name), checked_name(obs.canonical)
    chain = tuple(checked_name(n) for n in obs.chain)
    if chain and chain[0] != name:
        raise ValueError(f"CNAME chain {chain} does not start at {name!r}")
    if not chain and canonical != name:
        raise ValueError(f"{name!r} has canonical {canonical!r} but no CNAME chain")
    if canonical in chain or len(set(chain)) != len(chain):
        raise ValueError(f"CNAME chain {chain} -> {canonical!r} loops")
    return name, canonical, chain, _addresses(obs.addresses)


def resolved_from(name: str, rows: list[DnsRow]) -> Resolved | None:
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
            (extra if is_address(r.value) else aliases).append(r.value)
    return Resolved(name, rows[0].id, canonical, (*address, *extra), tuple(aliases), tuple(rows))



def due_among(wanted: list[str], known: Mapping[str, float], now: float, limit: int | None) -> list[str]:
    """Of the ``wanted`` names, those due by ``now`` given the ``known`` next checks (a name never
    checked first), most overdue first; ties keep ``wanted``'s order."""
    unseen = float("-inf")
    found = [n for n in wanted if known.get(n, unseen) <= now]
    found.sort(key=lambda n: known.get(n, unseen))  # stable
    return found if limit is None else found[:limit]

class _Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SqlConnection(Protocol):
    """What HistoryWriter needs of a database connection (sqlite3's, psycopg's)."""

    def execute(self, sql: str, params: Sequence[object], /) -> _Cursor: ...


class HistoryWriter:
    """The row changes of one write transaction, all dated ``now``. Each backend subclasses it
    with its database's statements (``store.embedded.dnshistory``, ``store.postgres.dnshistory``)."""

    ID_OF: ClassVar[str]
    NEXT_ID: ClassVar[str]
    ROLES: ClassVar[str]
    INSERT: ClassVar[str]
    SUPERSEDE: ClassVar[str]
    RETIRE_HOST: ClassVar[str]
    HOST_ADDRESSES: ClassVar[str]
    CLOCK: ClassVar[str]

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
