"""Crash recovery: complete records past the commit point are done in their sites' crawl queues."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.config import Config, from_dict
from archiver.crawl.recovery import CommitPoint, commit_path, plan_advance, read_commit_point
from archiver.queues.embedded.crawlqueue import LOG, queue_dir
from archiver.queues.models import Entry, LinkedSite
from archiver.store.bundles import BundleWriter
from archiver.stores import open_stores
from tests.support.fuzzing import examples
from tests.support.recoveryscene import SITE, config_for, page, queue, run, state


def spooled(config: Config) -> list[tuple[str, str]]:
    lines = []
    for path in sorted((config.root / "spool").glob("*.tsv")):
        lines += [tuple(line.split("\t")[:2]) for line in path.read_text().splitlines()]
    return lines


def test_records_past_the_cursor_are_done_and_their_links_queued_again(tmp_path):
    config = config_for(tmp_path, max_depth=1, max_url_length=40)
    entries = queue(config, SITE, [(f"{SITE}/", 0), (f"{SITE}/1", 1), (f"{SITE}/2", 1),
                                   (f"{SITE}/3", 1), (f"{SITE}/4", 1)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    page(writer, f"{SITE}/", b'<a href="/5">5</a> <a href="/1">1</a> <a href="http://b.test/x">b</a>'
                             b' <a href="/' + b"long" * 20 + b'">too long</a>')
    page(writer, f"{SITE}/1", b'<a href="/deep">past max_depth</a>')
    page(writer, f"{SITE}/3", b"", status=404)          # /2 has no record: it failed, say
    page(writer, f"{SITE}/robots.txt", b"", headers="Content-Type: text/plain\r\n")
    assert writer.current_path is not None and writer.current_path.name.endswith(".open")

    result, indexed = run(config)                      # the writer's process was killed

    assert indexed == [f"{SITE}/", f"{SITE}/1", f"{SITE}/3", f"{SITE}/robots.txt"]
    cursor, pages, bytes_, handed = state(config, SITE)
    # The cursor passes "/" and "/1"; "/3" is done beyond the gap "/2"; "/4" was in flight.
    assert cursor == entries[f"{SITE}/1"].end
    assert handed == [f"{SITE}/2", f"{SITE}/4", f"{SITE}/5"]
    assert pages == 3 and bytes_ > 100
    assert spooled(config) == [("http://b.test/x", SITE)]
    assert (result.bundles_repaired, result.marked_done, result.links_queued) == (1, 3, 1)
    assert not (config.root / "warcs" / writer.current_path.name).exists()   # closed


def test_a_second_run_finds_the_same_state(tmp_path):
    """A kill during recovery: the next start does it again (the commit point has not moved)."""
    config = config_for(tmp_path)
    queue(config, SITE, [(f"{SITE}/{n}", 1) for n in range(4)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    for n in (0, 2):
        page(writer, f"{SITE}/{n}", f'<a href="/new{n}">x</a>'.encode())
    run(config)
    first = state(config, SITE)
    log = (queue_dir(config.root, SITE) / LOG).read_bytes()
    run(config)
    assert state(config, SITE) == first
    assert (queue_dir(config.root, SITE) / LOG).read_bytes() == log       # nothing queued twice
    assert first[3] == [f"{SITE}/1", f"{SITE}/3", f"{SITE}/new0", f"{SITE}/new2"]


def test_an_alias_origin_is_done_in_the_queue_of_the_site_visited(tmp_path):
    config = config_for(tmp_path)
    secure = "https://a.test"
    entries = queue(config, SITE, [(f"{SITE}/", 0), (f"{secure}/", 0), (f"{secure}/p", 1)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    page(writer, f"{SITE}/", status=301, headers=f"Location: {secure}/\r\n")
    # A group commit saved the cursor past "/" and recorded where the bundle stood.
    with open_stores(config).crawl_queues().open(SITE) as crawl_queue:
        crawl_queue.commit(crawl_queue.next(), pages=1, bytes_=10)
        crawl_queue.save(crawl_queue.mark())
    CommitPoint(commit_path(config.root / "state", 0), writer.position())
    page(writer, f"{secure}/", b'<a href="/q">q</a> <a href="http://a.test/r">other scheme</a>')
    page(writer, f"{secure}/p", b'<a href="http://a.test:8080/">another port</a>')

    _, indexed = run(config)

    assert indexed == [f"{secure}/", f"{secure}/p"]    # the redirect was indexed before
    cursor, pages, _, handed = state(config, SITE)
    assert cursor == entries[f"{secure}/p"].end and pages == 3
    # Links on the alias origin stay in the site's queue, as the visit routes them.
    assert handed == [f"{secure}/q", f"{SITE}/r"]
    assert spooled(config) == [("http://a.test:8080/", SITE)]
    assert not queue_dir(config.root, secure).exists()


def test_429_and_5xx_finish_nothing_but_a_copy_queued_again_stands_for_its_entry(tmp_path):
    config = config_for(tmp_path)
    entries = queue(config, SITE, [(f"{SITE}/{n}", 1) for n in range(1, 6)])
    with (queue_dir(config.root, SITE) / LOG).open("ab") as log:
        log.write(f"1\t{SITE}/1\n".encode())          # the visit queued /1 again after its 429
    writer = BundleWriter(config.root / "warcs", config.warc)
    page(writer, f"{SITE}/1", status=429, headers="Retry-After: 1\r\n")
    page(writer, f"{SITE}/2")
    page(writer, f"{SITE}/3", status=503)              # killed before /3 was queued again
    page(writer, f"{SITE}/4", status=500)              # kept for the next visit if it ended one
    page(writer, f"{SITE}/5", status=404)

    run(config)

    cursor, pages, _, handed = state(config, SITE)
    assert cursor == entries[f"{SITE}/2"].end and pages == 2
    assert handed == [f"{SITE}/3", f"{SITE}/4", f"{SITE}/1"]


def test_records_of_a_rotated_bundle_past_the_commit_point_are_read_and_no_earlier_ones(tmp_path):
    config = config_for(tmp_path)
    entries = queue(config, SITE, [(f"{SITE}/{n}", 1) for n in range(3)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    page(writer, f"{SITE}/0")
    with open_stores(config).crawl_queues().open(SITE) as crawl_queue:
        crawl_queue.commit(crawl_queue.next(), pages=1, bytes_=10)
        crawl_queue.save(crawl_queue.mark())
    CommitPoint(commit_path(config.root / "state", 0), writer.position())
    writer.max_size = writer.position()[1] + 1         # "/1" fills the bundle: "/2" rotates
    page(writer, f"{SITE}/1", b"x" * 1000)
    page(writer, f"{SITE}/2")
    assert len(list((config.root / "warcs").glob("*.open"))) == 2   # the full one is handed over
    writer.sync()                                      # a group commit finishes it
    closed = sorted((config.root / "warcs").glob("*.warc.gz"))
    assert len(closed) == 1 and writer.current_path is not None

    _, indexed = run(config)

    assert indexed == [f"{SITE}/1", f"{SITE}/2"]       # "/0" was indexed by its group commit
    cursor, pages, _, handed = state(config, SITE)
    assert cursor == entries[f"{SITE}/2"].end and pages == 3 and handed == []


def test_records_older_than_a_recrawl_restart_belong_to_the_visit_before(tmp_path):
    config = config_for(tmp_path)
    queue(config, SITE, [(f"{SITE}/1", 1), (f"{SITE}/2", 1)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    page(writer, f"{SITE}/1", date=datetime.fromtimestamp(time.time() - 60, UTC))
    page(writer, f"{SITE}/2", date=datetime.fromtimestamp(time.time() - 60, UTC))
    with open_stores(config).crawl_queues().open(SITE) as crawl_queue:
        while (entry := crawl_queue.next()) is not None:
            crawl_queue.commit(entry, pages=2, bytes_=20)
        crawl_queue.save(crawl_queue.mark())
        crawl_queue.restart()                             # a recrawl starts over
    page(writer, f"{SITE}/2")                          # the recrawl fetched /2 (say /1 failed)

    run(config)

    cursor, pages, _, handed = state(config, SITE)
    assert cursor == 0 and pages == 1 and handed == [f"{SITE}/1"]


def test_the_commit_point_trails_one_group_commit_and_a_clean_stop_moves_it_to_the_end(tmp_path):
    path = commit_path(tmp_path, 2)
    assert read_commit_point(path) is None
    point = CommitPoint(path, (3, 0))
    assert read_commit_point(path) == (3, 0)
    point.advance((3, 500))
    assert read_commit_point(path) == (3, 0)           # the group commit before: (3, 0)
    point.advance((4, 100))
    assert read_commit_point(path) == (3, 500)
    point.finish((5, 0))
    assert read_commit_point(path) == (5, 0)
    with path.open("r+b") as f:                        # a torn write of the newest slot
        f.seek(512)                                    # (the third write: slots alternate)
        f.write(b"\xff" * 8)
    assert read_commit_point(path) == (3, 500)


# The plan alone: each entry is "done" (a record finished it), "known" (in the done-set),
# "retried" (answered 429/503), or "gap" (no record: failed, excluded, in flight).
KINDS = ("done", "known", "retried", "gap")


def entries_of(kinds: list[tuple[str, int]]) -> tuple[list[tuple[Entry, bool]], set, set]:
    """Entries whose URLs are /<n> by the given (kind, url number); ends 10, 20, 30..."""
    entries = [(Entry(f"/{n}", 1, 10 * (i + 1)), kind == "known") for i, (kind, n) in
               enumerate(kinds)]
    done = {f"/{n}" for kind, n in kinds if kind == "done"}
    retried = {f"/{n}" for kind, n in kinds if kind == "retried"} - done
    return entries, done, retried


def test_plan_moves_the_cursor_over_the_leading_run_and_keeps_later_done_entries():
    entries, done, retried = entries_of([("done", 0), ("known", 1), ("done", 2), ("gap", 3),
                                         ("done", 4), ("retried", 5), ("gap", 6), ("retried", 5)])
    plan = plan_advance(entries, done, retried)
    assert plan.cursor == 30
    assert plan.done == [50, 60]                       # /4, and /5 whose copy comes later
    assert plan.depths == {"/0": 1, "/2": 1, "/4": 1}  # "/1" was done (and counted) before


def test_plan_with_nothing_done_leaves_the_queue_alone():
    entries, done, retried = entries_of([("gap", 0), ("retried", 1), ("gap", 2)])
    assert plan_advance(entries, done, retried).cursor is None
    assert plan_advance(entries, done, retried).done == []


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 12)), max_size=30))
def test_plan_passes_only_entries_that_are_done_and_every_one_of_them(kinds):
    entries, done, retried = entries_of(kinds)
    plan = plan_advance(entries, done, retried)
    last_copy = {entry.url: entry.end for entry, _ in entries}
    cursor = plan.cursor or 0

    def finished(entry: Entry, known: bool) -> bool:
        return entry.url in done or known or (entry.url in retried
                                              and last_copy[entry.url] != entry.end)

    for entry, known in entries:
        passed = entry.end <= cursor or entry.end in plan.done
        assert passed == finished(entry, known), (entry, plan)
    assert all(end > cursor for end in plan.done)
    # The cursor stops just before the first entry that is not finished.
    first_open = next((e.end for e, known in entries if not finished(e, known)), None)
    assert first_open is None or cursor < first_open
    assert first_open is not None or cursor == (entries[-1][0].end if entries else 0)


def test_links_spooled_again_carry_their_sites_hops_and_none_leave_a_site_at_max_hops(tmp_path):
    for max_hops, want in ((-1, [("http://b.test/x", SITE, "2", "0.0")]), (2, [])):
        config = from_dict({"archive": {"root": str(tmp_path / str(max_hops))},
                            "scope": {"max_hops": max_hops}})
        queue(config, SITE, [(f"{SITE}/", 0)])
        with open_stores(config).site_queue(0) as sites:
            sites.merge_links([LinkedSite(SITE, 1, True, 2, 0.5)])      # a site 2 hops out
        writer = BundleWriter(config.root / "warcs", config.warc)
        page(writer, f"{SITE}/", b'<a href="http://b.test/x">b</a>')
        result, _ = run(config)
        lines = [(url, source, hops, priority)         # the time left out
                 for path in sorted((config.root / "spool").glob("*.tsv"))
                 for url, source, _, hops, priority in map(str.split, path.read_text().splitlines())]
        assert lines == want and result.links_spooled == len(want)
