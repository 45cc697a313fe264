"""The global bitmap's slices as files: sizes, generations, stale ones, the measured false-positive
rate of each slice at its design load, and what the steps of a checkpoint do with them."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.links import steps
from archiver.links.columns import string_buffers
from archiver.links.slices import SliceFiles, slice_name, slice_shape
from archiver.links.slicing import slices_of
from archiver.queues.bloom import BloomBitmap, false_positive_rate, hash_keys
from archiver.queues.bloomkernel import hash_strings
from archiver.queues.embedded.crawlqueue import EmbeddedCrawlQueues, QueueNames
from archiver.queues.spool import SpoolDirectory
from tests.support.linkbatch import as_maps

STAMP = "20261122000000"


def store(tmp_path, slice_count: int = 4, **kwargs) -> SliceFiles:
    bits, hashes = slice_shape(40_000, 16, slice_count)
    return SliceFiles(tmp_path / "links", slice_count, bits, hashes, **kwargs)


def test_a_slice_is_its_share_of_the_design_load():
    assert slice_shape(10_000_000, 16, 4) == (40_000_000, 11)
    assert slice_shape(10, 16, 3) == (54, 11)                  # rounded up


def test_slices_round_trip_by_slice_and_generation(tmp_path):
    slices = store(tmp_path)
    assert slices.load(2, 0).count == 0 and slices.load(2, 0).bits == 160_000   # empty at 0
    bitmap = BloomBitmap(slices.bits, slices.hashes)
    bitmap.add_many(["http://a.test/", "http://b.test/"])
    slices.save(2, 1, bitmap)
    assert (tmp_path / "links" / "slice-2of4-1.bloom").is_file()
    assert list((tmp_path / "links").iterdir()) == [tmp_path / "links" / "slice-2of4-1.bloom"]
    again = slices.load(2, 1)
    assert again.count == 2 and "http://a.test/" in again and "http://c.test/" not in again
    assert slices.header(2, 1) == (160_000, 11, 0, 2)
    with pytest.raises(RuntimeError, match=r"slice-3of4-1\.bloom is missing: the links state says "
                                           r"slice 3 is at generation 1.*archiver links reshard"):
        slices.load(3, 1)
    (tmp_path / "links" / "slice-3of4-1.bloom").write_bytes(b"not a bitmap, and long enough to say so")
    with pytest.raises(RuntimeError, match="not a slice this batch wrote"):
        slices.header(3, 1)
    assert pickle.loads(pickle.dumps(slices)) == slices           # sent to Dask workers


def test_stale_slices_of_any_layout_and_cut_saves_are_removed(tmp_path):
    slices = store(tmp_path)
    folder = tmp_path / "links"
    folder.mkdir()
    names = ["slice-0of4-3.bloom", "slice-0of4-4.bloom", "slice-1of4-3.bloom", "slice-0of2-9.bloom",
             "slice-1of4-4.bloom.tmp", "state.sqlite", "bitmap-3.bloom"]
    for name in names:
        (folder / name).write_bytes(b"x")
    keep = {slice_name(0, 4, 3), slice_name(1, 4, 3)}
    assert slices.remove_stale(keep) == ["slice-0of2-9.bloom", "slice-0of4-4.bloom",
                                         "slice-1of4-4.bloom.tmp"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "bitmap-3.bloom", "slice-0of4-3.bloom", "slice-1of4-3.bloom", "state.sqlite"]


def test_each_slice_at_its_design_load_keeps_its_false_positive_bound():
    expected, slice_count = 160_000, 4
    bits, hashes = slice_shape(expected, 16, slice_count)
    bound = false_positive_rate(bits, expected // slice_count, hashes)
    assert bound < 1e-3                                          # 16 bits per URL: about 0.05 %
    keys = hash_keys(f"http://site{n % 997}.test/page/{n}" for n in range(expected))
    probes = hash_keys(f"http://other{n % 991}.test/doc/{n}" for n in range(400_000))
    home, probed = slices_of(keys[:, 0], slice_count), slices_of(probes[:, 0], slice_count)
    for p in range(slice_count):
        mine = keys[home == p]
        assert abs(len(mine) - expected / slice_count) < 0.03 * expected / slice_count
        bitmap = BloomBitmap(bits, hashes)
        bitmap.add_hashes(mine[:, 0], mine[:, 1])
        unseen = probes[probed == p]
        # Tested, not added: each probe against the slice's keys alone (its hash signed, as add
        # gives it).
        false = sum(bitmap.has_hash(lo | (hi - (hi >> 63 << 64)) << 64) for lo, hi in unseen.tolist())
        # ~100,000 probes at ~5e-4 expect ~50 false positives (a slice holds ~40,000 keys, a little
        # more or less than its share): 1.6x leaves ~3.5 standard deviations.
        assert 0 < false / len(unseen) <= 1.6 * false_positive_rate(bits, len(mine), hashes)
        assert false_positive_rate(bits, len(mine), hashes) < 1.2 * bound


# -- the steps over the slices ----------------------------------------------------------------

def spool_file(tmp_path, name: str, lines: list[str]) -> SpoolDirectory:
    folder = tmp_path / "spool"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in lines))
    return SpoolDirectory(folder)


def changes(results: list[steps.FileResult]) -> tuple[dict[str, int], set[str],
                                                      dict[str, tuple[int, float]]]:
    """The files' site changes as maps: in-links gained, sites woken, marks."""
    return as_maps(steps.site_changes(results, steps.site_numbers(results)))


def inbox_lines(results: list[steps.FileResult]) -> dict[str, memoryview]:
    return steps.inbox_lines(results, steps.site_numbers(results))


def summary(result: steps.FileResult) -> tuple:
    return (result.name, result.lines, result.bad, result.reports, by_site(result),
            changes([result])[0], result.new_pairs, result.new_keys)


def by_site(*results: steps.FileResult) -> dict[str, list[str]]:
    """The new URLs of each site, from its inbox lines (depth 0)."""
    out = {}
    for site, lines in inbox_lines(list(results)).items():
        assert all(line.startswith("0\t") for line in bytes(lines).decode().splitlines())
        out[site] = [line.removeprefix("0\t") for line in bytes(lines).decode().splitlines()]
    return out


def run_steps(source: steps.SpoolSource, slices, names: list[str], generation: int
              ) -> list[steps.FileResult]:
    reads = [steps.read_spool_file(source, name, slices.count) for name in names]
    flags = [steps.test_slice(slices, p, generation, [steps.slice_keys(r, p) for r in reads])
             for p in range(slices.count)]
    return [steps.assemble(r, [flags[p][n] for p in range(slices.count)])
            for n, r in enumerate(reads)]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
def test_a_column_s_keys_are_hashed_as_hash_keys_hashes_them_from_any_slice(kind):
    keys = ["http://a.test/", "", "\x00http://x.test\x00http://é.test", "http://b.test/" + "p" * 40]
    column = pa.array(keys, kind)

    def hashes(part: pa.Array) -> np.ndarray:
        return hash_strings(*string_buffers(part))

    assert (hashes(column) == hash_keys(keys)).all()
    assert (hashes(column.slice(1, 2)) == hash_keys(keys[1:3])).all()
    assert hashes(column.slice(4)).shape == (0, 2)
    assert hashes(pa.array([], kind)).shape == (0, 2)


LINES = [
    f"http://b.test/1\thttp://x.test\t{STAMP}",
    f"http://a.test/1\thttp://x.test\t{STAMP}",
    f"http://B.test/2\thttp://y.test\t{STAMP}",
    f"http://b.test/1\thttp://y.test\t{STAMP}",                 # a URL again
    f"http://a.test/self\thttp://a.test\t{STAMP}",              # a site's link to itself
    "garbage",
    f"http://{'.'.join(['l' * 62] * 4)}/\thttp://x.test\t{STAMP}",  # no crawl queue can hold it
]


def test_the_steps_find_new_urls_by_site_and_in_links_and_save_every_slice(tmp_path):
    spool = spool_file(tmp_path, "0-20261122000000-00001.tsv", LINES)
    spool_file(tmp_path, "0-20261122000001-00002.tsv", [f"http://a.test/1\thttp://z.test\t{STAMP}",
                                                         f"http://c.test/\thttp://z.test\t{STAMP}"])
    source = steps.SpoolSource(spool, QueueNames(tmp_path))
    source = pickle.loads(pickle.dumps(source))                  # sent to Dask workers
    slices = store(tmp_path)
    first, second = run_steps(source, slices, spool.closed(), 0)
    assert (first.lines, first.bad, [n for n, _ in first.reports]) == (7, 2, [6, 7])
    assert "origin too long for a directory name" in first.reports[1][1]
    assert list(by_site(first).items()) == [("http://a.test", ["http://a.test/1", "http://a.test/self"]),
                                            ("http://b.test", ["http://b.test/1", "http://b.test/2"])]
    assert changes([first])[0] == {"http://b.test": 2, "http://a.test": 1}
    assert first.new_pairs == 3
    assert list(by_site(second).items()) == [("http://c.test", ["http://c.test/"])]  # a.test/1 is known
    assert changes([second])[0] == {"http://a.test": 1, "http://c.test": 1}
    assert sum(first.new_keys) == 4 + 3 and sum(second.new_keys) == 1 + 2
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == [
        f"slice-{p}of4-1.bloom" for p in range(4)]
    assert summary(pickle.loads(pickle.dumps(first))) == summary(first)
    both_inlinks, both_woken, _ = changes([first, second])
    assert inbox_lines([first, second]) == {
        "http://b.test": b"0\thttp://b.test/1\n0\thttp://b.test/2\n",
        "http://a.test": b"0\thttp://a.test/1\n0\thttp://a.test/self\n",
        "http://c.test": b"0\thttp://c.test/\n"}
    assert list(inbox_lines([first, second])) == ["http://a.test", "http://b.test", "http://c.test"]
    assert both_inlinks == {"http://b.test": 2, "http://a.test": 2, "http://c.test": 1}
    assert both_woken == {"http://a.test", "http://b.test", "http://c.test"}
    assert changes([]) == ({}, set(), {}) and inbox_lines([]) == {}
    # Run again from generation 0 (a worker lost, its tasks retried): the same flags, the same slices.
    saved = {p: slices.path(p, 1).read_bytes() for p in range(4)}
    steps.forget_slices(slices)
    assert [summary(r) for r in run_steps(source, slices, spool.closed(), 0)] == [
        summary(first), summary(second)]
    assert {p: slices.path(p, 1).read_bytes() for p in range(4)} == saved
    # From generation 1: nothing is new.
    again = run_steps(source, slices, spool.closed(), 1)
    assert [by_site(r) for r in again] == [{}, {}]
    assert [changes([r])[0] for r in again] == [{}, {}]


_NAMES = st.lists(st.sampled_from(["a", "b", "c", "é", "a-b", "ab"]), max_size=4, unique=True)
_FILE = _NAMES.flatmap(lambda names: st.tuples(
    st.just(names),
    # new URLs: (site, page)
    st.lists(st.tuples(st.integers(0, max(len(names) - 1, 0)), st.integers(0, 9)),
             max_size=12 if names else 0),
    # in-links gained, hop counts and priorities: of some of the sites, each at most once
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 9), st.sampled_from([-1.5, 0.0, 2.0])),
             min_size=len(names), max_size=len(names)),
    st.lists(st.booleans(), min_size=len(names), max_size=len(names)),
    st.lists(st.booleans(), min_size=len(names), max_size=len(names))))


@given(st.lists(_FILE, max_size=4))
def test_site_changes_merge_files_as_python_would_site_by_site(files):
    """What the arrow, numpy and compiled work gives equals merging URL by URL and site by site
    in Python: each site's URLs in file and line order, sites in key order; in-links summed;
    the lowest hop count and the highest priority."""
    results, lines, inlinks, marks = [], {}, {}, {}
    for names, new, numbers, gained, linked_to in files:
        origins = [f"http://{name}.test" for name in names]
        urls = [f"{origins[site]}/{page}" for site, page in new]
        for (site, _), url in zip(new, urls, strict=True):
            lines[origins[site]] = lines.get(origins[site], b"") + f"0\t{url}\n".encode()
        for origin, (count, hops, priority), gains, marked in zip(origins, numbers, gained, linked_to,
                                                                   strict=True):
            if gains:
                inlinks[origin] = inlinks.get(origin, 0) + count
            if marked:
                low, high = marks.get(origin, (hops, priority))
                marks[origin] = (min(low, hops), max(high, priority))
        rows = range(len(names))
        results.append(steps.FileResult(
            name="f", location="f", lines=len(new), bad=0, reports=[],
            new_urls=pa.array(urls, pa.string()),
            new_url_sites=np.array([site for site, _ in new], dtype=np.intp),
            origins=pa.array(origins, pa.string()),
            linked=np.array([i for i in rows if gained[i]], dtype=np.intp),
            linked_counts=np.array([numbers[i][0] for i in rows if gained[i]], dtype=np.intp),
            site_rows=np.array([i for i in rows if linked_to[i]], dtype=np.intp),
            site_hops=np.array([numbers[i][1] for i in rows if linked_to[i]], dtype=np.int64),
            site_priority=np.array([numbers[i][2] for i in rows if linked_to[i]]),
            new_pairs=0, new_keys=[]))
    for origin in (inlinks.keys() | lines.keys()) - marks.keys():  # (not linked to: as hops 0,
        marks[origin] = (0, 0.0)                                    # priority 0)
    merged_inlinks, merged_woken, merged_marks = changes(results)
    assert list(inbox_lines(results).items()) == sorted(lines.items())
    assert merged_woken == set(lines)
    assert merged_inlinks == inlinks
    assert merged_marks == marks


def test_one_slice_finds_what_the_one_bitmap_of_old_found(tmp_path):
    """With one slice, a state from before slices goes on exactly as it did: URLs, then pairs."""
    lines = [f"http://s{n % 37}.test/{n % 101}\thttp://s{n % 13}.test\t{STAMP}" for n in range(600)]
    spool = spool_file(tmp_path, "0-20261122000000-00001.tsv", lines)
    slices = store(tmp_path, slice_count=1)
    (result,) = run_steps(steps.SpoolSource(spool), slices, spool.closed(), 0)
    old = BloomBitmap(slices.bits, slices.hashes)
    found = [line.split("\t")[0] for line in lines]
    new = [u for u, is_new in zip(found, old.add_many(found), strict=True) if is_new]
    sources = [line.split("\t")[1] for line in lines]
    pairs = [f"\x00{s}\x00{u[:u.find('/', 8)]}" for s, u in zip(sources, found, strict=True)
             if s != u[:u.find("/", 8)]]
    inlinks = sum(old.add_many(pairs))
    assert result.new_url_count == len(new) and result.new_pairs == inlinks
    assert sorted(result.new_urls.to_pylist()) == sorted(new)
    assert slices.load(0, 1)._array == old._array


@dataclass(frozen=True)
class FailingSlices(SliceFiles):
    """Slices whose saves fail (a full disk)."""

    def save(self, p: int, generation: int, bitmap: BloomBitmap) -> None:
        raise OSError(28, "No space left on device")


def test_a_slice_that_fails_to_save_leaves_no_half_set_copy_behind(tmp_path):
    spool = spool_file(tmp_path, "0-20261122000000-00001.tsv", LINES[:3])
    source = steps.SpoolSource(spool)
    slices = store(tmp_path, slice_count=1)
    run_steps(source, slices, spool.closed(), 0)                 # generation 1, kept in memory
    failing = FailingSlices(slices.directory, 1, slices.bits, slices.hashes)
    spool_file(tmp_path, "0-20261122000001-00002.tsv", [f"http://d.test/\thttp://x.test\t{STAMP}"])
    with pytest.raises(OSError, match="No space"):
        run_steps(source, failing, spool.closed()[1:], 1)
    (result,) = run_steps(source, slices, spool.closed()[1:], 1)  # read again from generation 1
    assert list(by_site(result).items()) == [("http://d.test", ["http://d.test/"])]


def test_the_rule_for_sites_is_the_embedded_crawl_queues_one(tmp_path):
    queues = EmbeddedCrawlQueues(tmp_path, bloom_bits=1024, max_fp=0.01)
    rule = QueueNames(tmp_path)
    for origin in ["http://a.test", "https://[::1]:8443", f"http://{'.'.join(['l' * 62] * 4)}",
                   "http://" + "%41" * 90, "http://a.test/x", "nothing"]:
        assert rule(origin) == queues.unfit(origin)
    assert rule("http://" + "%41" * 90) == "origin too long for a directory name"
    queues.close()


def test_a_group_ends_when_its_lines_reach_the_checkpoint_size():
    assert steps.group_end([400, 500, 200, 900], 1000) == 3
    assert steps.group_end([1000, 5], 1000) == 1
    assert steps.group_end([400, 500], 1000) is None
    assert steps.group_end([], 1000) is None


def test_slice_keys_are_the_files_keys_of_a_slice(tmp_path):
    spool = spool_file(tmp_path, "0-20261122000000-00001.tsv", LINES)
    read = steps.read_spool_file(steps.SpoolSource(spool), spool.closed()[0], 3)
    keys = [steps.slice_keys(read, p) for p in range(3)]
    # Every site may have a crawl queue here: b/1 twice, b/2, a/1, a/self, the long one ...
    assert sum(k.urls for k in keys) == 6
    assert sum(len(k.lo) - k.urls for k in keys) == 4            # ... x->b, x->a, y->b, x->long
    for p, k in enumerate(keys):
        assert k.lo.dtype == np.uint64 and (slices_of(k.lo, 3) == p).all()
