"""config/dask-worker.yaml, the Dask configuration for the machines that run the batch's workers:
it unsets the variable the LocalCluster of ``links run`` unsets, and keeps Dask's other ones."""

from __future__ import annotations

import dask
from distributed.nanny import _get_env_variables

from archiver.links.dask_engine import _TRIM
from tests.support.repo import ROOT


def test_the_shipped_worker_config_keeps_glibcs_own_malloc_thresholds():
    shipped = dask.config.collect(paths=[str(ROOT / "config")], env={})
    assert dask.config.get(_TRIM, config=shipped) is None
    environ = _TRIM.rsplit(".", 1)[0]
    with dask.config.set(dask.config.merge(dask.config.config, shipped)):
        workers = _get_env_variables(environ)
    before = _get_env_variables(environ)
    assert "MALLOC_TRIM_THRESHOLD_" in before and "MALLOC_TRIM_THRESHOLD_" not in workers
    assert workers == {k: v for k, v in before.items() if k != "MALLOC_TRIM_THRESHOLD_"}
