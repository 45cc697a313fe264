"""The links batch's state (``queues.interfaces.LinksState``) and its spool (``SpoolFiles``), run
against both backends: files under the archive root, and PostgreSQL with the object store (a real
server each). Only the interfaces are used, so both must answer alike."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from archiver.queues.bloom import BloomBitmap
from archiver.queues.interfaces import LinksState, SpoolFiles
from archiver.queues.linksstate import EmbeddedLinksState
from archiver.queues.pglinksstate import PgLinksState
from archiver.queues.spool import OBJECT_PREFIX, ObjectSpool, SpoolDirectory
from archiver.store.objectstore import S3Store
from archiver.store.shipping import ship_closed

NOW = 1_790_000_000.0
FILE = ("0-20261122000000-00001.tsv", 10, 4, 1)


@dataclass
class Backend:
    """Opens the state of one archive, lists the generations whose bitmap it holds, and writes raw
    bytes as a bitmap (None: removes it) the way an operator or a crash would."""

    open: Callable[[], LinksState]
    generations: Callable[[], set[int]]
    plant: Callable[[int, bytes | None], None]


def _generation(name: str) -> int:
    return int(name.rsplit("/", 1)[-1].removeprefix("bitmap-").removesuffix(".bloom"))


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opened: list[LinksState] = []
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_store_url")
        bucket = request.getfixturevalue("s3_bucket")
        objects = S3Store(bucket.client, bucket.name, "archive")

        def make() -> LinksState:
            opened.append(PgLinksState(url, objects, tmp_path / "scratch"))
            return opened[-1]

        def generations() -> set[int]:
            return {_generation(key) for key in objects.list("links/")}

        def plant(generation: int, data: bytes | None) -> None:
            key = f"archive/links/bitmap-{generation}.bloom"
            if data is None:
                bucket.client.delete_object(Bucket=bucket.name, Key=key)
            else:
                bucket.client.put_object(Bucket=bucket.name, Key=key, Body=data)
    else:
        folder = tmp_path / "links"

        def make() -> LinksState:
            opened.append(EmbeddedLinksState(folder))
            return opened[-1]

        def generations() -> set[int]:
            return {_generation(p.name) for p in folder.glob("bitmap-*")}

        def plant(generation: int, data: bytes | None) -> None:
            path = folder / f"bitmap-{generation}.bloom"
            if data is None:
                path.unlink()
            else:
                path.write_bytes(data)

    yield Backend(make, generations, plant)
    for state in opened:
        state.close()


def bitmap(*keys: str) -> BloomBitmap:
    b = BloomBitmap(8192, 5)
    for key in keys:
        b.add(key)
    return b


def checkpoint(state: LinksState, keys: tuple[str, ...], files: list[tuple[str, int, int, int]],
               inlinks: dict[str, int], woken: set[str]) -> int:
    generation = state.generation + 1
    state.save_bitmap(bitmap(*keys), generation)
    return state.commit(generation, files, inlinks, woken, NOW)


def test_a_new_state_is_empty(backend: Backend) -> None:
    state = backend.open()
    assert state.generation == 0
    assert state.load_bitmap() is None
    assert state.files_done() == set() and state.dirty_sites() == []


def test_a_checkpoint_commits_ledger_counts_and_generation_together(backend: Backend) -> None:
    state = backend.open()
    added = checkpoint(state, ("http://a.test/",), [FILE],
                       {"http://a.test": 2, "http://b.test": 1}, {"http://a.test", "http://c.test"})
    assert added == 3
    assert state.generation == 1
    assert state.files_done() == {FILE[0]}
    assert sorted(state.dirty_sites()) == [
        ("http://a.test", 2, True), ("http://b.test", 1, False), ("http://c.test", 0, True)]
    state.close()
    again = backend.open()                                 # what a later run finds
    assert again.generation == 1 and again.files_done() == {FILE[0]}
    loaded = again.load_bitmap()
    assert loaded is not None and loaded.count == 1
    assert "http://a.test/" in loaded and "http://b.test/" not in loaded
    assert backend.generations() == {1}


def test_counts_add_up_a_woken_site_stays_woken_until_pushed_and_old_bitmaps_go(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, ("k1",), [FILE], {"http://a.test": 2}, {"http://a.test"})
    added = checkpoint(state, ("k1", "k2"), [("1-20261122000100-00001.tsv", 5, 0, 0)],
                       {"http://a.test": 3, "http://d.test": 1}, set())
    assert added == 1                                      # only d is new
    assert sorted(state.dirty_sites()) == [("http://a.test", 5, True), ("http://d.test", 1, False)]
    assert backend.generations() == {2}                    # generation 1 removed after the commit
    state.pushed(["http://a.test"])
    assert state.dirty_sites() == [("http://d.test", 1, False)]
    checkpoint(state, ("k1", "k2", "k3"), [("0-20261122000200-00002.tsv", 1, 1, 0)], {}, {"http://a.test"})
    assert sorted(state.dirty_sites()) == [("http://a.test", 5, True), ("http://d.test", 1, False)]
    assert state.files_done() == {FILE[0], "1-20261122000100-00001.tsv", "0-20261122000200-00002.tsv"}


def test_a_bitmap_saved_but_never_committed_is_dropped_at_the_next_load(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, ("old",), [FILE], {"http://a.test": 1}, set())
    state.save_bitmap(bitmap("old", "new"), 2)             # killed before the commit
    state.close()
    assert backend.generations() == {1, 2}
    again = backend.open()
    loaded = again.load_bitmap()
    assert again.generation == 1 and loaded is not None and "new" not in loaded
    assert backend.generations() == {1}


def test_a_commit_that_fails_changes_nothing(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, ("k",), [FILE], {"http://a.test": 1}, set())
    state.save_bitmap(bitmap("k", "k2"), 2)
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        state.commit(2, [("1-20261122000100-00001.tsv", 1, 1, 0), FILE],   # FILE is done already
                     {"http://a.test": 5, "http://e.test": 1}, {"http://e.test"}, NOW)
    state.close()
    again = backend.open()
    assert again.generation == 1 and again.files_done() == {FILE[0]}
    assert again.dirty_sites() == [("http://a.test", 1, False)]


def test_a_missing_or_foreign_bitmap_is_a_clear_error(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, ("k",), [FILE], {}, set())
    state.close()
    backend.plant(1, None)
    missing = backend.open()
    with pytest.raises(RuntimeError, match=r"bitmap-1\.bloom is missing: the ledger says generation 1"):
        missing.load_bitmap()
    missing.close()
    backend.plant(1, b"not a bitmap at all, and long enough for a header")
    with pytest.raises(RuntimeError, match=r"bitmap-1\.bloom: not a bitmap this batch wrote"):
        backend.open().load_bitmap()


# -- the spool as the batch reads it ---------------------------------------------------------

SPOOL = {  # name -> content; the names sort by time, then process
    "1-20261122000000-00001.tsv": b"http://a.test/\thttp://x.test\t20261122000000\n",
    "0-20261122000000-00002.tsv": b"http://b.test/\thttp://x.test\t20261122000000\n",
    "0-20261121235959-00001.tsv": b"http://c.test/\r\nnot\xffutf-8\n",
    "2-20261122000001-00001.tsv": b"",
}
ORDER = ["0-20261121235959-00001.tsv", "0-20261122000000-00002.tsv", "1-20261122000000-00001.tsv",
         "2-20261122000001-00001.tsv"]


@pytest.fixture(params=["folder", "s3"])
def spool(request: pytest.FixtureRequest, tmp_path: Path) -> SpoolFiles:
    """The spool files of SPOOL as a crawler leaves them: beside an ``.open`` one still written
    (which a crawler never ships) and a file that is no spool file."""
    local = tmp_path / "outlinks"
    local.mkdir()
    for name, data in SPOOL.items():
        (local / name).write_bytes(data)
    (local / "notes.txt").write_text("not a spool file")
    if request.param == "folder":
        (local / "3-20261122000000-00001.tsv.open").write_text("still written\n")
        return SpoolDirectory(local)
    bucket = request.getfixturevalue("s3_bucket")
    objects = S3Store(bucket.client, bucket.name, "archive")
    shipped = ship_closed(local, objects, pattern="*.tsv", under=OBJECT_PREFIX)
    assert len(shipped) == len(SPOOL)
    bucket.client.put_object(Bucket=bucket.name, Key="archive/outlinks/notes.txt", Body=b"x")
    bucket.client.put_object(Bucket=bucket.name, Key="archive/outlinks/done/0-20261120000000-00001.tsv",
                             Body=b"x")
    return ObjectSpool(objects)


def test_the_spool_lists_closed_files_oldest_first_reads_them_forgets_done_ones(spool: SpoolFiles) -> None:
    assert spool.closed() == ORDER
    for name, data in SPOOL.items():
        assert spool.read(name) == data
        assert spool.location(name).endswith("outlinks/" + name)
    spool.done(ORDER[0])
    spool.done(ORDER[2])
    assert spool.closed() == [ORDER[1], ORDER[3]]
