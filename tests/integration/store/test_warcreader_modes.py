"""Reading the archive's bundles in both modes (``tests.support.storemodes``): the WARC folder
of the embedded mode and the object store of the shared one, through ``stores.warcs()``, and
the catalog checked against them (``verify_catalog``) and rebuilt from them (``reindex_catalog``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from archiver.store.models import Capture
from archiver.store.warcindex import WarcError, read_record
from tests.support.storemodes import ModeArchive, entries_of, write_bundles

PAGES = {f"http://example.org/page/{i}": b"<p>page %d</p>" % i * (40 + 30 * i) for i in range(12)}


def kept_bundles(archive: ModeArchive, tmp_path: Path) -> tuple[dict[str, bytes], list[Capture]]:
    """PAGES in at least three bundles, kept in the archive: each bundle's bytes, and the entries."""
    bundles = write_bundles(tmp_path / "new", PAGES)
    assert len(bundles) >= 3
    contents = {path.name: path.read_bytes() for path in bundles}
    entries = entries_of(bundles)
    archive.keep(bundles)
    return contents, entries


def catalog_order(captures: list[Capture]) -> list[Capture]:
    return sorted(captures, key=lambda c: (c.urlkey, c.timestamp, c.filename, c.offset))


def all_entries(archive: ModeArchive) -> list[Capture]:
    with archive.stores.catalog(readonly=True) as catalog:
        return list(catalog.iter_all())


def test_the_reader_lists_measures_indexes_and_reads(mode_archive: ModeArchive, tmp_path: Path) -> None:
    local = tmp_path / "new"
    bundles = write_bundles(local, PAGES)
    sizes = {path.name: path.stat().st_size for path in bundles}
    entries = entries_of(bundles)
    records = {(c.filename, c.offset): read_record(local, c.filename, c.offset, c.length) for c in entries}
    mode_archive.keep(bundles)

    warcs = mode_archive.stores.warcs()
    assert warcs.names() == sorted(sizes)
    assert warcs.names(include_open=True) == sorted(sizes)
    second = bundles[1].name
    pattern = second.replace("-00001.", "-0000[1].")
    if mode_archive.mode == "embedded":  # a file-system glob there, a glob on names in a bucket
        pattern = str(mode_archive.stores.warc_directory() / pattern)
    assert warcs.names(pattern) == [second]
    for name, size in sizes.items():
        assert warcs.size(name) == size
        assert name in warcs.location(name)
        assert list(warcs.index(name)) == [c for c in entries if c.filename == name]
    for c in entries:
        assert warcs.read(c.filename, c.offset, c.length) == records[(c.filename, c.offset)]
        # The head alone, from the record's first bytes: what the whole record says.
        assert warcs.read_head(c.filename, c.offset, c.length) == records[
            (c.filename, c.offset)].http_head
        # Opened, the record gives its payload a piece at a time, or past a place.
        stored = records[(c.filename, c.offset)]
        with warcs.open(c.filename, c.offset, c.length) as opened:
            assert (opened.http_head, opened.warc_headers, opened.size) == (
                stored.http_head, stored.warc_headers, len(stored.payload))
            assert opened.read(7) + opened.read(len(stored.payload)) == stored.payload
            assert opened.read(10) == b""
        with warcs.open(c.filename, c.offset, c.length) as opened:
            opened.skip(100)
            assert opened.read(len(stored.payload)) == stored.payload[100:]
    with pytest.raises(WarcError, match="no such WARC file"):
        warcs.read("ARCHIVER-gone.warc.gz", 0, 100)
    with pytest.raises(WarcError, match="no such WARC file"):
        warcs.size("ARCHIVER-gone.warc.gz")
    with pytest.raises(WarcError, match="bad WARC file name"):
        warcs.read("../archiver.toml", 0, 100)
    with pytest.raises(WarcError, match="no such WARC file"):
        warcs.open("ARCHIVER-gone.warc.gz", 0, 100)
    with pytest.raises(WarcError, match="bad WARC file name"):
        warcs.open("../archiver.toml", 0, 100)
    first = entries[0]
    with pytest.raises(WarcError, match="no complete record"):
        warcs.open(first.filename, first.offset + 1, first.length)


def test_verify_finds_what_differs_both_ways(mode_archive: ModeArchive, tmp_path: Path) -> None:
    _, entries = kept_bundles(mode_archive, tmp_path)
    missing, wrong_place, wrong_length = entries[0], entries[2], entries[4]
    stores = mode_archive.stores
    warcs = stores.warcs()
    with stores.catalog() as catalog:
        catalog.add([c for c in entries if c not in (missing, wrong_place, wrong_length)])
        catalog.add([
            dataclasses.replace(wrong_place, filename=entries[3].filename, offset=entries[3].offset),
            dataclasses.replace(wrong_length, length=wrong_length.length + 10),
            dataclasses.replace(missing, timestamp="20261122031459", filename="ARCHIVER-gone.warc.gz"),
        ])
        found = stores.verify_catalog(catalog, warcs, warcs.names(include_open=True))
    assert not found.ok and (found.entries, found.records) == (len(entries), len(entries))
    assert sorted(found.bad_entries) == sorted([
        f"{wrong_place.timestamp} {wrong_place.url}: {entries[3].filename}:{entries[3].offset} "
        f"holds a response record of {entries[3].url}",
        f"{wrong_length.timestamp} {wrong_length.url}: {wrong_length.filename}:{wrong_length.offset}: "
        f"the record there is not {wrong_length.length + 10} bytes long",
        f"20261122031459 {missing.url}: {warcs.location('ARCHIVER-gone.warc.gz')}: no such WARC file",
    ])
    # Each record named by no entry or by a wrong one, with its own date and URL.
    assert sorted(found.unindexed) == sorted(
        f"{c.filename}:{c.offset} {c.timestamp} {c.url}" for c in (missing, wrong_place, wrong_length))
    assert found.unreadable == []


def test_verify_reports_a_torn_bundle_and_checks_its_entries_alone(
        mode_archive: ModeArchive, tmp_path: Path) -> None:
    contents, entries = kept_bundles(mode_archive, tmp_path)
    victim = sorted(contents)[1]
    inside = [c for c in entries if c.filename == victim]
    assert len(inside) >= 2
    # Cut inside the victim's second response record: its first one still reads whole.
    mode_archive.overwrite(victim, contents[victim][:inside[1].offset + 50])
    stores = mode_archive.stores
    warcs = stores.warcs()
    with stores.catalog() as catalog:
        catalog.add(entries)
        found = stores.verify_catalog(catalog, warcs, warcs.names())
    assert len(found.unreadable) == 1
    assert found.unreadable[0].startswith(f"{warcs.location(victim)}: not a complete WARC file")
    assert found.records == len(entries) - len(inside)
    assert found.unindexed == []
    assert [line.split(": ", 1)[0] for line in found.bad_entries] == \
        [f"{c.timestamp} {c.url}" for c in catalog_order(inside[1:])]
    assert all("cut short" in line for line in found.bad_entries)


def test_reindex_rebuilds_the_catalog_and_refuses_a_torn_bundle(
        mode_archive: ModeArchive, tmp_path: Path) -> None:
    contents, entries = kept_bundles(mode_archive, tmp_path)
    stores = mode_archive.stores
    stale = dataclasses.replace(entries[0], filename="ARCHIVER-gone.warc.gz")
    with stores.catalog() as catalog:
        catalog.add([stale, *entries[5:]])
    warcs = stores.warcs()
    names = warcs.names()
    reported: list[tuple[int, int]] = []
    assert stores.reindex_catalog(warcs, names, lambda done, n: reported.append((done, n))) == len(entries)
    assert all_entries(mode_archive) == catalog_order(entries)
    assert reported[-1] == (sum(len(data) for data in contents.values()), len(entries))
    assert len(reported) == len(names)
    with stores.catalog(readonly=True) as catalog:
        assert stores.verify_catalog(catalog, warcs, names).ok

    victim = names[-1]
    mode_archive.overwrite(victim, contents[victim][:-100])
    with stores.catalog() as catalog:
        catalog.remove_file(names[0])
    before = all_entries(mode_archive)
    with pytest.raises(WarcError, match=f"{victim}: not a complete WARC file"):
        stores.reindex_catalog(warcs, names, lambda done, n: None)
    assert all_entries(mode_archive) == before


@pytest.mark.parametrize("mode_archive", ["shared"], indirect=True)
def test_a_shared_reindex_leaves_the_bundles_it_does_not_read(mode_archive: ModeArchive,
                                                              tmp_path: Path) -> None:
    """Crawlers may ship bundles while it runs: entries of a bundle in the store but not read
    stay; entries of a bundle the store does not hold go."""
    _, entries = kept_bundles(mode_archive, tmp_path)
    stores = mode_archive.stores
    warcs = stores.warcs()
    first, *others = warcs.names()
    gone = dataclasses.replace(entries[0], filename="ARCHIVER-gone.warc.gz")
    with stores.catalog() as catalog:
        catalog.add([gone, *(c for c in entries if c.filename != first)])
    assert stores.reindex_catalog(warcs, warcs.names(first), lambda done, n: None) == \
        len([c for c in entries if c.filename == first])
    assert all_entries(mode_archive) == catalog_order(entries)
    assert others
