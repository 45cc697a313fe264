"""External-link spool files."""

import os

from archiver.queues.spool import SpoolWriter


def test_lines_rotation_and_publishing(tmp_path, monkeypatch):
    spool = SpoolWriter(tmp_path, 2, max_lines=3, max_age=100)
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    for i in range(7):
        spool.add(f"http://x{i}.test/", "http://from.test", 1_700_000_000 + i)
    # Rotation only hands the full files over: the fsync and rename wait for a sync job, which
    # the crawler runs in a worker thread.
    assert fsyncs == [] and not list(tmp_path.glob("*.tsv"))
    assert len(list(tmp_path.glob("*.open"))) == 3
    spool.sync()
    closed = sorted(tmp_path.glob("*.tsv"))
    assert len(closed) == 2 and len(list(tmp_path.glob("*.open"))) == 1
    first = closed[0].read_text().splitlines()
    assert first[0] == "http://x0.test/\thttp://from.test\t20231114221320\t0\t0.0"
    assert all(name.name.startswith("2-") for name in closed)
    spool.tick(1_700_000_000 + 200)                 # older than max_age: handed over...
    spool.sync()                                    # ... and published
    assert len(list(tmp_path.glob("*.tsv"))) == 3 and not list(tmp_path.glob("*.open"))
    lines = [ln for p in tmp_path.glob("*.tsv") for ln in p.read_text().splitlines()]
    assert len(lines) == 7 and spool.lines_written == 7


def test_leftover_open_file_is_repaired_and_published(tmp_path):
    torn = tmp_path / "0-20260101000000-00001.tsv.open"
    torn.write_bytes(b"http://a.test/\thttp://b.test\t20260101000000\nhttp://c.te")
    SpoolWriter(tmp_path, 0, max_lines=10, max_age=10)
    published = tmp_path / "0-20260101000000-00001.tsv"
    assert published.read_bytes() == b"http://a.test/\thttp://b.test\t20260101000000\n"
    assert not torn.exists()
