"""The two kinds of test: everything under tests/integration carries the ``integration`` marker
(``pytest -m "not integration"`` runs the fast set), and a test under tests/unit may neither use a
socket nor start a process, so one put in the wrong folder fails loudly instead of slowing the set.
The fast set runs the fuzz and property tests at a tenth of their examples
(ARCHIVER_FUZZ_SCALE=0.1, unless set); the full suite, which CI runs, at full count. Temporary files
live in memory (/dev/shm) unless TMPDIR names a folder."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
INTEGRATION = TESTS / "integration"
UNIT = TESTS / "unit"


# A memory file system for the tests' files, if the machine has one with room to spare.
MEMORY = Path("/dev/shm")
MEMORY_ROOM = 2 * 2**30


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module is imported (tests/support/fuzzing.py reads the scale at import)."""
    if config.getoption("markexpr") == "not integration":
        os.environ.setdefault("ARCHIVER_FUZZ_SCALE", "0.1")
    _temporary_files_in_memory()
    _property_tests_at_scale()


def _property_tests_at_scale() -> None:
    """Property tests that name no example count run hypothesis's 100 times ARCHIVER_FUZZ_SCALE,
    as those that name one run theirs through ``examples``. No per-example deadline: a timed
    assertion fails on a loaded machine, and costs are checked as ratios (tests/support/fuzzing)."""
    from hypothesis import settings

    from tests.support.fuzzing import examples

    settings.register_profile("archiver", max_examples=examples(100), deadline=None)
    settings.load_profile("archiver")


def _temporary_files_in_memory() -> None:
    """Temporary files (``tmp_path``, the test PostgreSQL server's data folder, those of child
    processes) go to /dev/shm unless TMPDIR says where: on a virtual disk every file created,
    fsynced and deleted costs a millisecond or more (a database made for a test, half a second),
    and no test can tell a memory file system from a disk (none survives a power cut; a kill -9
    leaves the page cache to both alike)."""
    if "TMPDIR" in os.environ or not MEMORY.is_dir() or not os.access(MEMORY, os.W_OK | os.X_OK):
        return
    room = os.statvfs(MEMORY)
    if room.f_bavail * room.f_frsize < MEMORY_ROOM:
        return
    os.environ["TMPDIR"] = str(MEMORY)
    tempfile.tempdir = None  # gettempdir() looks again, and finds TMPDIR


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast set does not import tests/integration only to deselect every test in it."""
    if collection_path == INTEGRATION and config.getoption("markexpr") == "not integration":
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.integration)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (modules, test functions, their data: some 200,000 objects) lives
    until the end, so the garbage collector stops tracing it: a full collection then costs
    milliseconds instead of a fifth of a second, and the fuzz tests' cost checks start with one."""
    gc.collect()
    gc.freeze()


class NotAUnitTest(AssertionError):
    """A test under tests/unit reached for the network or another process."""


def _refuse(what: str) -> Callable[..., None]:
    def refused(*args: object, **kwargs: object) -> None:
        raise NotAUnitTest(f"a unit test may not {what}: it belongs under tests/integration")

    return refused


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Around a unit test's setup, call and teardown (its module fixtures included): no sockets
    connected, bound or sent from, no child processes."""
    if UNIT not in item.path.parents:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        for method in ("connect", "connect_ex", "bind", "sendto"):
            patch.setattr(socket.socket, method, _refuse(f"use a socket ({method})"))
        patch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
        patch.setattr(os, "fork", _refuse("fork"))
        patch.setattr(os, "posix_spawn", _refuse("start a process"))
        yield
