"""The import's header checks (archiver.store.warcheads): any bytes are accepted or refused with a
HeadError, never another exception; well-formed records of any shape are accepted with the count
warcio reads; a record made wrong in one part is refused with its number and offset; the cost
stays linear however long a line is."""

from __future__ import annotations

import gzip
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from archiver.store.warcheads import MAX_HTTP_HEAD, MAX_WARC_HEAD, HeadError, check_heads
from tests.support.fuzzing import assert_cost_bounded, examples

_NAME = st.text("abcdefghijklmnopqrstuvwxyz-ABCXYZ0123456789", min_size=1, max_size=12)
_VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)


def record(kind: str = "response", *, url: bytes = b"http://example.org/", status: bytes = b"200",
           date: bytes = b"2020-05-01T10:00:00Z", fields: list[tuple[str, str]] | None = None,
           body: bytes = b"<p>hi</p>", length_delta: int = 0) -> bytes:
    http = b"HTTP/1.1 " + status + b" OK\r\nContent-Type: text/html\r\n\r\n" + body
    extra = b"".join(f"X-{name}: {value}\r\n".encode() for name, value in fields or [])
    return (b"WARC/1.0\r\nWARC-Type: " + kind.encode() + b"\r\nWARC-Date: " + date
            + b"\r\nWARC-Target-URI: " + url + b"\r\nWARC-Record-ID: <urn:uuid:1>\r\n" + extra
            + b"Content-Length: " + str(len(http) + length_delta).encode() + b"\r\n\r\n" + http
            + b"\r\n\r\n")


def check(data: bytes) -> tuple[int, dict[str, int]]:
    return check_heads(io.BytesIO(data))


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_are_accepted_or_refused_with_a_head_error(data: bytes) -> None:
    for prefix in (b"", b"WARC/1.0\r\n", record()):
        try:
            check(prefix + data)
        except HeadError as e:
            assert e.number >= 1 and 0 <= e.offset <= len(prefix + data) and "\n" not in str(e)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["response", "resource", "request", "warcinfo", "revisit"]),
                          st.lists(st.tuples(_NAME, _VALUE), max_size=6),
                          st.binary(max_size=200)),
                min_size=1, max_size=5))
def test_well_formed_records_are_accepted_as_warcio_reads_them(shapes) -> None:
    records = [record(kind, fields=fields, body=body) for kind, fields, body in shapes]
    plain = b"".join(records)
    by_record = b"".join(gzip.compress(r) for r in records)
    for data, zipped in ((plain, False), (by_record, True)):
        with gzip.open(io.BytesIO(data)) if zipped else io.BytesIO(data) as stream:
            count, kinds = check_heads(stream)
        assert count == len(shapes) and sum(kinds.values()) == count
        warcio = [r.rec_type for r in ArchiveIterator(io.BytesIO(data), check_digests=False)]
        assert sorted(warcio) == sorted(k for k, n in kinds.items() for _ in range(n))


WRONG = [
    (dict(status=b"2000"), "HTTP status '2000' is not three digits"),
    (dict(status=b"-20"), "HTTP status '-20' is not three digits"),
    (dict(url=b"http://example.org/\x00"), "control character"),
    (dict(date=b"2020-13-45T00:00:00Z"), "is not a date"),
    (dict(date=b"20200"), "is not a date"),
    (dict(length_delta=-7), "follows its block"),
    (dict(length_delta=9), "follows its block of 62 bytes"),  # into the next record
    (dict(fields=[("Long", "a" * MAX_WARC_HEAD)]), f"WARC head is longer than {MAX_WARC_HEAD}"),
    (dict(body=b"\r\n" * 100, status=b"200 OK\r\nX: " + b"b" * MAX_HTTP_HEAD + b"\r\nY:"),
     f"HTTP head is longer than {MAX_HTTP_HEAD}"),
]


@pytest.mark.parametrize("wrong, why", WRONG)
@settings(max_examples=examples(10), deadline=None)
@given(before=st.integers(0, 3))
def test_a_record_wrong_in_one_part_is_refused_with_its_number_and_offset(wrong, why, before) -> None:
    good = record(url=b"http://example.org/good")
    with pytest.raises(HeadError, match=why) as refused:
        check(good * before + record(**wrong) + good)
    assert (refused.value.number, refused.value.offset) == (before + 1, len(good) * before)


@pytest.mark.parametrize("where", ["warc", "http"])
def test_a_long_line_costs_what_a_long_body_does(where) -> None:
    line = b"a" * (16 << 20)
    hostile = record(fields=[("Long", line.decode())]) if where == "warc" else record(
        status=b"200 OK\r\nX-Long: " + line + b"\r\n", body=b"")
    benign = record(body=line)

    def run(data: bytes) -> None:
        try:
            check(data)
        except HeadError as e:
            assert data is hostile and "head is longer than" in str(e)

    assert_cost_bounded(run, hostile, benign, factor=3, label=f"long {where} line")


def test_blank_lines_between_records_cost_little() -> None:
    assert check(b"\r\n \t\n" * 500_000 + record() + b"\r\n" * 500_000) == (1, {"response": 1})


_URL_PIECE = st.text("abcdefghij/?=&.%- ", min_size=1, max_size=20)
_AFTER = st.sampled_from([b"\n", b"\n\n", b"\r\n", b"junk line\n", b"</html>\n\n"])


@st.composite
def arc_files(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """An ARC file of old writers' quirks warcio takes: URLs with spaces, one line after a block
    that its length leaves out, blank lines of any kind between records; and its URLs."""
    header = b"1 0 t\nURL IP-address Archive-date Content-type Archive-length\n"
    out = [b"filedesc://f.arc 0.0.0.0 20010101000000 text/plain %d\n" % len(header) + header + b"\n"]
    urls = []
    for n in range(draw(st.integers(1, 5))):
        url = b"http://example.org/%d" % n + draw(_URL_PIECE).encode()
        body = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + draw(st.binary(max_size=40))
        out.append(url + b" 192.0.2.1 20010203040506 text/html %d\n" % len(body) + body + draw(_AFTER))
        urls.append(url)
    return b"".join(out), urls


@settings(max_examples=examples(200), deadline=None)
@given(arc_files())
def test_an_arc_file_warcio_reads_passes_the_checks_with_the_records_warcio_reads(
        arc: tuple[bytes, list[bytes]]) -> None:
    data, urls = arc
    warnings: list[str] = []
    records, kinds = check_heads(io.BytesIO(data), warnings.append)
    read = [r for r in ArchiveIterator(io.BytesIO(data), arc2warc=True)]
    assert records == len(read) == len(urls) + 1 and kinds == {"arc_header": 1, "response": len(urls)}
    assert [r.rec_headers.get_header("WARC-Target-URI") for r in read[1:]] == [
        u.decode().replace(" ", "%20") for u in urls]
    assert all("\n" not in w for w in warnings)  # one line each
