"""The demo (``python -m tools.demo``, the README's first command) ends by printing next steps:
each works as printed, run from the folder the demo was run in."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.repo import ROOT


def test_each_next_step_the_demo_prints_works_as_printed(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if Path(p).resolve() != Path(sys.executable).parent.resolve())
    demo = subprocess.run([sys.executable, "-m", "tools.demo", "--dir", "demo", "--sites=2", "--pages=4"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    # One rendered page, and where its screenshot shows once the replay runs.
    shown = re.search(r"page\(s\) rendered in Chromium.*\n  (http://modern\.demo:\d+/\S+)\n.*\n"
                      r"  http://127\.0\.0\.1:8080(/web/\*/\S+)", demo.stdout)
    assert shown, demo.stdout
    page, captures = shown.groups()
    assert captures == "/web/*/" + page
    steps = demo.stdout.split("Next steps", 1)[1]
    commands = [line.strip() for line in steps.splitlines() if line.startswith("    ")]
    assert [c.split(" --config")[0].split()[-1] for c in commands] == ["status", "--once", "run"]
    status, links, replay = (shlex.split(c) for c in commands)
    for command in (status, links):
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr
    # The replay as printed, its listeners moved to free ports (the defaults may be taken).
    config = tmp_path / replay[replay.index("--config") + 1]
    config.write_text(config.read_text()
                      + '[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n')
    errors = tmp_path / "replay.err"
    with errors.open("wb") as sink:
        process = subprocess.Popen(replay, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 60  # a guard against a hang, not a speed target
        while len(found := re.findall(r"Running on (http://127\.0\.0\.1:\d+)", errors.read_text())) < 2:
            assert process.poll() is None and time.monotonic() < deadline, errors.read_text()
            time.sleep(0.05)
        with urllib.request.urlopen(found[0] + "/", timeout=30) as answer:
            home = answer.read().decode()
        assert "site-000.demo" in home and "site-001.demo" in home  # the sites crawled
        with urllib.request.urlopen(found[0] + captures, timeout=30) as answer:
            listing = answer.read().decode()
        assert "urn:screenshot:" + page in listing  # the capture's thumbnail
    finally:
        process.terminate()
        process.wait(30)
