"""The two kinds of test: everything under tests/integration carries the ``integration`` marker
(``pytest -m "not integration"`` runs the fast set), and a test under tests/unit may neither use a
socket nor start a process, so one put in the wrong folder fails loudly instead of slowing the set.
The fast set runs the fuzz tests at a tenth of their examples (ARCHIVER_FUZZ_SCALE=0.1,
unless set); the full suite, which CI runs, at full count."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
INTEGRATION = TESTS / "integration"
UNIT = TESTS / "unit"


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module is imported (tests/support/fuzzing.py reads the scale at import)."""
    if config.getoption("markexpr") == "not integration":
        os.environ.setdefault("ARCHIVER_FUZZ_SCALE", "0.1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.integration)


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
