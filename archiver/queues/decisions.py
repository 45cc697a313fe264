"""A site's decision log: why the crawl left a URL uncaptured, kept for ``archiver why``.

A capture explains itself (the catalog has it). A URL the crawl chose not to fetch, or could not,
leaves nothing in the archive, so the crawl writes a line here when it decides:

``robots``
    robots.txt disallowed the URL (``archiver why`` finds the deciding line in the robots.txt
    capture in force at the decision's time).
``url-too-long``, ``max-depth``, ``trap``, ``shape``
    a guard refused a link (``detail``: the page that linked it).
``scope``
    the config's scope rules (archiver.web.scope) excluded a link of the site, or a URL queued
    before they did (``detail``: the deciding rule, and the page that linked it).
``plugin``
    a plugin's ``should_visit`` refused the URL (``detail``: the plugin's name, and the page that
    linked it).
``fetch-error``
    no answer: DNS, connection, timeout, a malformed response (``detail``: the error).
``gone``
    not asked again this visit, its last answers were 404/410 (``detail``: the last one).
``login``
    the site's login page (its sheet's ``login_url``): fetched to log in only, never crawled.
``error``
    handling the URL raised (``detail``: the exception).

One ``time<TAB>kind<TAB>url<TAB>detail`` line per decision. A visit logs a (kind, URL) once,
however many pages link the URL. The log is bounded: ``decisions`` holds at most half of
``crawl.max_decisions`` lines; when it is full it becomes ``decisions.1`` (replacing the one
before) and a new file starts, so a site keeps between half and all of its newest decisions. The
embedded crawl queue keeps the files in the site's folder and writes them with the queue log's group
commit; the PostgreSQL crawl queue keeps the same lines in table ``crawl_decisions``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

DECISIONS = "decisions"
OLDER = "decisions.1"
KINDS = ("robots", "url-too-long", "max-depth", "trap", "shape", "scope", "plugin", "fetch-error",
         "gone", "login", "error")
# A URL longer than this is not logged (a line stays small; ``why`` tells a URL over
# crawl.max_url_length from its length alone).
MAX_LOGGED_URL = 8192
MAX_DETAIL = 300


class Decision(NamedTuple):
    """One decision about one URL."""

    time: float  # seconds since the epoch
    kind: str  # one of KINDS
    url: str
    detail: str


def decision_line(decision: Decision) -> bytes:
    """The log line of a decision (tabs and line breaks in ``detail`` become spaces)."""
    detail = " ".join(decision.detail[:MAX_DETAIL].split())
    return f"{decision.time:.3f}\t{decision.kind}\t{decision.url}\t{detail}\n".encode(
        errors="replace")


def parse_decision(line: bytes) -> Decision | None:
    """The decision of a whole log line, or None if it is not one."""
    fields = line.rstrip(b"\n").split(b"\t")
    if len(fields) != 4 or not line.endswith(b"\n"):
        return None
    try:
        when, kind, url, detail = (field.decode() for field in fields)
        return Decision(float(when), kind, url, detail) if kind in KINDS and url else None
    except (UnicodeDecodeError, ValueError):
        return None


def loggable(url: str) -> bool:
    """Can ``url`` stand in a log line?"""
    if not 0 < len(url) <= MAX_LOGGED_URL or any(c in url for c in "\t\n\r"):
        return False
    try:
        url.encode()
    except UnicodeEncodeError:  # a lone surrogate: no line could hold it
        return False
    return True


class DecisionLog:
    """One site's decision log while its crawl queue is open (one writer: the queue's holder)."""

    def __init__(self, directory: Path, limit: int) -> None:
        """``limit``: decisions kept at most (``crawl.max_decisions``); 0 logs nothing."""
        self.directory = directory
        self._per_file = max(limit // 2, 1) if limit > 0 else 0
        self._file: BinaryIO | None = None  # opened at the first decision
        self._lines = 0  # in the current file
        self._logged: set[int] = set()  # hashes of (kind, url) this visit wrote to the file
        self._unsynced = False

    def add(self, decision: Decision) -> None:
        """Log ``decision`` (buffered; ``flush`` hands it to the OS), unless this visit already
        logged its kind for its URL."""
        if not self._per_file or not loggable(decision.url):
            return
        key = hash((decision.kind, decision.url))
        if key in self._logged:
            return
        if self._file is None:
            self._open()
        elif self._lines >= self._per_file:
            self._rotate()
        assert self._file is not None
        self._file.write(decision_line(decision))
        self._lines += 1
        self._logged.add(key)
        self._unsynced = True

    def _open(self) -> None:
        path = self.directory / DECISIONS
        try:
            with path.open("rb") as existing:
                self._lines = sum(chunk.count(b"\n")
                                  for chunk in iter(lambda: existing.read(1 << 16), b""))
        except FileNotFoundError:
            self._lines = 0
        self._file = path.open("ab")
        if self._lines >= self._per_file:
            self._rotate()

    def _rotate(self) -> None:
        """The full file becomes the older one; a new one starts (only this visit's hashes of
        what the new file holds are kept)."""
        assert self._file is not None
        self._file.close()
        os.replace(self.directory / DECISIONS, self.directory / OLDER)
        self._file = (self.directory / DECISIONS).open("ab")
        self._lines = 0
        self._logged.clear()

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def unsynced_descriptor(self) -> int | None:
        """A duplicate of the log's descriptor for a group commit to fsync and close, if lines
        were written since the last call; else None."""
        if self._file is None or not self._unsynced:
            return None
        self._file.flush()
        self._unsynced = False
        return os.dup(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_decisions(directory: Path, url: str) -> list[Decision]:
    """The logged decisions about ``url`` in a site's folder, oldest first (read without the
    queue's lock: a line being written is ignored)."""
    return [d for d in read_all_decisions(directory) if d.url == url]


def read_all_decisions(directory: Path) -> Iterator[Decision]:
    """Every decision in a site's folder, oldest first (``archiver store migrate`` copies them)."""
    for name in (OLDER, DECISIONS):
        try:
            data = (directory / name).read_bytes()
        except FileNotFoundError:
            continue
        for line in data.splitlines(keepends=True):
            decision = parse_decision(line)
            if decision is not None:
                yield decision
