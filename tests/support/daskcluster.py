"""A Dask cluster on 127.0.0.1 for the links batch's Dask engine: a LocalCluster of two worker
processes, and a way to kill -9 the worker that is reading a given file."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distributed import Client, LocalCluster

_DEADLINE = 30.0


@contextmanager
def local_cluster(workers: int = 2) -> Iterator[Client]:
    """A LocalCluster of ``workers`` one-thread processes and a client of it."""
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def worker_pids(client: Client) -> list[int]:
    return sorted(client.run(os.getpid).values())


def holders(path: Path, pids: list[int]) -> list[int]:
    """The processes among ``pids`` that have ``path`` open."""
    found = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    found.append(pid)
                    break
            except FileNotFoundError:
                pass
    return found


def kill_and_wait(pid: int) -> None:
    """kill -9 a process that is not our child, and wait until the kernel has closed its files
    (it is gone or a zombie)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _DEADLINE
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} still running {_DEADLINE} s after SIGKILL")
        time.sleep(0.01)  # polling with a deadline: a non-child's death sends us nothing
