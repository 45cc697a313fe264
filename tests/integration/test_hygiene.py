"""Terminal and file hygiene: archived bytes do not reach a terminal unasked, and what archiver
creates is not world-readable."""

from __future__ import annotations

import os
import pty
import stat
import subprocess

import trio

from tests.support.crawls import write_config
from tests.support.onesite import Answer, OneSite
from tests.support.repo import ARCHIVER


async def crawl_cli(tmp_path, site: OneSite) -> None:
    async with trio.open_nursery() as nursery:
        await site.serve(nursery)
        path = write_config(tmp_path, site)
        (tmp_path / "seeds.txt").write_text(site.origin + "/\n")
        old = os.umask(0o022)                         # what a login shell has
        try:
            await trio.run_process([*ARCHIVER, "crawl", "run", "--config", str(path), "--seeds",
                                    str(tmp_path / "seeds.txt"), "--until-idle"],
                                   capture_stderr=True)
        finally:
            os.umask(old)
        nursery.cancel_scope.cancel()


def run_on_terminal(args: list[str]) -> tuple[int, bytes]:
    """Run a command with a pseudo-terminal as its standard output; (status, what it showed)."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(args, stdout=follower, stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(follower)
    shown = b""
    try:
        while chunk := os.read(leader, 65536):
            shown += chunk
    except OSError:                                   # EIO: the terminal's other end is closed
        pass
    os.close(leader)
    return done.returncode, shown


async def test_archive_modes_and_catalog_get_on_a_terminal(tmp_path):
    def escape_page(target: str, now: float) -> Answer | None:
        return Answer(200, b"<p>\x1b]0;owned\x07\x1b[2J</p>") if target == "/p1.html" else None

    site = OneSite(pages=2, gate=escape_page)
    await crawl_cli(tmp_path, site)
    root = tmp_path / "archive"
    entries = list(root.rglob("*"))
    assert entries
    for entry in entries:
        mode = stat.S_IMODE(entry.lstat().st_mode)
        assert mode & 0o007 == 0, (entry, oct(mode))  # nothing for others
        if entry.is_dir():
            assert mode == 0o750, (entry, oct(mode))

    config = str(tmp_path / "archiver.toml")
    get = [*ARCHIVER, "catalog", "get", "--config", config, "--at", "2100"]
    status, shown = run_on_terminal([*get, site.origin + "/p1.html"])
    assert status == 2 and b"\x1b" not in shown
    status, shown = run_on_terminal([*get, site.origin + "/p2.html"])
    assert status == 0 and b"page /p2.html" in shown  # text is shown
    out = tmp_path / "p1.html"
    status, _ = run_on_terminal([*get, site.origin + "/p1.html", "-o", str(out)])
    assert status == 0 and b"\x1b[2J" in out.read_bytes()
    piped = subprocess.run([*get, site.origin + "/p1.html"], capture_output=True, timeout=60,
                           check=False)
    assert piped.returncode == 0 and b"\x1b[2J" in piped.stdout   # a pipe gets the bytes
