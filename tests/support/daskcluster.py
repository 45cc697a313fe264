"""A Dask cluster on 127.0.0.1 for the links batch's Dask engine: a LocalCluster of two worker
processes, a worker plugin that holds one task at its start (once), kill -9 for a worker, and the
clean-up of the semaphores a cluster killed -9 leaves in /dev/shm."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distributed import Client, LocalCluster, WorkerPlugin

_DEADLINE = 30.0
_SHM = Path("/dev/shm")


@contextmanager
def local_cluster(workers: int = 2) -> Iterator[Client]:
    """A LocalCluster of ``workers`` one-thread processes and a client of it."""
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


class HoldOnce(WorkerPlugin):
    """Holds the first task whose key starts with ``prefix`` as it starts executing, on whichever
    worker gets it: writes that worker's pid to ``marker`` and blocks the worker until it is killed
    (or the deadline passes). Installed on every worker, restarted ones too; holds one task only."""

    def __init__(self, prefix: str, marker: Path) -> None:
        self.prefix = prefix
        self.marker = marker

    def transition(self, key: object, start: str, finish: str, **kwargs: object) -> None:
        if finish != "executing" or not str(key).startswith(self.prefix):
            return
        try:
            fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return  # held once already
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        time.sleep(_DEADLINE)  # a held worker: the test kills it


def wait_for_marker(marker: Path) -> int:
    """The pid a ``HoldOnce`` plugin wrote, once it is there."""
    deadline = time.monotonic() + _DEADLINE
    while True:
        try:
            text = marker.read_text()
        except FileNotFoundError:
            text = ""
        if text:
            return int(text)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no task was held within {_DEADLINE} s")
        time.sleep(0.01)  # polling with a deadline: the worker's process signals nothing


def worker_pids(client: Client) -> list[int]:
    return sorted(client.run(os.getpid).values())


def kill_and_wait(pid: int) -> None:
    """kill -9 a process that is not our child, and wait until the kernel has closed its files
    (it is gone or a zombie)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _DEADLINE
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # (reaped before, or while, it was read)
            return
        if state in ("Z", "X"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} still running {_DEADLINE} s after SIGKILL")
        time.sleep(0.01)  # polling with a deadline: a non-child's death sends us nothing


@contextmanager
def removing_semaphores_of_the_killed() -> Iterator[None]:
    """Remove the multiprocessing semaphores (``/dev/shm/sem.mp-*``) made inside the block that no
    live process holds once it ends: those of processes killed -9 with their resource tracker, which
    nothing else would remove (a machine that stops loses /dev/shm; a test machine does not)."""
    before = set(_SHM.glob("sem.mp-*"))
    try:
        yield
    finally:
        held = set()
        for maps in Path("/proc").glob("[0-9]*/maps"):
            try:
                held.update(line.split(maxsplit=5)[-1].strip() for line in maps.read_text().splitlines()
                            if "/dev/shm/sem.mp-" in line)
            except OSError:  # gone meanwhile, or not ours to read
                continue
        for semaphore in set(_SHM.glob("sem.mp-*")) - before:
            if str(semaphore) not in held:
                semaphore.unlink(missing_ok=True)
