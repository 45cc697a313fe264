"""The external-link batch: spool lines, global bitmap, ledger, in-link counts."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from contextlib import closing
from functools import partial

import pytest

from archiver.crawl.crawler import enqueue_seeds
from archiver.links import batch
from archiver.links.batch import LinkBatch, run_batch
from archiver.queues.embedded.inboxes import INBOXES
from archiver.queues.embedded.linksstate import EmbeddedLinksState
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.sites import owner_hash, process_for
from archiver.queues.spool import parse_line
from archiver.stores import open_stores
from tests.support.linkbatch import links_config, site_changes, snapshot, synthetic_spool, write_spool

# -- pure parts -------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "result"), [
    ("http://a.test/x\thttp://b.test\t20261122000000\n", ("http://a.test/x", "http://b.test", 0, 0.0)),
    ("http://a.test/x\thttp://b.test\t20261122000000\t7\t1e-05\n",
     ("http://a.test/x", "http://b.test", 7, 1e-05)),
    ("http://a.test/x\thttp://b.test\n", "expected 3 or 5 tab-separated fields, found 2"),
    ("http://a.test/x\thttp://b.test\t20261122000000\t1\n", "expected 3 or 5 tab-separated fields, found 4"),
    ("http://a.test/x\thttp://b.test\t20261122000000\t1\t1e999", "priority '1e999' is not a finite number"),
    ("http://a.test/x\tb.test\t20261122000000", "linking site 'b.test' is not an origin"),
    ("http://a.test/x\thttp://b.test/p\t20261122000000", "linking site 'http://b.test/p' is not an origin"),
    ("http://a.test/x\thttp://b.test\t2026-11-22", "time '2026-11-22' is not 14 digits"),
])
def test_parse_spool_line(line, result):
    assert parse_line(line) == result


# -- the batch ------------------------------------------------------------------------------

def test_batch_queues_new_urls_counts_distinct_linking_sites_and_keeps_a_ledger(tmp_path):
    cfg = links_config(tmp_path)
    root = cfg.root
    write_spool(root, "0-20261122000000-00001.tsv", [
        "http://A.test/one\thttp://x.test\t20261122000000",
        "http://a.test/one\thttp://y.test\t20261122000000",      # same URL once normalised
        "http://a.test/two\thttp://x.test\t20261122000000",      # x -> a again: one in-link
        "http://b.test:80/\thttp://x.test\t20261122000000",
        "http://a.test/self\thttp://a.test\t20261122000000",     # a site's link to itself
    ])
    write_spool(root, "1-20261122000001-00001.tsv.open", ["http://c.test/\thttp://x.test\t20261122000000"])
    totals = run_batch(cfg, once=True)
    assert (totals.files, totals.lines, totals.new_urls, totals.new_sites) == (1, 5, 4, 2)
    sites, queues = snapshot(root, 2)
    assert {o: s[1:] for o, s in sites.items()} == {
        "http://a.test": ("waiting", 2), "http://b.test": ("waiting", 1)}
    for origin, (owner, *_) in sites.items():
        assert owner == process_for(origin, 2)             # one queue only, the owner's
    assert queues["http://a.test"] == ["http://a.test/one", "http://a.test/two", "http://a.test/self"]
    assert queues["http://b.test"] == ["http://b.test/"]
    assert not (root / "spool" / "0-20261122000000-00001.tsv").exists()
    assert (root / "spool" / "done" / "0-20261122000000-00001.tsv").exists()
    assert (root / "spool" / "1-20261122000001-00001.tsv.open").exists()   # never read open files
    # The same file again (an operator copying it back): the ledger makes it a no-op.
    shutil.copy(root / "spool" / "done" / "0-20261122000000-00001.tsv", root / "spool")
    assert run_batch(cfg, once=True).files == 0
    # New links: a site done gets woken, in-links grow, and nothing known is queued again.
    with SiteQueue(queue_path(root, process_for("http://b.test", 2))) as q:
        q.finish("http://b.test")
    write_spool(root, "0-20261122000100-00002.tsv", [
        "http://b.test/new\thttp://z.test\t20261122000100",
        "http://a.test/one\thttp://z.test\t20261122000100",
    ])
    totals = run_batch(cfg, once=True)
    assert (totals.new_urls, totals.new_sites) == (1, 0)
    sites, queues = snapshot(root, 2)
    assert sites["http://b.test"][1:] == ("waiting", 2) and sites["http://a.test"][1:] == ("waiting", 3)
    assert queues["http://b.test"] == ["http://b.test/", "http://b.test/new"]
    # Each of the 4 slices (links.slices) at the second checkpoint's generation, nothing else.
    assert sorted(p.name for p in (root / "links").glob("*.bloom")) == [
        f"slice-{p}of4-2.bloom" for p in range(4)]


def test_seeds_go_to_their_owners_queue_and_a_busy_site_gets_them_in_its_inbox(tmp_path):
    cfg = links_config(tmp_path, processes=3)
    seeds = [f"http://s{n}.test/start" for n in range(30)]
    # s0 is being crawled right now
    with open_stores(cfg).crawl_queues().open("http://s0.test") as crawl_queue:
        crawl_queue.add("http://s0.test/", 0)
        enqueue_seeds(cfg, 1, seeds)
        enqueue_seeds(cfg, 2, seeds)                   # seeded twice: still one queue each
    sites, queues = snapshot(cfg.root, 3)
    assert set(sites) == {f"http://s{n}.test" for n in range(30)}
    for origin, (owner, state, _) in sites.items():
        assert owner == process_for(origin, 3) and state == "waiting"
        assert queues[origin] == [origin + "/", origin + "/start"]
    assert len({owner for owner, *_ in sites.values()}) == 3


def _pushes(caplog) -> list[dict]:
    return [r.fields for r in caplog.records if r.getMessage() == "links-pushed"]


def test_changed_sites_are_pushed_once_the_pending_files_are_drained(tmp_path, caplog, monkeypatch):
    deferred, each = links_config(tmp_path / "deferred"), links_config(tmp_path / "each")
    for cfg in (deferred, each):
        synthetic_spool(partial(write_spool, cfg.root), files=4)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="archiver.links.batch"):
        assert run_batch(deferred, once=True).checkpoints == 4
        pushed_once = _pushes(caplog)
        caplog.clear()
        monkeypatch.setattr(batch, "PUSH_INTERVAL", 0.0)  # every checkpoint's commit pushes
        run_batch(each, once=True)
        pushed_each = _pushes(caplog)
    sites, _ = snapshot(deferred.root, 2, marks=True)
    assert pushed_once == [{"sites": len(sites), "queues": 2}]    # the pass's one push, at its end
    assert len(pushed_each) == 4                                 # as before: each pushed every site
    assert snapshot(deferred.root, 2, marks=True) == snapshot(each.root, 2, marks=True)


def test_a_run_stopped_between_checkpoints_pushes_before_it_returns(tmp_path):
    cfg = links_config(tmp_path)
    synthetic_spool(partial(write_spool, cfg.root), files=4)
    with LinkBatch(cfg) as stopping:
        read = stopping.file_read

        def stop_after_one_file(lines: int) -> None:
            read(lines)
            stopping.stop_requested.set()  # as SIGTERM does

        stopping.file_read = stop_after_one_file  # type: ignore[method-assign]
        assert stopping.run(once=False).files == 1
        assert stopping.pending_files() and stopping.state.dirty_sites() == []
    sites, queues = snapshot(cfg.root, 2)
    assert sites and all(queues.values())


def test_a_checkpoint_whose_inboxes_cannot_be_written_records_nothing(tmp_path):
    """The state writes its sites while the inbox rows are written, and records the files done
    only once they are: an inbox database that cannot be opened rolls the whole commit back."""
    clean, failing = links_config(tmp_path / "clean"), links_config(tmp_path / "failing")
    for cfg in (clean, failing):
        synthetic_spool(partial(write_spool, cfg.root), files=2)
    run_batch(clean, once=True)
    inboxes = failing.root / "crawl-queues" / INBOXES
    inboxes.mkdir(parents=True)                   # a folder where the database would be
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        run_batch(failing, once=True)
    state = EmbeddedLinksState(failing.root / "links")
    assert (state.generation, state.files_done(), list(state.sites())) == (0, set(), [])
    state.close()
    inboxes.rmdir()
    run_batch(failing, once=True)
    assert snapshot(failing.root, 2, marks=True) == snapshot(clean.root, 2, marks=True)


def test_a_links_state_from_before_site_hashes_gets_them_and_pushes_each_site_to_its_owner(tmp_path):
    """The push finds each dirty site's owner by the hash the state keeps (``site_hash``): a
    state made before it gets them on open, and its sites go where ``process_for`` says."""
    cfg = links_config(tmp_path)
    links = cfg.root / "links"
    origins = [f"http://s{n}.test" for n in range(20)]
    EmbeddedLinksState(links).close()
    with closing(sqlite3.connect(links / "state.sqlite")) as db, db:
        db.execute("ALTER TABLE sites DROP COLUMN site_hash")
        db.executemany("INSERT INTO sites (origin, inlinks, dirty) VALUES (?, ?, 2)",
                       [(origin, n) for n, origin in enumerate(origins, 1)])
    EmbeddedLinksState(links).close()
    with closing(sqlite3.connect(links / "state.sqlite")) as db:
        assert dict(db.execute("SELECT origin, site_hash FROM sites")) == {
            origin: owner_hash(origin) for origin in origins}
    run_batch(cfg, once=True)                     # no spool file: the dirty sites are pushed
    sites, _ = snapshot(cfg.root, 2)
    assert {origin: (row[0], row[2]) for origin, row in sites.items()} == {
        origin: (process_for(origin, 2), n) for n, origin in enumerate(origins, 1)}
    assert {process_for(origin, 2) for origin in origins} == {0, 1}


def test_a_push_whose_merge_fails_keeps_every_site_marked_and_a_later_push_delivers_them(tmp_path):
    """The push marks the sites pushed beside the owners' merges and commits the marks only once
    every merge is in: one owner's queue failing leaves all the sites to push again, and the
    next push (the merge is idempotent) gives each queue the same rows as one clean push."""
    links = tmp_path / "links"
    origins = [f"http://s{n}.test" for n in range(12)]
    state = EmbeddedLinksState(links)
    state.commit(1, [("0-20261122000000-00001.tsv", 12, 12, 0)],
                 site_changes({origin: n for n, origin in enumerate(origins, 1)}, set(origins)),
                 0.0, [1])
    good, broken = SiteQueue(queue_path(tmp_path, 0)), SiteQueue(queue_path(tmp_path, 1))
    broken.close()                                   # its merge raises
    with pytest.raises(sqlite3.ProgrammingError):
        state.push([good, broken].__getitem__, 2)
    good.close()
    assert sorted(site.origin for site in state.dirty_sites()) == sorted(origins)
    queues = {owner: SiteQueue(queue_path(tmp_path, owner)) for owner in range(2)}
    try:
        assert state.push(queues.__getitem__, 2) == (12, 2)
        assert state.dirty_sites() == []
        assert {row.origin: (owner, row.inlinks) for owner, queue in queues.items()
                for row in queue.rows()} == {
            origin: (process_for(origin, 2), n) for n, origin in enumerate(origins, 1)}
    finally:
        for queue in queues.values():
            queue.close()
        state.close()
