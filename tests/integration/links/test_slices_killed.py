"""The batch killed (SIGKILL) between its slices' saves and its commit, and a reshard killed midway:
the next run finds the state of the last commit, and gives what one clean run gives."""

from __future__ import annotations

import signal
import subprocess
import sys
from functools import partial

from archiver.links.batch import run_batch
from tests.support.linkbatch import links_config, snapshot, synthetic_spool, with_slices, write_spool
from tests.support.repo import ARCHIVER, ROOT

# The batch's command, in a child that kills itself at the start of its second commit: after the
# engine saved every slice of that checkpoint and the inboxes were appended, before the transaction.
KILLED_AT_COMMIT = """
import os, signal, sys
from archiver import cli
from archiver.queues.embedded.linksstate import EmbeddedLinksState
commit = EmbeddedLinksState.commit
def killed(self, generation, *args, **kwargs):
    if generation == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return commit(self, generation, *args, **kwargs)
EmbeddedLinksState.commit = killed
sys.exit(cli.main(sys.argv[1:]))
"""


def links(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, "links", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_batch_killed_between_its_slice_saves_and_its_commit_reruns_to_one_clean_run(tmp_path):
    clean, killed = links_config(tmp_path / "clean"), links_config(tmp_path / "killed")
    synthetic_spool(partial(write_spool, clean.root), files=4)
    synthetic_spool(partial(write_spool, killed.root), files=4)
    run_batch(clean, once=True)
    died = subprocess.run([sys.executable, "-c", KILLED_AT_COMMIT, "links", "run", "--once",
                           "--config", str(killed.path)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)
    assert died.returncode == -signal.SIGKILL, died.stderr
    names = {p.name for p in (killed.root / "links").glob("*.bloom")}
    # Both generations of every slice, the second saved, never committed; and maybe the third, of
    # the checkpoint whose steps ran beside that commit.
    saved = {g: {f"slice-{p}of4-{g}.bloom" for p in range(4)} for g in (1, 2, 3)}
    assert saved[1] | saved[2] <= names <= saved[1] | saved[2] | saved[3]
    rerun = links("run", "--once", "--config", str(killed.path))
    assert rerun.returncode == 0, rerun.stderr
    assert snapshot(killed.root, 2) == snapshot(clean.root, 2)
    assert sorted(p.name for p in (killed.root / "links").glob("*.bloom")) == \
        sorted(p.name for p in (clean.root / "links").glob("*.bloom"))


def test_a_reshard_killed_midway_leaves_the_old_slices_and_runs_again_from_the_start(tmp_path):
    cfg = links_config(tmp_path / "resharded", slices=2)
    fresh = links_config(tmp_path / "fresh", slices=3)
    synthetic_spool(partial(write_spool, cfg.root), files=5)
    run_batch(cfg, once=True)
    before = {p.name: p.read_bytes() for p in (cfg.root / "links").glob("*.bloom")}
    proc = subprocess.Popen([*ARCHIVER, "links", "reshard", "--slices", "3", "--config",
                             str(cfg.path)], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:                      # wait for the rebuild to be under way, then kill
        if "links-reshard-progress" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with_slices(cfg, 3)
    run = links("run", "--once", "--config", str(cfg.path))    # the old layout is in force
    assert run.returncode == 0, run.stderr
    assert "the links state has 2 slices and links.slices says 3" in run.stderr
    assert {p.name: p.read_bytes() for p in (cfg.root / "links").glob("*.bloom")} == before
    again = links("reshard", "--slices", "3", "--config", str(cfg.path))
    assert again.returncode == 0, again.stderr
    assert "links reshard: 3 slices rebuilt from 5 spool files, 7500 URLs read" in again.stdout
    synthetic_spool(partial(write_spool, cfg.root), files=7, first=5)
    synthetic_spool(partial(write_spool, fresh.root), files=7)
    run = links("run", "--once", "--config", str(cfg.path))
    assert run.returncode == 0, run.stderr
    assert "links.slices" not in run.stderr
    run_batch(fresh, once=True)
    assert snapshot(cfg.root, 2) == snapshot(fresh.root, 2)


def test_a_reshard_missing_files_is_refused_with_what_to_do(tmp_path):
    cfg = links_config(tmp_path)
    synthetic_spool(partial(write_spool, cfg.root), files=2)
    run_batch(cfg, once=True)
    for done in (cfg.root / "spool" / "done").iterdir():
        done.unlink()                             # the operator pruned them
    refused = links("reshard", "--slices", "2", "--config", str(cfg.path))
    assert refused.returncode == 1
    assert "2 of the 2 spool files the ledger lists are no longer in" in refused.stderr
    assert "--allow-missing" in refused.stderr
    bad = links("reshard", "--slices", "0", "--config", str(cfg.path))
    assert bad.returncode == 2 and "must be 1 to 16777216" in bad.stderr
