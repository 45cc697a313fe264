"""``archiver search index`` and ``archiver search`` in both modes: the embedded archive (WARC folder,
SQLite catalog, FTS5 index) and the shared stores (bundles in an object store, the PostgreSQL
catalog and full-text tables)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.repo import archiver_here
from tests.support.storemodes import entries_of, write_bundles

PAGES = {
    "http://a.test/": b"<title>Harbour</title><h1>Boats</h1><p>The old harbour at dawn.</p>",
    "http://b.test/deep/page": b"<title>Mountain</title><p>A path from the harbour to the peak.</p>",
    "http://c.test/": b"<p>Nothing about the sea.</p>",
}


def test_index_and_search_in_either_mode(mode_archive, tmp_path: Path):
    bundles = write_bundles(tmp_path / "written", PAGES)
    entries = entries_of(bundles)
    mode_archive.keep(bundles)
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries)
    config = str(mode_archive.path)
    built = archiver_here("search", "index", "--config", config)
    assert built.returncode == 0, built.stderr
    assert b"3 pages extracted" in built.stdout and b"3 captures taken with their text" in built.stdout
    found = archiver_here("search", "query", "harbour", "--json", "--config", config)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert [(h["url"], h["title"]) for h in hits] == [("http://a.test/", "Harbour"),
                                                      ("http://b.test/deep/page", "Mountain")]
    assert [len(h["timestamps"]) for h in hits] == [1, 1]
    again = archiver_here("search", "index", "--config", config)
    assert b" 0 pages extracted" in again.stdout
