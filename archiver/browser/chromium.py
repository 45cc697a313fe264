"""The distribution's Chromium, headless, started and supervised by us.

:func:`supervised` yields a :class:`Supervisor`; its :meth:`Supervisor.devtools` gives the running
browser's DevTools connection, starting a browser first when none runs (the first call, or after a
crash, a kill or :meth:`Supervisor.restart`). Each browser runs as one task of the supervisor's
nursery, with a fresh profile (``--user-data-dir``) in a temporary folder, DevTools on a port the
kernel picks (``--remote-debugging-port=0``, read back from ``<profile>/DevToolsActivePort``),
and in its own process group: stopping it asks it to close, kills the group after a grace period,
and removes the folder. :meth:`Supervisor.memory` is the resident memory of the browser's whole
process tree, so a caller can restart it past a limit.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import trio

from archiver.browser.devtools import DevTools, DevToolsError, connect

log = logging.getLogger(__name__)

EXECUTABLE = "chromium"  # Debian's and Ubuntu's package, found on PATH
# Chromium reaches out on its own (component updates, field trials, Translate, optimisation hints,
# cast discovery...): these switches turn off what they can.
QUIET_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
    "AutofillServerCommunication",
)
# The host resolver rule makes every name fail to resolve inside Chromium, so what the switches
# miss (the time, sign-in state) goes nowhere: the pages it renders get every byte from us,
# through the DevTools Fetch domain.
FLAGS = (*QUIET_FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND")
STARTUP = 20.0  # seconds for Chromium to open its DevTools port (a cold start takes ~0.3 s)
GRACE = 5.0  # seconds for Chromium to exit once asked, before its process group is killed
_STDERR_KEPT = 8192  # the last bytes of the browser's stderr, for the error when it fails to start
_PAGE = os.sysconf("SC_PAGE_SIZE")


class BrowserError(Exception):
    """The browser could not be started."""


def tree_memory(root: int, proc: Path = Path("/proc")) -> int:
    """Resident bytes of process ``root`` and all its descendants (0 if it is gone). The tree is
    walked down its threads' ``children`` files; a kernel without them (CONFIG_PROC_CHILDREN) is
    read whole, every process's parent from its ``stat``."""
    if not (proc / str(root) / "task").is_dir() or not any(
            (task / "children").exists() for task in _tasks(proc, root)):
        return _scanned_tree_memory(root, proc)
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        resident = _resident(proc, pid)
        if resident is None:
            continue  # ended while we looked
        total += resident
        for task in _tasks(proc, pid):
            with suppress(OSError, ValueError):
                todo.extend(int(child) for child in (task / "children").read_text().split())
    return total


def _tasks(proc: Path, pid: int) -> list[Path]:
    try:
        return list((proc / str(pid) / "task").iterdir())
    except OSError:
        return []


def _resident(proc: Path, pid: int) -> int | None:
    try:
        return int((proc / str(pid) / "statm").read_text().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _scanned_tree_memory(root: int, proc: Path) -> int:
    """``tree_memory`` from every process's parent (reads the whole of /proc)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended while we looked
        parent = int(stat.rpartition(")")[2].split()[1])  # the command name may hold ") "
        children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _resident(proc, pid) or 0
        todo.extend(children.get(pid, ()))
    return total


@dataclass
class _Browser:
    """One running browser: its process, profile and DevTools connection."""

    process: trio.Process
    folder: Path
    devtools: DevTools
    stop: trio.Event = field(default_factory=trio.Event)
    ended: trio.Event = field(default_factory=trio.Event)


class Supervisor:
    """Starts a browser on demand, notices when it dies, and stops it."""

    def __init__(self, nursery: trio.Nursery, executable: str = EXECUTABLE, args: Sequence[str] = (),
                 startup: float = STARTUP, grace: float = GRACE) -> None:
        self._nursery = nursery
        self._executable = executable
        self._args = tuple(args)
        self._startup = startup
        self._grace = grace
        self._browser: _Browser | None = None
        self._starting = trio.Lock()
        self.starts = 0  # browsers started so far

    def running(self) -> bool:
        return self._browser is not None and not self._browser.ended.is_set()

    async def devtools(self) -> DevTools:
        """The running browser's DevTools connection; a new browser if none runs."""
        async with self._starting:
            if not self.running() or self._browser is None or self._browser.devtools.closed:
                await self.stop()
                self._browser = await self._nursery.start(self._run)
            assert self._browser is not None
            return self._browser.devtools

    async def exited(self, within: float) -> bool:
        """Whether the browser has exited, or exits within ``within`` seconds (a page's
        connection that broke: did the browser crash?)."""
        browser = self._browser
        if browser is None:
            return True
        with trio.move_on_after(within):
            await browser.ended.wait()
        return browser.ended.is_set()

    def pid(self) -> int | None:
        """The running browser's process id."""
        return self._browser.process.pid if self.running() and self._browser else None

    def memory(self) -> int:
        """Resident bytes of the running browser's process tree (0 when none runs)."""
        pid = self.pid()
        return tree_memory(pid) if pid is not None else 0

    async def restart(self) -> DevTools:
        """Stop the browser and start a new one (past a memory limit, say)."""
        await self.stop()
        return await self.devtools()

    async def stop(self) -> None:
        """Stop the running browser, if any, and wait until it is gone and its profile removed."""
        browser, self._browser = self._browser, None
        if browser is not None:
            browser.stop.set()
            await browser.ended.wait()

    async def _run(self, task_status: trio.TaskStatus[_Browser] = trio.TASK_STATUS_IGNORED) -> None:
        """Start a browser, hand it over, and supervise it until it exits or is stopped."""
        folder = Path(tempfile.mkdtemp(prefix="archiver-chromium-"))
        profile = folder / "profile"
        env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "config"),
               "XDG_CACHE_HOME": str(folder / "cache")}
        command = [self._executable, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                   *self._args, "about:blank"]
        try:
            process = await trio.lowlevel.open_process(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, env=env)
        except OSError as error:
            shutil.rmtree(folder, ignore_errors=True)
            raise BrowserError(f"cannot start {self._executable}: {error}") from error
        self.starts += 1
        stderr = bytearray()
        ended = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process, stderr)
                url = await self._address(process, profile, stderr)
                async with connect(url) as devtools:
                    browser = _Browser(process, folder, devtools, ended=ended)
                    task_status.started(browser)
                    nursery.start_soon(_wait_exit, process, browser.stop)
                    await browser.stop.wait()
                    if process.returncode is None:
                        with trio.move_on_after(self._grace), suppress(DevToolsError):
                            await devtools.send("Browser.close", timeout=self._grace)
                            await process.wait()
                    else:
                        log.warning("chromium exited with %s", process.returncode)
                    nursery.cancel_scope.cancel()
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await process.wait()
                await trio.to_thread.run_sync(shutil.rmtree, folder, True)
            ended.set()

    async def _address(self, process: trio.Process, profile: Path, stderr: bytearray) -> str:
        """The DevTools websocket URL Chromium writes to DevToolsActivePort once it listens."""
        active = profile / "DevToolsActivePort"
        with trio.move_on_after(self._startup):
            while process.returncode is None:
                with suppress(FileNotFoundError):
                    lines = active.read_text().split("\n")
                    if len(lines) >= 2 and lines[0].isdigit() and lines[1].startswith("/devtools/"):
                        return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
                # Chromium writes the file once, with no signal a trio task could wait for.
                await trio.sleep(0.02)
        tail = stderr.decode(errors="replace")[-2000:]
        raise BrowserError(f"{self._executable} did not open its DevTools port "
                           f"(exit {process.returncode}):\n{tail}")


async def _drain(process: trio.Process, into: bytearray) -> None:
    """Keep reading the browser's stderr (so that it never blocks on a full pipe), keeping the end."""
    assert process.stderr is not None
    while data := await process.stderr.receive_some(1 << 16):
        into += data
        del into[:-_STDERR_KEPT]


async def _wait_exit(process: trio.Process, stop: trio.Event) -> None:
    """Notice the browser's exit (a crash or a kill): it is then stopped for good."""
    await process.wait()
    stop.set()


@asynccontextmanager
async def supervised(executable: str = EXECUTABLE, args: Sequence[str] = (), startup: float = STARTUP,
                     grace: float = GRACE) -> AsyncIterator[Supervisor]:
    """A supervisor whose browsers run in this block; the last is stopped on exit."""
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(nursery, executable, args, startup, grace)
        try:
            yield supervisor
        finally:
            with trio.CancelScope(shield=True):
                await supervisor.stop()
