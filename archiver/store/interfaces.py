"""The doors to archiver's stores: what the processes may ask of each kind of shared state.

Every process reaches a store through one of these protocols, and gets it from
:func:`archiver.stores.open_stores`, the one place that chooses an implementation (today the
embedded default: SQLite files and plain files under ``archive.root``). They are written for
distributed implementations as well: writes come in batches (``CatalogStore.add``), every write is
one transaction, and nothing assumes a shared file system between processes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from archiver.store.models import (
    Capture,
    DnsRow,
    DocumentKey,
    HostTally,
    IndexedCapture,
    NameState,
    Observation,
    Resolved,
    SearchHit,
)
from archiver.store.warcindex import OpenRecord, Stored
from archiver.web.pagetext import PageText
from archiver.web.textquery import SearchQuery


class CatalogStore(Protocol):
    """The card catalog: one entry per response or revisit record, by URL key and timestamp."""

    def add(self, captures: Iterable[Capture]) -> int:
        """Store a batch of entries (their records already durable); how many were new."""

    def closest(self, url: str, at: str) -> Capture | None: ...

    def captures(self, url: str, *, from_: str | None = None, to: str | None = None,
                 limit: int | None = None) -> list[Capture]: ...

    def walk(self, url: str, at: str, *, forward: bool) -> Iterator[Capture]:
        """Captures of ``url`` from the 14-digit ``at`` on, nearest first (forward: at or after
        it, oldest first; else at or before it, latest first), read lazily by index seeks."""

    def payload_holder(self, url: str, digest: str, at: str) -> Capture | None:
        """The latest response of ``url`` at or before the 14-digit ``at`` with payload
        ``digest``, in one query (None if there is none)."""

    def count_captures(self, url: str, *, at_most: int) -> int:
        """How many content captures (``Capture.is_content``) ``url`` has among its first
        ``at_most`` captures in time order (no more rows read)."""

    def span_counts(self, url: str, digits: int, *, from_: str = "0" * 14, to: str = "9" * 14
                    ) -> Iterator[tuple[str, int]]:
        """Content captures (``Capture.is_content``) of ``url`` per span of timestamps sharing
        their first ``digits`` digits, within the bounds, in time order, a chunk of rows at a
        time (a span may come in pieces)."""

    def hosts(self, *, after: str = "", at_most: int) -> Iterator[HostTally]:
        """Each host once, by shard then key, past the host ``after``: its captures counted up
        to ``at_most`` and their latest; an index seek per host and per shard, read lazily."""

    def list(self, url: str, match: str, *, limit: int | None = None) -> Iterator[Capture]: ...

    def iter_all(self) -> Iterator[Capture]: ...

    def count(self) -> int: ...

    def remove_file(self, filename: str) -> int: ...

    def first_with_digest(self, digest: str) -> Capture | None: ...

    def close(self) -> None: ...


class DnsHistoryStore(Protocol):
    """The temporal DNS history: what each name resolved to, and since when."""

    def record(self, obs: Observation, now: float, *, next_check: float) -> bool: ...

    def record_failure(self, name: str, outcome: str, now: float, *, next_check: float) -> None: ...

    def current(self, name: str) -> Resolved | None: ...

    def at(self, name: str, when: float) -> Resolved | None: ...

    def history(self, name: str) -> list[DnsRow]: ...

    def state(self, name: str) -> NameState | None: ...

    def due(self, now: float, names: Iterable[str] | None = None, *,
            limit: int | None = None) -> list[str]: ...

    def close(self) -> None: ...


class WarcReader(Protocol):
    """The archived records, in WARC bundles named as the catalog names them (the file name of a
    closed bundle): list the bundles, read one record by the catalog's coordinates, index a bundle.
    Nothing here is a local path: the bundles may live in a folder or in an object store."""

    def read(self, filename: str, offset: int, length: int) -> Stored:
        """The record at ``offset`` (``length`` bytes); WarcError if it is not there whole."""

    def open(self, filename: str, offset: int, length: int) -> OpenRecord:
        """That record opened for reading, its payload read as it goes (never whole: replay
        streams it); WarcError as ``read``. Close it."""

    def read_head(self, filename: str, offset: int, length: int) -> bytes:
        """The HTTP head of that record, reading as little of it as it can; WarcError as ``read``."""

    def raw(self, filename: str, offset: int, length: int) -> bytes:
        """That record's bytes as stored (its gzip member), for copying; WarcError as ``read``."""

    def names(self, pattern: str | None = None, *, include_open: bool = False) -> list[str]:
        """The bundles' names, sorted: every closed one (``include_open``: and those still
        written, where the store has any), or those ``pattern`` matches."""

    def size(self, name: str) -> int:
        """The bundle's size in bytes; WarcError if there is none of that name."""

    def index(self, name: str) -> Iterator[Capture]:
        """The entries of every response and revisit record of the bundle, in file order;
        WarcError for a bundle that is missing, not a WARC, or torn."""

    def location(self, name: str) -> str:
        """Where the bundle lives, for messages (a path, an ``s3://`` URL)."""


class StatusStore(Protocol):
    """What each crawler process last said of itself (``archiver status``, the replay's pages)."""

    def write(self, process: int, status: dict[str, Any]) -> None: ...

    def read_all(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class FullTextStore(Protocol):
    """The full-text index: the text of each distinct HTML page (by URL and payload digest), the
    catalog entries it has taken, and relevance-ranked search over them (one result per URL)."""

    def seen(self, records: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of these (WARC file, offset) pairs, those the index has taken already."""

    def documents(self, keys: Iterable[DocumentKey]) -> set[DocumentKey]:
        """Of these (URL, payload digest) documents, those the index holds."""

    def text_of(self, digest: str) -> PageText | None:
        """The text of a document with this payload digest under any URL, or None."""

    def add(self, documents: Mapping[DocumentKey, PageText], captures: Iterable[IndexedCapture]) -> None:
        """New documents and captures in one transaction; those already there are skipped."""

    def search(self, query: SearchQuery, *, at: str | None = None, limit: int = 20, offset: int = 0,
               deadline: float | None = None) -> list[SearchHit]:
        """The best-matching URLs with a matching capture at or before ``at``, best first;
        ``store.models.SearchTimeout`` past ``deadline`` seconds."""

    def counts(self) -> tuple[int, int]: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...
