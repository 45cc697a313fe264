"""``archiver replay`` in a process of its own, for the tests that measure it from outside."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from tests.support.repo import ROOT


@dataclass
class ReplayProcess:
    """A running replay: its own pages' origin, archived content's, its pid and its log so far."""

    app: str
    content: str
    pid: int
    log: bytearray = field(default_factory=bytearray)


@asynccontextmanager
async def replay_process(config: Path, *, wrapper: Sequence[str] = ()) -> AsyncIterator[ReplayProcess]:
    """``archiver replay --config config`` (run by ``wrapper``, a command that runs the rest, if
    given), once both listeners run (Hypercorn reports the replay's pages first, then content);
    its log is read meanwhile into ``log``. Killed at the end."""
    process = await trio.lowlevel.open_process(
        [*wrapper, sys.executable, "-m", "archiver", "replay", "run", "--config", str(config)],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert process.stderr is not None
    stderr = process.stderr
    try:
        log = bytearray()
        with trio.fail_after(60):  # a guard against a hang, not a speed target
            while len(found := re.findall(rb"Running on (http://127\.0\.0\.1:\d+)", log)) < 2:
                chunk = await stderr.receive_some()
                assert chunk, bytes(log)
                log += chunk
        running = ReplayProcess(found[0].decode(), found[1].decode(), process.pid, log)

        async def keep_reading() -> None:
            while chunk := await stderr.receive_some():
                running.log += chunk

        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_reading)
            yield running
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        await process.wait()
