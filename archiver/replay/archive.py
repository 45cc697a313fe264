"""What the replay service reads: the card catalog, the WARC bundles, the DNS history, the status files.

One :class:`ReplayArchive` is shared by every request (``request.app.state.archive``). Everything
is opened read-only; nothing a request names can reach a file outside ``<root>/warcs``
(:func:`archiver.warcindex.locate` refuses names with a path in them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archiver.catalog import Capture, Catalog
from archiver.config import Config
from archiver.dnshistory import DnsHistory
from archiver.status import read_statuses
from archiver.warcindex import Stored, read_record


class ReplayArchive:
    """Read-only handles on one archive root."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.root: Path = config.root
        self.warcs = self.root / "warcs"
        self.catalog = Catalog(self.root / "catalog", config.catalog.shards, readonly=True)
        self._dns: DnsHistory | None = None

    def record(self, capture: Capture) -> Stored:
        """The WARC record a catalog entry points at (raises WarcError if it is not there)."""
        return read_record(self.warcs, capture.filename, capture.offset, capture.length)

    def dns(self) -> DnsHistory | None:
        """The DNS history, or None while no crawl or DNS service has made one."""
        if self._dns is None:
            path = self.root / "dns.sqlite"
            if not path.exists():
                return None
            self._dns = DnsHistory(path, readonly=True)
        return self._dns

    def statuses(self) -> list[dict[str, Any]]:
        """The last status each crawler process wrote (``<root>/state/crawl-N.json``)."""
        return read_statuses(self.root)

    def close(self) -> None:
        self.catalog.close()
        if self._dns is not None:
            self._dns.close()
            self._dns = None
