"""The external-link batch (archiver.links.batch), its engines and its steps."""

from __future__ import annotations

import os


def quiet_blas() -> None:
    """Keep BLAS to one thread in this process and those it starts, unless the environment says
    otherwise: the batch never calls BLAS, and the idle threads of numpy's and scipy's OpenBLAS
    spin about 0.1 s of CPU per library as it loads, beside the batch's first reads. Call it
    before numpy loads (scipy's loads with the compiled loops, later)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
