"""scope.max_hops and site priorities on their way through the spool and the links batch: the
spool line's two new fields, old three-field lines, the per-site merge, and the crawler's check."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.config import CrawlConfig
from archiver.crawl.policy import MAX_HOPS_RULE, VisitPolicy
from archiver.links import steps
from archiver.links.columns import read_columns
from archiver.queues.spool import SpoolLine, SpoolWriter, parse_line
from archiver.web.scope import scope_of
from tests.support.fuzzing import examples
from tests.support.linkbatch import as_maps

STAMP = "20261122000000"


# -- the spool line ---------------------------------------------------------------------------

@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.text(max_size=12), st.integers(-5, 10**10).map(str),
                       st.floats().map(repr), st.just(STAMP), st.just("http://a.test")),
             max_size=7).map("\t".join)))
def test_any_line_parses_or_says_why(line):
    parsed = parse_line(line)
    if isinstance(parsed, str):
        assert parsed                                        # a reason, never an empty one
        return
    assert isinstance(parsed, SpoolLine) and line.count("\t") in (2, 4)
    assert 0 <= parsed.hops <= 999_999_999 and math.isfinite(parsed.priority)
    assert parsed.source.startswith(("http://", "https://"))


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 999_999_999), st.floats(allow_nan=False, allow_infinity=False))
def test_what_the_writer_writes_reads_back(tmp_path_factory, hops, priority):
    spool = SpoolWriter(tmp_path_factory.mktemp("spool"), 0, max_lines=10, max_age=60)
    spool.add("http://a.test/x", "http://b.test", 1_700_000_000, hops=hops, priority=priority)
    spool.close()
    (written,) = [p.read_text() for p in spool.directory.glob("*.tsv")]
    assert parse_line(written) == ("http://a.test/x", "http://b.test", hops, priority)


@pytest.mark.parametrize(("hops", "priority"), [(-1, 0.0), (10**9, 0.0), (0, math.nan),
                                                (0, math.inf)])
def test_the_writer_refuses_what_no_reader_takes(tmp_path, hops, priority):
    spool = SpoolWriter(tmp_path, 0, max_lines=10, max_age=60)
    with pytest.raises(ValueError, match=r"hops|priority"):
        spool.add("http://a.test/", "http://b.test", 1_700_000_000, hops=hops, priority=priority)
    spool.close()
    assert [p.read_text() for p in tmp_path.glob("*.tsv")] == []      # nothing half written


def test_an_old_three_field_line_reads_as_a_seed_sites_link():
    assert parse_line(f"http://a.test/\thttp://b.test\t{STAMP}") == (
        "http://a.test/", "http://b.test", 0, 0.0)


# -- per site, in a file and across files ------------------------------------------------------

def test_each_site_keeps_its_lowest_hops_and_highest_priority_across_lines():
    data = "".join(f"{line}\n" for line in [
        f"http://t.test/1\thttp://far.test\t{STAMP}\t7\t0.5",
        f"http://t.test/2\thttp://near.test\t{STAMP}\t2\t-1.0",
        f"http://t.test/1\thttp://far.test\t{STAMP}\t9\t3.0",      # a URL again: still counted
        f"http://u.test/\thttp://u.test\t{STAMP}\t4\t0.0",          # a site's link to itself: no hop
        f"http://v.test/\thttp://old.test\t{STAMP}",                 # an old line: from hops 0
    ]).encode()
    read = read_columns(data, None)
    marks = dict(zip(read.origins.take(read.site_rows).to_pylist(),
                     zip(read.site_hops.tolist(), read.site_priority.tolist(), strict=True),
                     strict=True))
    assert marks == {"http://t.test": (3, 3.0), "http://u.test": (4, 0.0), "http://v.test": (1, 0.0)}


def test_site_marks_merge_files():
    def result(sites, hops, priority):
        read = read_columns("".join(
            f"http://{s}.test/\thttp://src.test\t{STAMP}\t{h - 1}\t{p!r}\n"
            for s, h, p in zip(sites, hops, priority, strict=True)).encode(), None)
        return steps.FileResult(
            name="f", location="f", lines=read.lines, bad=0, reports=[], new_urls=read.urls,
            new_url_sites=read.targets, origins=read.origins, linked=read.targets,
            linked_counts=read.targets, new_pairs=0, new_keys=[], site_rows=read.site_rows,
            site_hops=read.site_hops, site_priority=read.site_priority)

    results = [result(["a", "b"], [3, 1], [0.0, 2.0]), result(["a", "c"], [2, 5], [-1.0, 0.25])]
    _, _, merged = as_maps(steps.site_changes(results, steps.site_numbers(results)))
    assert merged == {"http://a.test": (2, 0.0), "http://b.test": (1, 2.0), "http://c.test": (5, 0.25)}
    assert as_maps(steps.site_changes([], steps.site_numbers([]))) == ({}, set(), {})


# -- the crawler's check ----------------------------------------------------------------------

@pytest.mark.parametrize(("hops", "max_hops", "route"), [
    (0, -1, "external"), (40, -1, "external"),       # unlimited
    (0, 0, "scope"),                                  # seed sites only
    (0, 1, "external"), (1, 1, "scope"), (2, 1, "scope"), (1, 2, "external"),
])
def test_a_link_out_of_a_site_at_max_hops_is_out_of_scope(hops, max_hops, route):
    policy = VisitPolicy("http://a.test", CrawlConfig(), hops=hops, max_hops=max_hops)
    assert policy.route("http://b.test/", 1) == route
    assert policy.route("http://a.test/x", 1) is None                 # its own links: always
    if route == "scope":
        assert policy.scope_rule("http://b.test/") == MAX_HOPS_RULE
        policy.reconfigure(CrawlConfig(), None, -1)                   # SIGHUP lifts the limit
        assert policy.route("http://b.test/", 1) == "external"


@pytest.mark.parametrize(("hops", "max_hops", "beyond"), [
    (0, -1, False), (9, -1, False), (0, 0, False), (1, 0, True), (2, 2, False), (3, 2, True)])
def test_a_site_farther_than_max_hops_is_not_visited(hops, max_hops, beyond):
    assert VisitPolicy("http://a.test", CrawlConfig(), hops=hops,
                       max_hops=max_hops).beyond_max_hops() is beyond


def test_a_scope_rule_still_names_itself_beside_max_hops():
    scope = scope_of((), ("host:b.test",))
    policy = VisitPolicy("http://a.test", CrawlConfig(), scope=scope, hops=0, max_hops=0)
    assert policy.route("http://b.test/", 1) == "scope"
    assert policy.scope_rule("http://b.test/") == "host:b.test"
    assert policy.scope_rule("http://c.test/") == MAX_HOPS_RULE
