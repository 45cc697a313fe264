"""A spool file read as columns gives what the per-line rules give, line by line."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from archiver.links.columns import _CHUNK, REPORTED, line_verdict, normal_form, read_columns
from archiver.web import urls
from tests.support.fuzzing import examples
from tests.support.urlstrategies import absolute_urls, odd_text

STAMP = "20261122000000"


def unfit(origin: str) -> str | None:
    return "origin too long for a directory name" if len(origin) > 40 else None


SHORT = r"^.{0,40}$"  # sites unfit always passes


def per_line(data: bytes, unfit) -> tuple:
    """The batch's reading before it was columnar: decode, split, one verdict per line."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    bad, found, targets, pairs = [], [], [], []
    marks: dict[str, tuple[int, float]] = {}
    for number, line in enumerate(lines, 1):
        verdict = line_verdict(line, unfit)
        if isinstance(verdict, str):
            bad.append((number, verdict))
            continue
        url, source, hops, priority = verdict
        target = urls.origin(url)
        found.append(url)
        targets.append(target)
        if source != target:
            pairs.append((f"\x00{source}\x00{target}", target))
        hops += source != target
        low, high = marks.get(target, (hops, priority))
        marks[target] = (min(low, hops), max(high, priority))
    pairs = list(dict.fromkeys(pairs))
    return (len(lines), len(bad), bad[:REPORTED], found, targets,
            [key for key, _ in pairs], [target for _, target in pairs], marks)


def columnar(data: bytes, unfit, fit: str = "") -> tuple:
    read = read_columns(data, unfit, fit=fit)
    origins, linking = read.origins.to_pylist(), read.linking_sites.to_pylist()
    marks = dict(zip(read.origins.take(read.site_rows).to_pylist(),
                     zip(read.site_hops.tolist(), read.site_priority.tolist(), strict=True), strict=True))
    return (read.lines, read.bad, read.reports, read.urls.to_pylist(),
            [origins[t] for t in read.targets],
            [f"\x00{linking[s]}\x00{origins[t]}"
             for s, t in zip(read.pair_sources, read.pair_targets, strict=True)],
            [origins[t] for t in read.pair_targets], marks)


# -- the normal-form check over a column -------------------------------------------------------

_PATH_PARTS = st.sampled_from(["/", "/.", "/..", "/...", "/.a", "/..a", "/a.", "/a", "//", "?", "?/.",
                               "?/..", "?.", "/.?", "/..?", "%41", "~", "-", "'", "A", "@:", "é", " "])


@st.composite
def nearly_normal(draw: st.DrawFn) -> str:
    """URLs close to normal form: the cases the check's segments and host tell apart."""
    host = draw(st.sampled_from(["a.test", "www.example.com", "x", "a-b.c_d", "1.2", "a." * 130 + "b",
                                 "A.test", "a..b", "a.test:8080", "[::1]", "a" * 64 + ".b"]))
    scheme = draw(st.sampled_from(["http", "https", "ftp", "HTTP"]))
    path = "/" + "".join(draw(st.lists(_PATH_PARTS, max_size=8)))
    return f"{scheme}://{host}{path}"


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.one_of(nearly_normal(), absolute_urls(), absolute_urls().map(urls.normalize)
                          .filter(bool), odd_text), min_size=1, max_size=30))
@example(["http://a.test/", "http://a.test/./", "http://a.test/?x/..", "http://a.test/?x/...",
          "https://" + "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61 + "/x"])
def test_the_normal_form_regex_agrees_with_is_normal(candidates):
    candidates = [u.encode("utf-8", "replace").decode() for u in candidates]  # text read from UTF-8
    assert normal_form(pa.array(candidates, pa.string())).tolist() == [
        urls.is_normal(u) for u in candidates]


# -- whole files ------------------------------------------------------------------------------

_SOURCES = st.one_of(st.sampled_from(["http://x.test", "https://y.test:8443", "http://a.test",
                                      "http://", "http:///", "https:///", "http://a/b", "x.test",
                                      "http://é.test", "https://a.test/"]), st.text(max_size=12))
_TIMES = st.one_of(st.just(STAMP), st.sampled_from(["2026112200000\u0663", "\uff12" * 14,
                                                    "2026-11-22", ""]), st.text("0123456789", max_size=16))
_URLS = st.one_of(nearly_normal(), absolute_urls(), st.sampled_from(
    ["http://a.test/", "http://" + "l" * 50 + ".test/", "https://[::1]:8/x", "javascript:x", ""]))
# Hops and priorities as the spool writes them, and near misses.
_HOPS = st.one_of(st.integers(0, 12).map(str), st.sampled_from(
    ["", "-1", "1.0", "0x1", "1234567890", "999999999", "\u0663", " 1", "1_0"]))
_PRIORITIES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0.0", "-0.0", "1e-05", "1.", ".5", "+3", "1e999", "-1e999", "nan", "inf",
                     "", ".", "e5", "1e", "1e1234", "0x10", "1_0", " 1", "\u0663"]))
_LINE = st.one_of(
    st.builds(lambda u, s, t: f"{u}\t{s}\t{t}", _URLS, _SOURCES, _TIMES),
    st.builds(lambda u, s, t, h, p: f"{u}\t{s}\t{t}\t{h}\t{p}", _URLS, _SOURCES, _TIMES, _HOPS,
              _PRIORITIES),
    st.builds(lambda u, s: f"{u}\t{s}\t{STAMP}\textra", _URLS, _SOURCES),
    st.builds(lambda u, s: f"{u}\t{s}\t{STAMP}\t1\t2\textra", _URLS, _SOURCES),
    st.text(max_size=30),
    st.sampled_from(["", "\t", "\t\t", "\t\t\t", "\ufeffhttp://a.test/\thttp://x.test\t" + STAMP]),
)
_ENDS = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])


@st.composite
def spool_files(draw: st.DrawFn) -> bytes:
    parts = []
    for line in draw(st.lists(_LINE, max_size=40)):
        parts.append(line.encode("utf-8", "surrogatepass") + draw(_ENDS).encode())
    data = b"".join(parts)
    if draw(st.booleans()):  # cut anywhere: a last line without its end, a split character
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 4)) == 0:
        data = draw(st.binary(max_size=8)) + data
    return data


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spool_files(), st.booleans(), st.sampled_from(["", SHORT]))
@example(b"\xef\xbb\xbfhttp://a.test/\thttp://x.test\t20261122000000\n", True, "")
@example(b"\n\nx\r\n\t\t\n" + b"http://a.test/\thttp://a.test\t20261122000000", False, "")
@example(b"http://a.test/\thttp://x.test\t20261122000000\t3\t0.5\n"
         b"http://a.test/y\thttp://y.test\t20261122000000\n"
         b"http://a.test/z\thttp://a.test\t20261122000000\t0\t2.0", False, "")
def test_columnar_reading_equals_the_per_line_rules(data, with_unfit, fit):
    """``fit``, a regex of sites ``unfit`` always passes, changes only which sites are asked."""
    rule = unfit if with_unfit else None
    assert columnar(data, rule, fit) == per_line(data, rule)


def test_more_bad_lines_than_reported_are_counted():
    data = "".join(f"bad {n}\n" for n in range(30)).encode() + f"http://a.test/\thttp://x.test\t{STAMP}\n".encode()
    read = read_columns(data, None)
    assert (read.lines, read.bad, read.urls.to_pylist()) == (31, 30, ["http://a.test/"])
    assert read.reports == [(n, "expected 3 or 5 tab-separated fields, found 1") for n in range(1, 21)]


@pytest.mark.parametrize(("line", "verdict"), [
    ("http://A.test:80/x\thttp://b.test\t" + STAMP, ("http://a.test/x", "http://b.test", 0, 0.0)),
    ("http://a.test/x\thttp://b.test\t" + STAMP + "\t4\t-2.5", ("http://a.test/x", "http://b.test", 4, -2.5)),
    ("http://a.test/x\thttp://b.test\t" + STAMP + "\t4\tnan", "priority 'nan' is not a finite number"),
    ("http://a.test/x\thttp://b.test\t" + STAMP + "\t-1\t0.0",
     "hops '-1' is not a count of at most 9 digits"),
    ("mailto:x@a.test\thttp://b.test\t" + STAMP, "not an http(s) URL: 'mailto:x@a.test'"),
    ("http://" + "l" * 50 + ".test/\thttp://b.test\t" + STAMP,
     "origin too long for a directory name: 'http://" + "l" * 50 + ".test/'"),
    ("http://a.test/\thttp://b.test\t2026", "time '2026' is not 14 digits"),
])
def test_line_verdict(line, verdict):
    assert line_verdict(line, unfit) == verdict


@pytest.mark.parametrize("tail", [b"", b"\n", b"x\tno end"])
def test_a_file_longer_than_a_step_of_the_line_count_has_every_line_counted(tail):
    line = b"http://a.test/p\thttp://b.test\t20261122000000\t0\t0\n"
    body = line * (3 * _CHUNK // len(line) + 1) + tail   # lines across the steps' seams
    columns = read_columns(body, None)
    assert columns.lines == body.count(b"\n") + (not body.endswith(b"\n"))
    assert len(columns.urls) == body.count(line)
