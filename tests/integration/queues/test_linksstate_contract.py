"""The links batch's state (``queues.interfaces.LinksState``) and its spool (``SpoolFiles``), run
against both backends: files under the archive root, and PostgreSQL with the object store (a real
server each). Only the interfaces are used, so both must answer alike."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from archiver.queues.bloom import BloomBitmap
from archiver.queues.embedded.linksstate import EmbeddedLinksState
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.interfaces import LinksState, SiteQueueStore, SpoolFiles
from archiver.queues.postgres.linksstate import PgLinksState
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.queues.sites import process_for
from archiver.queues.spool import OBJECT_PREFIX, ObjectSpool, SpoolDirectory, spool_order
from archiver.store.s3.objectstore import S3Store
from archiver.store.shipping import ship_closed
from tests.support.linkbatch import site_changes

NOW = 1_790_000_000.0
FILE = ("0-20261122000000-00001.tsv", 10, 4, 1)


@dataclass
class Backend:
    """Opens the state of one archive; ``legacy`` lists the generations whose bitmap from before
    slices it holds, ``plant`` writes raw bytes as one (None: removes it) the way an operator or a
    crash would, and ``age`` makes the state one from before slices, at a generation.
    ``site_queue`` opens the site queue of a crawler process (of ``processes``) that pushes feed."""

    open: Callable[[], LinksState]
    legacy: Callable[[], set[int]]
    plant: Callable[[int, bytes | None], None]
    age: Callable[[int], None]
    site_queue: Callable[[int], SiteQueueStore]
    processes: int


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
            opened.append(PgLinksState(url, objects))
            return opened[-1]

        def legacy() -> set[int]:
            return {_generation(key) for key in objects.list("links/bitmap-")}

        def plant(generation: int, data: bytes | None) -> None:
            key = f"archive/links/bitmap-{generation}.bloom"
            if data is None:
                bucket.client.delete_object(Bucket=bucket.name, Key=key)
            else:
                bucket.client.put_object(Bucket=bucket.name, Key=key, Body=data)

        def age(generation: int) -> None:
            with psycopg.connect(url, autocommit=True) as db:
                db.execute("UPDATE links_meta SET generation = %s", (generation,))
                db.execute("DELETE FROM links_slices")

        def site_queue(process: int) -> SiteQueueStore:
            return PgSiteQueue(url, process=process)

        processes = 1                                   # the one shared site queue
    else:
        folder = tmp_path / "links"

        def make() -> LinksState:
            opened.append(EmbeddedLinksState(folder))
            return opened[-1]

        def legacy() -> set[int]:
            return {_generation(p.name) for p in folder.glob("bitmap-*")}

        def plant(generation: int, data: bytes | None) -> None:
            path = folder / f"bitmap-{generation}.bloom"
            if data is None:
                path.unlink()
            else:
                path.write_bytes(data)

        def age(generation: int) -> None:
            make().close()                              # the schema, as an older archiver made it
            db = sqlite3.connect(folder / "state.sqlite")
            with db:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?)",
                           (generation,))
                db.execute("DROP TABLE slices")
            db.close()

        def site_queue(process: int) -> SiteQueueStore:
            return SiteQueue(queue_path(tmp_path, process))

        processes = 2

    yield Backend(make, legacy, plant, age, site_queue, processes)
    for state in opened:
        state.close()


def bitmap(*keys: str) -> BloomBitmap:
    b = BloomBitmap(8192, 5)
    for key in keys:
        b.add(key)
    return b


def checkpoint(state: LinksState, files: list[tuple[str, int, int, int]], inlinks: dict[str, int],
               woken: set[str], slices: list[int] | None = None) -> int:
    generation = state.generation + 1
    return state.commit(generation, files, site_changes(inlinks, woken), NOW,
                        [generation] * 4 if slices is None else slices)


def push(backend: Backend, state: LinksState) -> tuple[int, int]:
    """The state's dirty sites pushed into the backend's site queues."""
    queues = {p: backend.site_queue(p) for p in range(backend.processes)}
    try:
        return state.push(queues.__getitem__, backend.processes)
    finally:
        for queue in queues.values():
            queue.close()


def test_a_new_state_is_empty(backend: Backend) -> None:
    state = backend.open()
    assert state.generation == 0
    assert state.slice_generations() == [] and state.legacy_bitmap() is None
    assert state.files_done() == set() and state.dirty_sites() == [] and state.ledger_files() == []


def test_a_checkpoint_commits_ledger_counts_and_slice_generations_together(backend: Backend) -> None:
    state = backend.open()
    added = checkpoint(state, [FILE], {"http://a.test": 2, "http://b.test": 1},
                       {"http://a.test", "http://c.test"}, slices=[1, 1, 7])
    assert added == 3
    assert state.generation == 1 and state.slice_generations() == [1, 1, 7]
    assert state.files_done() == {FILE[0]} and state.ledger_files() == [(1, FILE[0])]
    assert sorted(state.dirty_sites()) == [
        ("http://a.test", 2, True, 0, 0.0), ("http://b.test", 1, False, 0, 0.0),
        ("http://c.test", 0, True, 0, 0.0)]
    state.close()
    again = backend.open()                                 # what a later run finds
    assert again.generation == 1 and again.files_done() == {FILE[0]}
    assert again.slice_generations() == [1, 1, 7] and again.legacy_bitmap() is None


def test_counts_add_up_and_a_woken_site_stays_woken_until_pushed(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, [FILE], {"http://a.test": 2}, {"http://a.test"})
    added = checkpoint(state, [("1-20261122000100-00001.tsv", 5, 0, 0)],
                       {"http://a.test": 3, "http://d.test": 1}, set())
    assert added == 1                                      # only d is new
    assert sorted(state.dirty_sites()) == [("http://a.test", 5, True, 0, 0.0),
                                           ("http://d.test", 1, False, 0, 0.0)]
    assert state.slice_generations() == [2, 2, 2, 2]
    push(backend, state)
    assert state.dirty_sites() == []
    checkpoint(state, [("0-20261122000200-00002.tsv", 1, 1, 0)], {"http://d.test": 1}, {"http://a.test"})
    assert sorted(state.dirty_sites()) == [("http://a.test", 5, True, 0, 0.0),
                                           ("http://d.test", 2, False, 0, 0.0)]
    assert sorted(state.ledger_files()) == [(1, FILE[0]), (2, "1-20261122000100-00001.tsv"),
                                            (3, "0-20261122000200-00002.tsv")]


def test_a_commit_that_fails_changes_nothing(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, [FILE], {"http://a.test": 1}, set())
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        state.commit(2, [("1-20261122000100-00001.tsv", 1, 1, 0), FILE],   # FILE is done already
                     site_changes({"http://a.test": 5, "http://e.test": 1}, {"http://e.test"}),
                     NOW, [2, 2])
    state.close()
    again = backend.open()
    assert again.generation == 1 and again.files_done() == {FILE[0]}
    assert again.dirty_sites() == [("http://a.test", 1, False, 0, 0.0)]
    assert again.slice_generations() == [1, 1, 1, 1]


def test_a_reshard_swaps_the_slices_alone(backend: Backend) -> None:
    state = backend.open()
    checkpoint(state, [FILE], {"http://a.test": 1}, set())
    state.reshard([5] * 8)
    state.close()
    again = backend.open()
    assert (again.generation, again.slice_generations()) == (1, [5] * 8)
    assert again.files_done() == {FILE[0]} and again.dirty_sites() == [("http://a.test", 1, False, 0, 0.0)]


def test_a_state_from_before_slices_has_its_one_bitmap_until_a_checkpoint_records_slices(
        backend: Backend) -> None:
    backend.age(3)
    backend.plant(3, _bytes(bitmap("old")))
    backend.plant(2, _bytes(bitmap()))                     # superseded, its removal cut short
    state = backend.open()
    assert state.generation == 3 and state.slice_generations() == []
    loaded = state.legacy_bitmap()
    assert loaded is not None and "old" in loaded and loaded.count == 1
    assert backend.legacy() == {3}
    assert state.legacy_name().endswith("links/bitmap-3.bloom")
    checkpoint(state, [FILE], {}, set(), slices=[4])
    assert backend.legacy() == set()                       # the slices replace it
    assert state.legacy_bitmap() is None and state.slice_generations() == [4]


def test_a_missing_or_foreign_bitmap_from_before_slices_is_a_clear_error(backend: Backend) -> None:
    backend.age(1)
    missing = backend.open()
    with pytest.raises(RuntimeError, match=r"bitmap-1\.bloom is missing: the ledger says generation 1"):
        missing.legacy_bitmap()
    missing.close()
    backend.plant(1, b"not a bitmap at all, and long enough for a header")
    with pytest.raises(RuntimeError, match=r"bitmap-1\.bloom: not a bitmap this batch wrote"):
        backend.open().legacy_bitmap()


def _bytes(layer: BloomBitmap) -> bytes:
    buffer = io.BytesIO()
    layer.write(buffer)
    return buffer.getvalue()


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
    local = tmp_path / "spool"
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


def test_the_spool_lists_closed_files_oldest_first_reads_them_and_keeps_done_ones_apart(
        spool: SpoolFiles) -> None:
    assert spool.closed() == ORDER
    # The folder is spool/ (archiver.store.layout); the bucket's keys keep the prefix outlinks/.
    folder = "outlinks/" if isinstance(spool, ObjectSpool) else "spool/"
    for name, data in SPOOL.items():
        assert spool.read(name) == data
        assert spool.location(name).endswith(folder + name)
    history = spool.history()
    before = history.closed()
    spool.done(ORDER[2])
    spool.done(ORDER[0])
    assert spool.closed() == [ORDER[1], ORDER[3]]
    assert history.closed() == sorted([*before, ORDER[0], ORDER[2]], key=spool_order)
    assert history.read(ORDER[0]) == SPOOL[ORDER[0]]
    assert history.location(ORDER[0]).endswith(folder + "done/" + ORDER[0])


def test_sites_keep_their_lowest_hops_and_highest_priority_and_go_out_again_when_they_change(
        backend: Backend) -> None:
    state = backend.open()
    state.commit(1, [FILE], site_changes({"http://a.test": 1}, {"http://a.test"},
                                         {"http://a.test": (3, 0.5), "http://b.test": (1, 2.0)}),
                 NOW, [1])
    # b had no new link nor URL: only a site known already is updated by its marks.
    assert state.dirty_sites() == [("http://a.test", 1, True, 3, 0.5)]
    push(backend, state)
    # farther, lower: nothing to push
    state.commit(2, [("1-20261122000100-00001.tsv", 2, 0, 0)],
                 site_changes({}, set(), {"http://a.test": (4, 0.25)}), NOW, [2])
    assert state.dirty_sites() == []
    # nearer: pushed again
    state.commit(3, [("1-20261122000200-00001.tsv", 2, 0, 0)],
                 site_changes({}, set(), {"http://a.test": (2, 0.0)}), NOW, [3])
    assert state.dirty_sites() == [("http://a.test", 1, False, 2, 0.5)]
    push(backend, state)
    # a higher priority too
    state.commit(4, [("1-20261122000300-00001.tsv", 2, 0, 0)],
                 site_changes({"http://a.test": 1}, set(), {"http://a.test": (9, 1.5)}), NOW, [4])
    state.close()
    again = backend.open()
    assert again.dirty_sites() == [("http://a.test", 2, False, 2, 1.5)]


def test_a_push_hands_each_dirty_site_to_its_owners_queue_once(backend: Backend) -> None:
    state = backend.open()
    a, b = "http://a.test", "http://b.test"
    state.commit(1, [FILE], site_changes({a: 2, b: 1}, {a}, {a: (3, 0.5), b: (1, 0.0)}), NOW,
                 [1] * 4)
    queues = {p: backend.site_queue(p) for p in range(backend.processes)}
    try:
        assert state.push(queues.__getitem__, backend.processes) == (
            2, len({process_for(a, backend.processes), process_for(b, backend.processes)}))
        assert state.dirty_sites() == [] and state.push(queues.__getitem__, backend.processes) == (0, 0)

        def row(origin: str):
            queue = queues[process_for(origin, backend.processes)]
            return next(r for r in queue.rows() if r.origin == origin)

        assert (row(a).inlinks, row(a).hops, row(a).priority, row(a).state) == (2, 3, 0.5, "waiting")
        assert (row(b).inlinks, row(b).hops) == (1, 1)
        # a is crawled to the end; new URLs for it (woken) and one more in-link wake it again.
        owner = queues[process_for(a, backend.processes)]
        while (claimed := owner.claim(include_deferred=False)) not in (a, None):
            owner.release(claimed)
        assert claimed == a
        owner.finish(a)
        assert row(a).state == "done"
        state.commit(2, [("1-20261122000100-00001.tsv", 1, 1, 0)],
                     site_changes({a: 1}, {a}, {a: (2, 0.25), b: (0, 0.75)}), NOW, [2] * 4)
        assert state.push(queues.__getitem__, backend.processes)[0] == 2
        assert (row(a).inlinks, row(a).hops, row(a).priority, row(a).state) == (3, 2, 0.5, "waiting")
        assert (row(b).inlinks, row(b).hops, row(b).priority) == (1, 0, 0.75)
    finally:
        for queue in queues.values():
            queue.close()
