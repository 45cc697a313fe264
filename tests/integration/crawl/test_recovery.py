"""Crash recovery killed at any step (in a forked child) and run again gives the same state."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from archiver.config import Config
from archiver.queues.embedded.crawlqueue import LOG, queue_dir
from archiver.store.bundles import BundleWriter
from archiver.store.embedded.catalog import Catalog
from tests.support.recoveryscene import SITE, config_for, page, queue, run, state


def scene(root: Path) -> Config:
    """Two sites' queues and what a killed crawler left: records past the cursors, a torn tail."""
    config = config_for(root)
    other = "http://b.test"
    queue(config, SITE, [(f"{SITE}/{n}", 1) for n in range(5)])
    queue(config, other, [(f"{other}/{n}", 1) for n in range(4)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    for n in (0, 1, 3):
        page(writer, f"{SITE}/{n}", f'<a href="/new{n}">x</a> <a href="{other}/x">b</a>'.encode())
    page(writer, f"{other}/0", status=429)
    for n in (1, 2):
        page(writer, f"{other}/{n}", f'<a href="/new{n}">x</a>'.encode())
    assert writer.current_path is not None
    with writer.current_path.open("ab") as f:
        f.write(b"\x1f\x8b\x08\x00torn")                # a record cut short by the kill
    return config


def snapshot(config: Config) -> dict[str, object]:
    """Everything recovery may change, except the spool (where repeats are harmless)."""
    found: dict[str, object] = {}
    for origin in (SITE, "http://b.test"):
        found[origin] = state(config, origin)
        found[origin + " log"] = (queue_dir(config.root, origin) / LOG).read_bytes()
    with Catalog(config.root / "catalog", config.catalog.shards) as catalog:
        found["catalog"] = sorted((c.url, c.filename, c.offset) for c in catalog.iter_all())
    found["warcs"] = sorted(p.name for p in (config.root / "warcs").iterdir())
    return found


def recover_killed_at(config: Config, kill_at: int) -> int:
    """Recover in a forked child that SIGKILLs itself at its ``kill_at``-th durable step (a
    write, fsync, rename or unlink; 0: never). Returns the steps the child took."""
    steps = config.root / "steps"
    pid = os.fork()
    if pid == 0:                                        # the child: count, and die at kill_at
        try:
            count = 0

            def counting(real):
                def step(*args, **kwargs):
                    nonlocal count
                    count += 1
                    if count == kill_at:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return real(*args, **kwargs)
                return step

            for name in ("write", "pwrite", "fsync", "replace", "rename", "unlink", "ftruncate"):
                setattr(os, name, counting(getattr(os, name)))
            run(config)
            steps.write_text(str(count))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == (-signal.SIGKILL if kill_at else 0)
    return kill_at or int(steps.read_text())


def test_a_kill_at_any_step_of_recovery_then_a_restart_gives_the_same_state(tmp_path):
    left = scene(tmp_path / "left").root
    shutil.copytree(left, tmp_path / "reference")
    reference = config_for(tmp_path / "reference")
    steps = recover_killed_at(reference, 0)
    expected = snapshot(reference)
    assert expected[SITE][3] == [f"{SITE}/2", f"{SITE}/4", *(f"{SITE}/new{n}" for n in (0, 1, 3))]
    assert steps > 20
    for kill_at in range(1, steps + 1):
        shutil.copytree(left, tmp_path / str(kill_at))
        config = config_for(tmp_path / str(kill_at))
        recover_killed_at(config, kill_at)
        run(config)                                     # the next start
        assert snapshot(config) == expected, f"killed at step {kill_at} of {steps}"
