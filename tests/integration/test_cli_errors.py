"""A new user's mistakes on the command line (issue 39, part 6): each is one line on stderr with an
exit status, never a traceback; seeds that are no URL are refused and named; an export does not
overwrite a file unasked; every verb's --help documents what it does, its arguments and its exit
codes; ``status`` says whether each crawler runs."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from archiver import cli
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from tests.support.repo import ARCHIVER, archiver_here_text
from tests.support.storemodes import LOOKED_UP, lookup_archive

QUIET = '[dns]\nhosts_file = ""\nnameservers = ["127.0.0.1:9"]\n'  # nothing leaves the host


def config_at(folder: Path, root: Path) -> Path:
    path = folder / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{root}"\n' + QUIET)
    return path


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failure writes to stderr (log lines of level info aside)."""
    lines = [line for line in done.stderr.splitlines() if "level=info" not in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize("verb", [
    ["seeds", "SEEDS"],
    ["crawl", "run", "--seeds", "SEEDS", "--until-idle"],
    ["import", "SEEDS"],
    ["dns", "refresh", "--once"],
])
def test_an_archive_root_that_cannot_be_made_is_one_line_with_status_1(tmp_path: Path,
                                                                         verb: list[str]) -> None:
    # A regular file where a folder of the root should be: unwritable even for root, which a
    # read-only folder is not (the tests may run as root).
    (tmp_path / "a-file").write_text("")
    config = config_at(tmp_path, tmp_path / "a-file" / "archive")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    done = archiver_here_text(*[str(seeds) if a == "SEEDS" else a for a in verb], "--config", str(config))
    assert done.returncode == 1
    line = one_line(done)
    assert line.startswith(f"archiver: {verb[0]}: {tmp_path / 'a-file' / 'archive'}")
    assert line.endswith(": Not a directory")


@pytest.mark.parametrize("verb", [
    ["why", LOOKED_UP],
    ["robots", "example.org"],
    ["export", "--url", LOOKED_UP, "-o", "OUT"],
])
def test_a_lookup_in_an_archive_not_crawled_yet_is_one_line_with_status_2(tmp_path: Path,
                                                                           verb: list[str]) -> None:
    config = config_at(tmp_path, tmp_path / "archive")
    out = tmp_path / "slice.warc.gz"
    done = archiver_here_text(*[str(out) if a == "OUT" else a for a in verb], "--config", str(config))
    assert done.returncode == 2
    assert one_line(done) == f"archiver: no catalog in {tmp_path / 'archive' / 'catalog'} (no catalog.json)"
    assert not out.exists()


def test_seed_lines_that_are_no_url_are_refused_counted_and_named(tmp_path: Path) -> None:
    config = config_at(tmp_path, tmp_path / "archive")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("not a url at all\nhttps://exa mple.com/\nexample.org  # a comment\n"
                     "mailto:someone@example.org\nhttp://good.test/\n")
    done = archiver_here_text("seeds", str(seeds), "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "seeds: 2 queued, 3 refused (see the warnings), 2 sites new to the queues\n"
    refused = [line for line in done.stderr.splitlines() if "event=bad-seed" in line]
    assert [line.split(" line=")[1].split()[0] for line in refused] == ["1", "2", "4"]
    assert all(" reason=" in line for line in refused)
    assert "refused=3" in done.stderr  # the log's count agrees
    with SiteQueue(queue_path(tmp_path / "archive", 0)) as queue:
        origins = {row.origin for row in queue.rows()}
    assert origins == {"http://example.org", "http://good.test"}


def test_an_export_does_not_overwrite_a_file_unless_forced(tmp_path: Path) -> None:
    config = str(lookup_archive(tmp_path))
    out = tmp_path / "slice.warc.gz"
    out.write_bytes(b"mine")
    refused = archiver_here_text("export", "--url", LOOKED_UP, "-o", str(out), "--config", config)
    assert refused.returncode == 2 and out.read_bytes() == b"mine"
    assert one_line(refused) == f"archiver: {out} exists: give --force to overwrite it (nothing written)"
    forced = archiver_here_text("export", "--url", LOOKED_UP, "-o", str(out), "--force", "--config", config)
    assert forced.returncode == 0 and out.read_bytes()[:2] == b"\x1f\x8b"  # a gzipped WARC


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
            ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every verb that runs (not a group of sub-verbs), with its words."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return [(path, parser)]
    return [leaf for name, sub in groups[0].choices.items() for leaf in _leaves(sub, (*path, name))]


def test_every_verb_s_help_says_what_it_does_every_argument_and_its_exit_codes() -> None:
    leaves = _leaves(cli.parser())
    assert len(leaves) >= 25
    for words, parser in leaves:
        shown = parser.format_help()
        assert parser.description, words
        assert "exit status:\n  0  " in shown and "\n  2  " in shown, words
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:  # the last release's spellings
                continue
            assert action.help, (words, action.dest)
        options = {o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS}
        assert "--config" in options or words == ("store", "migrate"), words  # --source, --target


def test_help_declares_config_json_and_the_selector_once(tmp_path: Path) -> None:
    """The shared options read the same on every verb that takes them."""
    helps: dict[str, set[str | None]] = {}
    for _words, parser in _leaves(cli.parser()):
        for action in parser._actions:
            for option in action.option_strings:
                if option in ("--config", "--url", "--prefix", "--host", "--domain"):
                    helps.setdefault(option, set()).add(action.help)
    assert all(len(texts) == 1 for texts in helps.values()), helps


def _status(config: Path) -> tuple[str, list[dict[str, object]]]:
    text = archiver_here_text("status", "--config", str(config))
    as_json = archiver_here_text("status", "--json", "--config", str(config))
    assert text.returncode == as_json.returncode == 0, text.stderr + as_json.stderr
    return text.stdout, json.loads(as_json.stdout)


def test_status_says_whether_each_crawler_is_running(tmp_path: Path) -> None:
    config = config_at(tmp_path, tmp_path / "archive")
    state = tmp_path / "archive" / "state" / "crawl-0.json"
    crawler = subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not state.exists():           # the crawler is another process: poll its status file
            assert crawler.poll() is None and time.monotonic() < deadline, crawler.stderr
            time.sleep(0.05)
        text, as_json = _status(config)
        assert text.splitlines()[0].startswith(f"process 0: running, pid {crawler.pid}, ")
        assert as_json[0]["running"] is True
    finally:
        crawler.send_signal(signal.SIGTERM)
        assert crawler.wait(timeout=60) == 0
    text, as_json = _status(config)
    assert text.splitlines()[0].startswith("process 0: stopped (last seen ")
    assert as_json[0]["running"] is False and isinstance(as_json[0]["last_seen_s"], float)
