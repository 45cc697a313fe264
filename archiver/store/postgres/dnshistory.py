"""The temporal DNS history in PostgreSQL: the behaviour of ``store.embedded.dnshistory.DnsHistory``.

The same rows, rules and decisions (see that module): tables ``dns``, ``dns_names`` and
``dns_clock`` (schema in ``store.postgres.schema``), written by the same ``dnsrows.HistoryWriter``
with PostgreSQL's statements. Every write transaction starts by locking the clock row
(``FOR UPDATE``), so writers take turns as SQLite's single writer does: the next id
(``max(id) + 1``) and the never-backwards clock stay right with several processes on several
machines. Reads are single statements on an autocommit connection; no transaction stays open
between calls. A call is run again on a new connection if the server went away
(``store.postgres.connection``): an observation applied twice changes nothing the second time (a
failure's count may count one more).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from archiver.store.dnsrows import (
    HistoryWriter,
    checked_name,
    checked_observation,
    due_among,
    is_address,
    normalize,
    resolved_from,
)
from archiver.store.models import DnsRow, NameState, Observation, Resolved
from archiver.store.postgres.connection import PgConnection, StoreWatch, retried

_COLUMNS = "r.row, r.id, r.value, r.type, r.entered, r.superseded, r.source"
_ADDRESS = "(strpos(value, ':') > 0 OR value !~ '[^0-9.]')"  # as dns_address_now says it
_CURRENT = (
    f"SELECT {_COLUMNS} FROM dns n JOIN dns r ON r.id = n.id"
    " WHERE n.value = %(name)s AND n.superseded IS NULL AND r.superseded IS NULL"
    " ORDER BY r.entered, r.row"
)
_AT = (
    f"SELECT {_COLUMNS} FROM dns n JOIN dns r ON r.id = n.id"
    " WHERE n.value = %(name)s AND n.entered <= %(when)s"
    " AND (n.superseded IS NULL OR n.superseded > %(when)s)"
    " AND r.entered <= %(when)s AND (r.superseded IS NULL OR r.superseded > %(when)s)"
    " ORDER BY r.entered, r.row"
)
_HISTORY = (
    f"SELECT {_COLUMNS} FROM dns r WHERE r.id IN (SELECT id FROM dns WHERE value = %(name)s)"
    " ORDER BY r.entered, r.row"
)


class _PgWriter(HistoryWriter):
    ID_OF = "SELECT id FROM dns WHERE value = %s AND type = 'canonical' LIMIT 1"
    NEXT_ID = "SELECT coalesce(max(id), 0) + 1 FROM dns"
    ROLES = "SELECT row, id, type FROM dns WHERE value = %s AND superseded IS NULL"
    INSERT = ("INSERT INTO dns (id, value, type, entered, superseded, source)"
              " VALUES (%s, %s, %s, %s, NULL, %s)")
    SUPERSEDE = "UPDATE dns SET superseded = %s WHERE row = %s"
    RETIRE_HOST = "UPDATE dns SET superseded = %s WHERE id = %s AND superseded IS NULL"
    HOST_ADDRESSES = f"SELECT row, value, type FROM dns WHERE id = %s AND superseded IS NULL AND {_ADDRESS}"
    CLOCK = "UPDATE dns_clock SET last = %s"


_STATE = (
    "INSERT INTO dns_names (name, checked, next_check, outcome, failures) VALUES (%s, %s, %s, %s, {})"
    " ON CONFLICT (name) DO UPDATE SET checked = excluded.checked, next_check = excluded.next_check,"
    " outcome = excluded.outcome, failures = {}"
)
# An answer resets the count of consecutive failures; a failure adds one.
_ANSWERED = _STATE.format("0", "0")
_FAILED = _STATE.format("1", "dns_names.failures + 1")


class PgDnsHistory:
    """The DNS history in the PostgreSQL database at ``url`` (read-only transactions if ``readonly``)."""

    def __init__(self, url: str, *, readonly: bool = False, watch: StoreWatch | None = None) -> None:
        self.readonly = readonly
        self._db = PgConnection(url, readonly=readonly, watch=watch)

    def __enter__(self) -> PgDnsHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # -- writes

    @retried
    def record(self, obs: Observation, now: float, *, next_check: float) -> bool:
        """Apply one observation made at ``now`` in one transaction; True if any row changed."""
        name, canonical, chain, addresses = checked_observation(obs)
        with self._db.transaction():
            write = _PgWriter(self._db, self._now(now), obs.source)
            write.observation(canonical, chain, addresses)
            outcome = "ok" if addresses else "no-address"
            self._db.execute(_ANSWERED, (name, write.now, next_check, outcome))
            return write.commit_clock()

    @retried
    def record_failure(self, name: str, outcome: str, now: float, *, next_check: float) -> None:
        """Count a failed check of ``name``; an ``nxdomain`` also supersedes its rows."""
        name = checked_name(name)
        if outcome in ("ok", ""):
            raise ValueError(f"not a failure outcome: {outcome!r}")
        with self._db.transaction():
            write = _PgWriter(self._db, self._now(now))
            if outcome == "nxdomain":
                write.retire(write.roles(name))
            self._db.execute(_FAILED, (name, write.now, next_check, outcome))
            write.commit_clock()

    # -- reads

    @retried
    def current(self, name: str) -> Resolved | None:
        """What ``name`` resolves to now, as last observed; None if it has no current rows."""
        name = normalize(name)
        if is_address(name):
            return None
        return resolved_from(name, self._rows(_CURRENT, {"name": name}))

    @retried
    def at(self, name: str, when: float) -> Resolved | None:
        """What ``name`` resolved to at ``when``; None if it had no rows valid then."""
        name = normalize(name)
        if is_address(name):
            return None
        return resolved_from(name, self._rows(_AT, {"name": name, "when": when}))

    @retried
    def history(self, name: str) -> list[DnsRow]:
        """Every row ever about the hosts ``name`` ever belonged to, by entered then row."""
        name = normalize(name)
        return [] if is_address(name) else self._rows(_HISTORY, {"name": name})

    @retried
    def state(self, name: str) -> NameState | None:
        found = self._db.execute(
            "SELECT name, checked, next_check, outcome, failures FROM dns_names WHERE name = %s",
            (normalize(name),),
        ).fetchone()
        return None if found is None else NameState(*found)

    def due(self, now: float, names: Iterable[str] | None = None, *, limit: int | None = None) -> list[str]:
        """Names to check by ``now``, most overdue first: every known name whose next_check has
        come, or, given ``names``, those of them that have come due or were never checked."""
        if names is None:
            sql = "SELECT name FROM dns_names WHERE next_check <= %s ORDER BY next_check, name LIMIT %s"
            return [n for (n,) in self._db.read(sql, (now, limit))]
        wanted = list(dict.fromkeys(normalize(n) for n in names))
        known: dict[str, float] = dict(self._db.read(
            "SELECT name, next_check FROM dns_names WHERE name = ANY(%s)", (wanted,)))
        return due_among(wanted, known, now, limit)

    # -- internals

    def _rows(self, sql: str, params: Mapping[str, object]) -> list[DnsRow]:
        return [DnsRow(*r) for r in self._db.execute(sql, params)]

    def _now(self, now: float) -> float:
        """``now`` raised to the latest date already written, the clock row locked till commit."""
        found = self._db.execute("SELECT last FROM dns_clock FOR UPDATE").fetchone()
        return max(now, found[0]) if found else now

