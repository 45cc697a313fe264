"""The external-link batch (archiver.links.batch), its engines and its steps."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archiver.queues.interfaces import SpoolFiles

log = logging.getLogger("archiver.links")


def quiet_blas() -> None:
    """Keep BLAS to one thread in this process and those it starts, unless the environment says
    otherwise: the batch never calls BLAS, and the idle threads of numpy's OpenBLAS spin about
    0.1 s of CPU as it loads, beside the batch's first reads (scipy's, as much, if it loads).
    Call it before numpy loads."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@contextlib.contextmanager
def compiled_loops_ahead(spool: SpoolFiles | None) -> Iterator[None]:
    """Load the batch's compiled loops (``steps.load_kernels``) in a thread while the batch's
    modules import and its stores open, if ``spool`` (None: not looked at) holds closed files to
    read (a run with none never loads numba); the engine's first read waits for them. The thread
    is joined on exit. A load that fails here fails again, and is reported, at the engine's first
    checkpoint."""
    try:
        to_read = spool is not None and bool(spool.closed())
    except OSError:  # (unreadable: the batch meets it, and reports it, as it starts)
        to_read = False
    if not to_read:
        yield
        return

    def load() -> None:
        from archiver.links.steps import load_kernels

        try:
            load_kernels()
        except Exception as e:  # (the engine loads them again, and reports it)
            log.debug("compiled loops not loaded ahead: %s", e)

    loading = threading.Thread(target=load, name="links-kernels")
    loading.start()
    try:
        yield
    finally:
        loading.join()
