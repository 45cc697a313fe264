"""The repository the tests run from, the archiver command they start as a child process, and the
same command run inside the test process."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHIVER = [sys.executable, "-m", "archiver"]


def archiver_here(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``archiver ARGS`` run by ``archiver.cli.main`` in this process: its exit status and the
    bytes it wrote to stdout and stderr, as a child's would be, without a child's second of
    start-up. For tests that run a verb many times (each verb is run as a child elsewhere); the
    umask ``main`` sets, and the ``archiver`` logger ``logs.setup`` sets up, are put back."""
    from archiver import cli

    out, err = (io.TextIOWrapper(io.BytesIO(), write_through=True) for _ in range(2))
    umask = os.umask(0o022)
    os.umask(umask)
    logger = logging.getLogger("archiver")
    handlers, propagate, level = list(logger.handlers), logger.propagate, logger.level
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as e:
                code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    finally:
        os.umask(umask)
        logger.handlers[:], logger.propagate, logger.level = handlers, propagate, level
    stdout, stderr = (stream.buffer.getvalue() for stream in (out, err))
    return subprocess.CompletedProcess(["archiver", *args], code, stdout, stderr)


def archiver_here_text(*args: str) -> subprocess.CompletedProcess[str]:
    """``archiver_here``, its output decoded as a child's run with ``text=True`` would be."""
    done = archiver_here(*args)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())
