"""Every ``archiver`` command starts a Python process: ``archiver.cli`` and the verbs that look
things up in an embedded archive must not import the crawler's, the shared stores' or the links
batch's heavy modules (see ``archiver.cli``'s docstring). Each test runs a fresh child process
and reads its ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import ROOT
from tests.support.storemodes import LOOKED_UP, lookup_archive

HEAVY = ("trio", "psycopg", "boto3", "botocore", "dask", "pyarrow", "numpy", "numba",
         "archiver.crawl.crawler", "archiver.dns.service")
PAGE = LOOKED_UP

# Runs ``archiver.cli.main(ARGS)``; prints its exit status and the heavy modules then loaded.
CHILD = f"""
import json, sys
from archiver import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps([code, [m for m in {HEAVY!r} if m in sys.modules]]))
"""


def run_cli(*args: str) -> tuple[object, list[str], str]:
    """``archiver ARGS`` in a child process: exit status, heavy modules loaded, what it printed
    before its last line."""
    done = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    *printed, last = done.stdout.splitlines()
    code, loaded = json.loads(last)
    assert done.stderr == "", done.stderr
    return code, loaded, "\n".join(printed)


def test_help_imports_nothing_heavy() -> None:
    code, loaded, printed = run_cli("--help")
    assert code == 0 and "catalog" in printed
    assert loaded == []


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config of an embedded archive with one capture of PAGE and one DNS answer."""
    return lookup_archive(tmp_path_factory.mktemp("embedded"))


@pytest.mark.parametrize(("verb", "answer"), [
    (["catalog", "closest", PAGE, "--at", "2030"], f" 200 text/html {PAGE} "),
    (["dns", "lookup", "example.org", "--at", "2030"], "address 192.0.2.7"),
    (["status"], "no crawler status in "),
])
def test_embedded_lookups_import_nothing_heavy(embedded: Path, verb: list[str], answer: str) -> None:
    code, loaded, printed = run_cli(*verb, "--config", str(embedded))
    assert code == 0 and answer in printed, printed
    assert loaded == []


def test_an_embedded_crawler_does_not_load_the_postgresql_driver(embedded: Path) -> None:
    # psycopg and the shared stores' modules cost a crawler process about 7 MiB it never uses.
    child = ("import sys\nfrom archiver import config\nfrom archiver.crawl.crawler import Crawler\n"
             "crawler = Crawler(config.load(sys.argv[1]))\ncrawler.close()\n"
             "print(sorted(m for m in ('psycopg', 'boto3', 'dask') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", child, str(embedded)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout + done.stderr


def test_a_links_run_with_nothing_to_read_does_not_load_the_compiled_loops(tmp_path: Path) -> None:
    # numba costs 0.45 s and 135 MiB to load: only a run with spool files to read needs it.
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n[log]\nlevel = "warning"\n')
    code, loaded, printed = run_cli("links", "run", "--once", "--config", str(path))
    assert code == 0 and "links: 0 files" in printed, printed
    assert "numba" not in loaded and "pyarrow" in loaded


def test_a_links_run_leaves_its_objects_frozen_for_a_quick_exit(tmp_path: Path) -> None:
    # Python's last collection at exit would walk every object the batch's modules made.
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n[log]\nlevel = "warning"\n')
    child = ("import gc, sys\nfrom archiver import cli\ncode = cli.main(sys.argv[1:])\n"
             "print(code, gc.get_freeze_count() > 10_000)")
    done = subprocess.run([sys.executable, "-c", child, "links", "run", "--once", "--config",
                           str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.splitlines()[-1] == "0 True", done.stdout


def test_the_links_batch_keeps_blas_to_one_thread(tmp_path: Path) -> None:
    # The batch never calls BLAS; numpy's OpenBLAS threads would spin 0.1 s of CPU as it loads.
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n[log]\nlevel = "warning"\n')
    child = ("import json, sys\nfrom archiver import cli\ncode = cli.main(sys.argv[1:])\n"
             "from threadpoolctl import threadpool_info\n"
             "print(json.dumps([code, [pool['num_threads'] for pool in threadpool_info()"
             " if pool['internal_api'] == 'openblas']]))")
    env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", child, "links", "run", "--once", "--config",
                           str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    code, threads = json.loads(done.stdout.splitlines()[-1])
    assert code == 0 and threads and set(threads) == {1}, done.stdout


@pytest.mark.parametrize(("files", "loaded"), [([], False), (["0-20261122000000-00001.tsv"], True)])
def test_the_compiled_loops_load_ahead_only_with_spool_files_to_read(
        tmp_path: Path, files: list[str], loaded: bool) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "0-20261122000000-00002.tsv.open").write_text("")  # still written: nothing to read
    for name in files:
        (spool / name).write_text("")
    child = ("import json, sys\nfrom pathlib import Path\n"
             "from archiver.links import compiled_loops_ahead\n"
             "from archiver.queues.spool import SpoolDirectory\n"
             "with compiled_loops_ahead(SpoolDirectory(Path(sys.argv[1]))):\n    pass\n"
             "kernels = sys.modules.get('archiver.queues.bloomkernel')\n"
             "print(json.dumps(kernels is not None and all(k.signatures for k in ("
             "kernels._murmur3_x64_128, kernels._murmur3_pairs, kernels.test_and_set,"
             " kernels._origin_lengths, kernels._first_appearances))))")
    done = subprocess.run([sys.executable, "-c", child, str(spool)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout) is loaded, done.stderr


def test_a_spool_folder_that_cannot_be_listed_loads_nothing_ahead_and_raises_nothing(
        tmp_path: Path) -> None:
    spool = tmp_path / ("x" * 300)  # listing it fails: "File name too long"
    child = ("import sys\nfrom pathlib import Path\nfrom archiver.links import compiled_loops_ahead\n"
             "from archiver.queues.spool import SpoolDirectory\n"
             "with compiled_loops_ahead(SpoolDirectory(Path(sys.argv[1]))):\n    pass\n"
             "print('archiver.queues.bloomkernel' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", child, str(spool)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False", done.stderr


def test_loading_the_compiled_loops_skips_numba_s_blas_probe_and_leaves_scipy_importable() -> None:
    # numba imports scipy.linalg (0.15-0.2 s) to probe for BLAS, which no loop uses.
    child = ("import sys\nfrom archiver.links import steps\nsteps.load_kernels()\n"
             "skipped = 'scipy.linalg' not in sys.modules and steps.BLAS_PROBE not in sys.modules\n"
             "import scipy.linalg.cython_blas\nprint(skipped)")
    done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "True", done.stderr
