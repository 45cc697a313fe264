"""The test support that runs verbs in the test process leaves the process as it found it."""

from __future__ import annotations

import logging

from tests.support.repo import archiver_here


def test_a_verb_run_in_process_leaves_the_archiver_logger_as_it_was(tmp_path):
    config = tmp_path / "archiver.toml"
    config.write_text('[archive]\nroot = "archive"\n[log]\nlevel = "debug"\n')
    logger = logging.getLogger("archiver")
    before = (list(logger.handlers), logger.propagate, logger.level)
    done = archiver_here("seeds", str(tmp_path / "no-such-seeds.txt"), "--config", str(config))
    assert done.returncode == 2 and b"no-such-seeds.txt" in done.stderr   # logs.setup ran first
    assert (list(logger.handlers), logger.propagate, logger.level) == before
