"""The WARC folder as a WarcReader (``catalog_maintenance.WarcFiles``): bundles named as the
catalog names them, ``.open`` ones only when asked, and ``--warcs`` globs reaching files elsewhere;
and the progress line of the catalog's long runs."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import pytest

from archiver.store.catalog_maintenance import Progress, WarcFiles
from archiver.store.warcindex import WarcError, index_warc
from tests.support.storemodes import write_bundles

PAGES = {f"http://example.org/{i}": b"<p>%d</p>" % i * 100 for i in range(6)}


def test_open_bundles_go_by_their_closed_names(tmp_path: Path) -> None:
    folder = tmp_path / "warcs"
    *closed, still_open = write_bundles(folder, PAGES, max_size=1500)
    assert closed
    entries = list(index_warc(still_open))
    still_open.rename(still_open.with_name(still_open.name + ".open"))
    (folder / "notes.txt").write_text("not a bundle")
    warcs = WarcFiles(folder)
    assert warcs.names() == [path.name for path in closed]
    assert warcs.names(include_open=True) == [path.name for path in closed] + [still_open.name]
    assert warcs.location(still_open.name) == str(folder / still_open.name)
    assert warcs.size(still_open.name) == (folder / (still_open.name + ".open")).stat().st_size
    assert list(warcs.index(still_open.name)) == entries


def test_a_glob_reaches_files_elsewhere_by_their_names(tmp_path: Path) -> None:
    folder, other = tmp_path / "warcs", tmp_path / "other"
    bundles = write_bundles(other, PAGES, max_size=1500)
    warcs = WarcFiles(folder)
    assert warcs.names() == []
    names = warcs.names(str(other / "*.warc.gz"))
    assert names == [path.name for path in bundles]
    for path in bundles:
        assert warcs.location(path.name) == str(path)
        assert warcs.size(path.name) == path.stat().st_size
        assert list(warcs.index(path.name)) == list(index_warc(path))
    with pytest.raises(WarcError, match="no such WARC file"):  # records are read from the folder only
        warcs.read(bundles[0].name, 0, 10)


def test_a_glob_matching_two_files_of_one_name_is_refused(tmp_path: Path) -> None:
    bundle = write_bundles(tmp_path / "a", PAGES)[0]
    (tmp_path / "b").mkdir()
    shutil.copy(bundle, tmp_path / "b" / bundle.name)
    with pytest.raises(WarcError, match="would have the same name in the catalog"):
        WarcFiles(tmp_path / "warcs").names(str(tmp_path / "*" / "*.warc.gz"))


def test_progress_writes_to_the_stderr_in_force_when_it_starts(monkeypatch):
    """Not to the one of the time the module was imported (an in-process CLI run swaps it)."""
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", swapped)
    progress = Progress(2**20, "reindex")
    progress.update(2**19, 10, force=True)
    assert swapped.getvalue().startswith("reindex:  50.0% 0.5/1.0 MiB, 10 entries")
