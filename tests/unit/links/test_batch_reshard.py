"""The batch over its slices: a state from before slices, another slice count in the config, a
reshard (rebuilt from the spool files done), one stopped halfway or missing files, progress."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from functools import partial

import pytest

from archiver.links.batch import LinkBatch, ReshardError, run_batch
from archiver.queues.bloom import HEADER_SIZE, BloomBitmap, optimal_hashes
from archiver.queues.embedded.linksstate import EmbeddedLinksState
from tests.support.linkbatch import links_config, snapshot, synthetic_spool, with_slices, write_spool

STAMP = "20261122000000"


def slice_files(cfg) -> list[str]:
    return sorted(p.name for p in (cfg.root / "links").glob("*.bloom"))


def test_a_reshard_gives_the_slices_a_fresh_run_with_that_count_would_have(tmp_path):
    resharded, fresh = links_config(tmp_path / "a", slices=2), links_config(tmp_path / "b", slices=3)
    synthetic_spool(partial(write_spool, resharded.root), files=8)
    assert run_batch(resharded, once=True).checkpoints == 8
    with LinkBatch(resharded) as batch:
        totals = batch.reshard(3)
    assert (totals.files, totals.lines) == (8, 8 * 1500)
    # Read in 8 groups as the run did, saved once after them, above generation 8: no name reused.
    assert slice_files(resharded) == [f"slice-{p}of3-17.bloom" for p in range(3)]
    # The config still says 2: a warning, and the state's 3 rule.
    resharded = with_slices(resharded, 3)
    synthetic_spool(partial(write_spool, resharded.root), first=8)
    synthetic_spool(partial(write_spool, fresh.root))
    run_batch(resharded, once=True)
    run_batch(fresh, once=True)
    assert snapshot(resharded.root, 2) == snapshot(fresh.root, 2)
    for ours, theirs in zip(slice_files(resharded), slice_files(fresh), strict=True):  # bit for bit
        assert ours.split("-")[:2] == theirs.split("-")[:2]      # slice p of 3 beside slice p of 3
        # (the counts in the headers may differ: a key found by a false positive is not counted)
        assert (resharded.root / "links" / ours).read_bytes()[HEADER_SIZE:] == \
            (fresh.root / "links" / theirs).read_bytes()[HEADER_SIZE:]


def test_the_state_rules_the_slice_count_and_the_config_gets_a_warning(tmp_path, caplog):
    cfg = links_config(tmp_path, slices=2)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", [f"http://a.test/\thttp://x.test\t{STAMP}"])
    run_batch(cfg, once=True)
    cfg = with_slices(cfg, 5)
    write_spool(cfg.root, "0-20261122000100-00002.tsv", [f"http://b.test/\thttp://x.test\t{STAMP}",
                                                         f"http://a.test/\thttp://y.test\t{STAMP}"])
    caplog.clear()  # the first run's lines too, if an earlier test left INFO on
    with caplog.at_level(logging.INFO, logger="archiver.links.batch"):
        assert run_batch(cfg, once=True).new_urls == 1
    warned = [r for r in caplog.records if r.getMessage() == "links-slices"]
    assert len(warned) == 1 and "archiver links reshard --slices 5" in warned[0].fields["note"]
    assert slice_files(cfg) == ["slice-0of2-2.bloom", "slice-1of2-2.bloom"]
    fp = [r.fields for r in caplog.records if r.getMessage() == "slice"]
    assert [f["slice"] for f in fp] == ["0/2", "1/2"] and all("fp_at_design_load" in f for f in fp)


def test_a_state_from_before_slices_goes_on_as_one_slice(tmp_path):
    cfg = links_config(tmp_path)
    links = cfg.root / "links"
    # What the batch left before slices: one bitmap, generation 1, a file done, a site pushed.
    EmbeddedLinksState(links).close()
    db = sqlite3.connect(links / "state.sqlite")
    with db:
        db.execute("DROP TABLE slices")
        db.execute("INSERT INTO meta (key, value) VALUES ('generation', 1)")
        db.execute("INSERT INTO ledger VALUES ('0-20261121000000-00001.tsv', 1, 2, 2, 0, 0)")
        db.execute("INSERT INTO sites (origin, inlinks, dirty) VALUES ('http://a.test', 1, 0)")
    db.close()
    old = BloomBitmap(200_000 * 16, optimal_hashes(16))
    old.add_many(["http://a.test/old", "http://a.test/x"])
    old.add_many(["\x00http://x.test\x00http://a.test"])
    with (links / "bitmap-1.bloom").open("wb") as f:
        old.write(f)
    write_spool(cfg.root, "0-20261122000000-00002.tsv", [
        f"http://a.test/old\thttp://y.test\t{STAMP}",        # known
        f"http://a.test/new\thttp://x.test\t{STAMP}",        # x -> a: counted before
        f"http://b.test/\thttp://x.test\t{STAMP}",
    ])
    totals = run_batch(cfg, once=True)
    assert (totals.new_urls, totals.new_pairs, totals.new_sites) == (2, 2, 1)
    assert slice_files(cfg) == ["slice-0of1-2.bloom"]      # the one bitmap, now slice 0 of 1
    sites, queues = snapshot(cfg.root, 2)
    assert {o: s[2] for o, s in sites.items()} == {"http://a.test": 2, "http://b.test": 1}
    assert queues["http://a.test"] == ["http://a.test/new"]


def test_a_reshard_stopped_halfway_leaves_the_old_slices_in_force(tmp_path):
    cfg = links_config(tmp_path, slices=2)
    synthetic_spool(partial(write_spool, cfg.root), files=4)
    run_batch(cfg, once=True)
    before = {name: (cfg.root / "links" / name).read_bytes() for name in slice_files(cfg)}
    with LinkBatch(cfg) as batch:
        read = batch.file_read

        def stop_after_a_file(lines: int) -> None:
            read(lines)
            batch.stop_requested.set()                     # SIGTERM while the first group is read

        batch.file_read = stop_after_a_file  # type: ignore[method-assign]
        with pytest.raises(ReshardError, match="stopped: the old slices stay in force"):
            batch.reshard(3)
    # Nothing saved before the last group: the old slices, untouched, are the only ones.
    assert {name: (cfg.root / "links" / name).read_bytes() for name in slice_files(cfg)} == before
    with LinkBatch(cfg) as batch:
        assert batch.slices.count == 2 and batch.generations == [4, 4]


def test_a_reshard_without_the_files_done_is_refused_unless_allowed(tmp_path):
    cfg = links_config(tmp_path)
    synthetic_spool(partial(write_spool, cfg.root), files=3)
    run_batch(cfg, once=True)
    done = cfg.root / "spool" / "done"
    shutil.move(done / "1-20261122000001-00001.tsv", tmp_path)
    with LinkBatch(cfg) as batch, pytest.raises(ReshardError, match=(
            r"1 of the 3 spool files the ledger lists are no longer in .*spool/done .*"
            r"--allow-missing.*inboxes again.*count again as in-links")):
        batch.reshard(2)
    assert slice_files(cfg) == [f"slice-{p}of4-3.bloom" for p in range(4)]
    with LinkBatch(cfg) as batch:
        assert batch.reshard(2, allow_missing=True).files == 2
    assert slice_files(cfg) == [f"slice-{p}of2-6.bloom" for p in range(2)]   # 3, 2 groups, saved


def test_a_reshard_of_a_state_without_files_makes_empty_slices(tmp_path):
    cfg = links_config(tmp_path)
    with LinkBatch(cfg) as batch:
        assert batch.reshard(3).files == 0
    assert slice_files(cfg) == [f"slice-{p}of3-1.bloom" for p in range(3)]
    cfg = with_slices(cfg, 3)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", [f"http://a.test/\thttp://x.test\t{STAMP}"])
    assert run_batch(cfg, once=True).new_urls == 1


def test_progress_says_files_urls_and_partitions_done(tmp_path, caplog):
    cfg = links_config(tmp_path, checkpoint=100_000)
    synthetic_spool(partial(write_spool, cfg.root), files=3, per_file=10)
    with caplog.at_level(logging.INFO, logger="archiver.links.batch"), \
            LinkBatch(cfg, progress_interval=0) as batch:
        batch.run(once=True)
    progress = [r.fields for r in caplog.records if r.getMessage() == "links-progress"]
    assert progress[2]["checkpoint"] == "3 files, 30 URLs read, 0/4 slices done"
    assert progress[-1]["checkpoint"] == "3 files, 30 URLs read, 4/4 slices done"
    assert "URLs/s" in progress[-1]["summary"]
