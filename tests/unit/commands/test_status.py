"""``archiver status``: whether each crawler runs, from a shared store's heartbeats (the embedded
lock's probe runs a crawler: tests/integration/test_cli_errors.py)."""

from __future__ import annotations

from pathlib import Path

from archiver import config
from archiver.commands.status import with_running
from archiver.store.status import format_status


def test_a_heartbeat_older_than_the_lease_means_stopped(tmp_path: Path) -> None:
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n[crawl]\nlease_ttl = 60\n')
    rows = [{"process": 0, "pid": 7, "host": "a", "heartbeat_age": 5.0},
            {"process": 1, "pid": 8, "host": "b", "heartbeat_age": 240.0}]
    running, gone = with_running(rows, config.load(path), by_heartbeat=True)
    assert (running["running"], gone["running"], gone["last_seen_s"]) == (True, False, 240.0)
    assert format_status(running, now=0) == "process 0 on a: running, pid 7, no status yet, heartbeat 5s ago"
    assert format_status(gone, now=0).startswith("process 1 on b: stopped (last seen 4m ago), pid 8, ")
