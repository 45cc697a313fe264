"""The spellings of the last release (issue 39): each still works, as its new spelling does, and
says once on stderr that it is deprecated, naming the new one; the new spelling says nothing of
the kind. Run in this process (``archiver_here_text``), on real archives and configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from archiver import cli
from tests.support.repo import archiver_here_text
from tests.support.storemodes import LOOKED_UP, lookup_archive

DEPRECATED = "archiver: warning: `{old}` is deprecated and goes in the next release; use `{new}`"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config of an embedded archive with one capture of LOOKED_UP (no full-text index)."""
    return lookup_archive(tmp_path_factory.mktemp("spellings"))


def spellings(archive: Path, tmp_path: Path) -> list[tuple[list[str], list[str], str, str]]:
    """(old argv, new argv, the old spelling as the warning names it, the new one)."""
    config = str(archive)
    missing = str(tmp_path / "no-such-hosts-file")
    return [
        (["crawl", "--config", config, "--process", "99"],
         ["crawl", "run", "--config", config, "--process", "99"], "archiver crawl ...",
         "archiver crawl run ..."),
        (["dns", "--config", config, "--hosts", missing],
         ["dns", "run", "--config", config, "--hosts", missing], "archiver dns ...", "archiver dns run ..."),
        (["replay", "--config", config, "--listen", "nonsense"],
         ["replay", "run", "--config", config, "--listen", "nonsense"], "archiver replay ...",
         "archiver replay run ..."),
        (["search", "harbour", "--config", config],
         ["search", "query", "harbour", "--config", config], "archiver search WORDS",
         "archiver search query WORDS"),
        (["store", "migrate", "--from", config, "--target", config],
         ["store", "migrate", "--source", config, "--target", config], "archiver store migrate --from",
         "archiver store migrate --source"),
        (["store", "migrate", "--source", config, "--to", config],
         ["store", "migrate", "--source", config, "--target", config], "archiver store migrate --to",
         "archiver store migrate --target"),
        (["catalog", "list", LOOKED_UP, "--match", "exact", "--config", config],
         ["catalog", "list", "--url", LOOKED_UP, "--config", config],
         "archiver catalog list URL --match exact", "archiver catalog list --url URL"),
        (["catalog", "list", "http://example.org/", "--config", config],
         ["catalog", "list", "--prefix", "http://example.org/", "--config", config],
         "archiver catalog list URL --match prefix", "archiver catalog list --prefix URL"),
    ]


@pytest.mark.parametrize("case", range(8))
def test_an_old_spelling_works_as_the_new_one_and_warns_once(archive: Path, tmp_path: Path,
                                                              case: int) -> None:
    old, new, old_named, new_named = spellings(archive, tmp_path)[case]
    then, now = archiver_here_text(*old), archiver_here_text(*new)
    assert (then.returncode, then.stdout) == (now.returncode, now.stdout)
    warning = DEPRECATED.format(old=old_named, new=new_named)
    assert then.stderr.splitlines()[0] == warning
    assert then.stderr == warning + "\n" + now.stderr
    assert "deprecated" not in now.stderr and "Traceback" not in then.stderr + now.stderr


def test_the_old_spellings_reach_the_verbs_they_meant(archive: Path, tmp_path: Path) -> None:
    """What each pair above runs: a crawler's, the DNS service's and the replay's checks of their
    options, a search, a refused migration, a listing of the one capture."""
    outcomes = [archiver_here_text(*new) for _, new, _, _ in spellings(archive, tmp_path)]
    assert [done.returncode for done in outcomes] == [2, 2, 2, 2, 2, 2, 0, 0]
    assert "--process 99 is outside" in outcomes[0].stderr
    assert "cannot read host names" in outcomes[1].stderr
    assert "bad listen address 'nonsense'" in outcomes[2].stderr
    assert "run `archiver search index` first" in outcomes[3].stderr
    assert "store migrate: " in outcomes[4].stderr
    assert f" {LOOKED_UP} " in outcomes[6].stdout and outcomes[6].stdout == outcomes[7].stdout


def test_reshard_takes_slices_and_its_old_partitions_with_a_warning(tmp_path: Path) -> None:
    """The links state's slice count changes each time (its log lines differ), so only the
    outcome and the warning are compared."""
    config = str(lookup_archive(tmp_path))
    then = archiver_here_text("links", "reshard", "--partitions", "2", "--config", config)
    now = archiver_here_text("links", "reshard", "--slices", "3", "--config", config)
    assert (then.returncode, now.returncode) == (0, 0)
    assert then.stdout.startswith("links reshard: 2 slices rebuilt")
    assert now.stdout.startswith("links reshard: 3 slices rebuilt")
    assert then.stderr.splitlines()[0] == DEPRECATED.format(
        old="archiver links reshard --partitions", new="archiver links reshard --slices")
    assert "deprecated" not in now.stderr
    missing = archiver_here_text("links", "reshard", "--config", config)
    assert missing.returncode == 2 and "--slices N is required" in missing.stderr


@pytest.mark.parametrize(("argv", "meant"), [
    (["dns", "--config", "F", "lookup", "example.org"], ["dns", "lookup", "--config", "F", "example.org"]),
    (["search", "--config", "F", "index"], ["search", "index", "--config", "F"]),
    (["crawl", "--config", "F", "run"], ["crawl", "run", "--config", "F"]),
    (["crawl", "--help"], ["crawl", "--help"]),
])
def test_a_sub_verb_after_options_is_no_old_spelling(argv: list[str], meant: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.new_spelling(cli.parser(), argv) == meant
    assert capsys.readouterr().err == ""


def test_searching_for_a_sub_verb_s_name_is_spelled_with_query(tmp_path: Path) -> None:
    """``search index`` builds the index; the word is searched for with ``search query index``."""
    archive = lookup_archive(tmp_path)
    built = archiver_here_text("search", "index", "--config", str(archive))
    assert built.returncode == 0 and "search index: " in built.stdout
    found = archiver_here_text("search", "query", "index", "--config", str(archive))
    assert found.returncode == 1 and "no page of the archive matches" in found.stderr
    assert "deprecated" not in built.stderr + found.stderr


@pytest.mark.parametrize(("option", "value", "taken"), [
    ("--url", LOOKED_UP, True), ("--prefix", "http://example.org/", True),
    ("--host", "example.org", True), ("--host", "example.org:8080", False),
    ("--host", "example.com", False), ("--prefix", "http://example.org/docs", False),
])
def test_one_url_selector_for_catalog_list_export_and_search(tmp_path: Path, option: str, value: str,
                                                              taken: bool) -> None:
    config = str(lookup_archive(tmp_path))
    assert archiver_here_text("search", "index", "--config", config).returncode == 0
    listed = archiver_here_text("catalog", "list", option, value, "--config", config)
    found = archiver_here_text("search", "query", "hello", option, value, "--config", config)
    exported = archiver_here_text("export", option, value, "-o", str(tmp_path / "slice.warc.gz"),
                                  "--config", config)
    assert (LOOKED_UP in listed.stdout, LOOKED_UP in found.stdout) == (taken, taken)
    assert [listed.returncode, found.returncode, exported.returncode] == ([0, 0, 0] if taken else [1, 1, 2])
    assert (tmp_path / "slice.warc.gz").exists() == taken
