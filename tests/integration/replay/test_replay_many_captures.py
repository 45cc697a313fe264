"""Replay's memory when one URL has 200,000 captures: ``archiver replay`` runs in a process of its
own over a generated catalog (tests/support/manycaptures.py), and each request's growth of its
peak RSS (VmHWM, reset through /proc/<pid>/clear_refs before the request) stays within a bound
that does not depend on the captures: a memento and a revisit, the TimeGate, both TimeMaps and
the calendar read by index seeks and one page; the URL list counts a URL's captures one by one.
Loading every capture, as replay did, grew it by 86 MiB (the TimeGate) to 240 MiB (the JSON
TimeMap, the calendar) per request at this size; reading a page, a JSON TimeMap of 10,000
mementos grows it by about 8 MiB and the rest by less."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.support.manycaptures import URL, stamp, write_many_captures
from tests.support.rawhttp import get
from tests.support.repo import ROOT

CAPTURES = 200_000
# Peak RSS growth allowed per request: a TimeMap page of 10,000 mementos takes about 10 MiB.
BOUND = 32 * 2**20
CONFIG = """\
[archive]
root = "archive"
[replay]
listen = "127.0.0.1:0"
content_listen = "127.0.0.1:0"
[log]
level = "warning"
"""


class Replay:
    """``archiver replay`` in a child process: its two origins and its memory."""

    def __init__(self, process: subprocess.Popen[bytes], app: str, content: str) -> None:
        self.process = process
        self.app = app
        self.content = content

    def _field(self, name: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(name)

    def growth(self, origin: str, path: str) -> tuple[int, int, bytes]:
        """(status, peak RSS growth in bytes, body) of one GET."""
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = self._field("VmRSS")
        status, _, body = trio.run(get, origin, path)
        return status, self._field("VmHWM") - before, body


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    directory = tmp_path_factory.mktemp("many")
    write_many_captures(directory / "archive", CAPTURES)
    (directory / "archiver.toml").write_text(CONFIG)
    errors = directory / "stderr"
    with errors.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "archiver", "replay", "run", "--config",
                                    str(directory / "archiver.toml")],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        while len(found := re.findall(r"Running on (http://127\.0\.0\.1:\d+)", errors.read_text())) < 2:
            assert process.poll() is None and time.monotonic() < deadline, errors.read_text()
            time.sleep(0.05)
        yield Replay(process, *found)  # the replay's own pages start first, then content
    finally:
        process.terminate()
        process.wait(30)


def test_replay_memory_does_not_grow_with_a_urls_captures(replay: Replay) -> None:
    middle = CAPTURES // 2 // 10 * 10
    requests = {
        "memento": (replay.content, f"/web/{stamp(middle)}/{URL}"),
        "revisit": (replay.content, f"/web/{stamp(middle + 9)}/{URL}"),
        "timegate": (replay.app, f"/web/{URL}"),
        "timemap link": (replay.app, f"/timemap/link/{URL}"),
        "timemap json": (replay.app, f"/timemap/json/{URL}"),
        "calendar": (replay.app, f"/web/*/{URL}"),
        "url list": (replay.app, f"/web/*/{URL}*"),
    }
    for origin, path in requests.values():  # once first: templates, caches, imports
        replay.growth(origin, path)
    grown = {}
    for name, (origin, path) in requests.items():
        status, growth, body = replay.growth(origin, path)
        assert status == (302 if name == "timegate" else 200), (name, body[:300])
        grown[name] = growth
    shown = ", ".join(f"{name} {growth / 2**20:.1f} MiB" for name, growth in grown.items())
    assert all(growth <= BOUND for growth in grown.values()), shown
