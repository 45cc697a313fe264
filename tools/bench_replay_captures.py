"""Replay of one URL with very many captures: answer time, size and memory per request.

Makes an archive whose catalog holds ``--captures`` captures of one URL, a minute apart: the rows
are written straight into the catalog, each pointing at one of two WARC records (a response and,
every tenth capture, a revisit of it without WARC-Refers-To headers, as another tool may write;
``tests/support/manycaptures.py``, which the replay memory test shares).
Starts ``archiver replay run`` on it in a child process and measures, for each request, the answer
time, its size and the replay process's memory growth: its peak RSS during the request (VmHWM,
reset through ``/proc/<pid>/clear_refs`` before it) over its RSS before. The requests: a memento
(a response, a revisit), a TimeGate, both TimeMaps, four JSON TimeMaps at once, the calendar, a
CDX query of 1,000 lines.

``--heavy K`` then starts K CDX listings at once that examine every capture and keep none, and
replays a memento (``id_``, no rewriting) again and again while they run: how long an ordinary
replay waits behind heavy listings, and what the listings were answered (status 0: no answer
within 600 s). ``--deadline`` sets ``replay.scan_deadline`` (600 s by default, so that the cost of
the old code's listings is measured rather than cut; 30 s is the service's default).

It measures whichever ``archiver`` the child imports: ``--pythonpath DIR`` runs the replay from
another checkout (``git worktree add /tmp/before <commit>``) for a before-and-after comparison.
``--archive DIR`` keeps the generated archive there and reuses it on later runs. Prints JSON.

    python -m tools.bench_replay_captures [--captures 1000000] [--rounds 3] [--heavy 0]
                                          [--archive DIR] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.manycaptures import URL, stamp, write_many_captures

CONFIG = """\
[archive]
root = "archive"
[replay]
listen = "127.0.0.1:{app}"
content_listen = "127.0.0.1:{content}"
scan_deadline = {deadline}
[log]
level = "warning"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replay:
    """``archiver replay run`` in a child process, and its memory as /proc shows it."""

    def __init__(self, root: Path, pythonpath: str | None, deadline: float = 600.0) -> None:
        self.app, self.content = free_port(), free_port()
        config = root / "archiver.toml"
        config.write_text(CONFIG.format(app=self.app, content=self.content, deadline=deadline))
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        # Run from the archive's folder: "-m" puts the working directory first on sys.path.
        self.process = subprocess.Popen([sys.executable, "-m", "archiver", "replay", "run", "--config",
                                         str(config)], env=env, cwd=root, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get(self.app, "/")
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit("the replay service did not start") from None
                time.sleep(0.1)

    def get(self, port: int, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def _status(self, field: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(field)

    def rss(self) -> int:
        return self._status("VmRSS")

    def reset_peak(self) -> None:
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def peak(self) -> int:
        return self._status("VmHWM")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def measure(replay: Replay, send: Callable[[], list[tuple[int, bytes]]]) -> dict[str, object]:
    """One request (or several at once): seconds, statuses, bytes answered, peak RSS growth."""
    replay.reset_peak()
    before = replay.rss()
    start = time.perf_counter()
    answers = send()
    seconds = time.perf_counter() - start
    growth = (replay.peak() - before) / 2**20
    return {"seconds": round(seconds, 3), "status": sorted({s for s, _ in answers}),
            "bytes": sum(len(b) for _, b in answers), "rss_growth_mib": round(growth, 1)}


def at_once(replay: Replay, port: int, path: str, count: int) -> Callable[[], list[tuple[int, bytes]]]:
    def send() -> list[tuple[int, bytes]]:
        answers: list[tuple[int, bytes]] = []
        threads = [threading.Thread(target=lambda: answers.append(replay.get(port, path)))
                   for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return answers

    return send


def probes(replay: Replay, count: int) -> dict[str, Callable[[], list[tuple[int, bytes]]]]:
    middle = count // 2 // 10 * 10
    app, content = replay.app, replay.content
    return {
        "memento": at_once(replay, content, f"/web/{stamp(middle)}/{URL}", 1),
        "memento_revisit": at_once(replay, content, f"/web/{stamp(middle + 9)}/{URL}", 1),
        "timegate": at_once(replay, app, f"/web/{URL}", 1),
        "timemap_link": at_once(replay, app, f"/timemap/link/{URL}", 1),
        "timemap_json": at_once(replay, app, f"/timemap/json/{URL}", 1),
        "timemap_json_x4": at_once(replay, app, f"/timemap/json/{URL}", 4),
        "calendar": at_once(replay, app, f"/web/*/{URL}", 1),
        "cdx_1000": at_once(replay, app, f"/cdx?url={URL}&limit=1000", 1),
    }


def ranges(rounds: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {"status": rounds[-1]["status"], "bytes": rounds[-1]["bytes"]}
    for key in ("seconds", "rss_growth_mib"):
        values = [float(r[key]) for r in rounds]  # type: ignore[arg-type]
        out[key] = [min(values), max(values)]
    return out


def heavy(replay: Replay, listings: int, count: int) -> dict[str, object]:
    """Memento replays, one after another, while ``listings`` heavy CDX listings run."""
    path = f"/cdx?url={URL}&filter=~url:nothing&limit=1"
    answers: list[tuple[int, bytes]] = []

    def listing() -> None:
        try:
            answers.append(replay.get(replay.app, path))
        except OSError as error:
            answers.append((0, repr(error).encode()))

    threads = [threading.Thread(target=listing) for _ in range(listings)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # let every listing reach the catalog
    waits = []
    replayed: list[int] = []
    memento = f"/web/{stamp(count // 2 // 10 * 10)}id_/{URL}"
    while any(t.is_alive() for t in threads):  # each replay asked while listings run
        start = time.perf_counter()
        status, _ = replay.get(replay.content, memento)
        waits.append(time.perf_counter() - start)
        replayed.append(status)
    for thread in threads:
        thread.join()
    return {"listings": listings, "listing_statuses": tally([status for status, _ in answers]),
            "replays_during": len(waits), "replay_statuses": tally(replayed),
            "replay_seconds_median": round(statistics.median(waits), 3) if waits else None,
            "replay_seconds_max": round(max(waits), 3) if waits else None}


def tally(statuses: list[int]) -> dict[str, int]:
    found: dict[str, int] = {}
    for status in statuses:
        found[str(status)] = found.get(str(status), 0) + 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heavy", type=int, default=0, help="heavy CDX listings at once (0: none)")
    parser.add_argument("--deadline", type=float, default=600.0,
                        help="replay.scan_deadline (default 600 s: time for the old code to list "
                             "every capture on a loaded machine; the service's default is 30)")
    parser.add_argument("--archive", help="keep the generated archive here (reused if there)")
    parser.add_argument("--pythonpath", help="the archiver checkout the replay runs from")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.archive or scratch)
        made = 0.0
        if not (root / "archive" / "catalog").exists():
            start = time.perf_counter()
            root.mkdir(parents=True, exist_ok=True)
            write_many_captures(root / "archive", args.captures)
            made = time.perf_counter() - start
        replay = Replay(root, args.pythonpath, args.deadline)
        try:
            results: dict[str, object] = {"captures": args.captures, "catalog_seconds": round(made, 1),
                                          "rss_start_mib": round(replay.rss() / 2**20, 1)}
            sends = probes(replay, args.captures)
            measured: dict[str, list[dict[str, object]]] = {name: [] for name in sends}
            for _ in range(args.rounds):
                for name, send in sends.items():
                    measured[name].append(measure(replay, send))
            results.update({name: ranges(rounds) for name, rounds in measured.items()})
            if args.heavy:
                results["heavy"] = heavy(replay, args.heavy, args.captures)
            results["rss_end_mib"] = round(replay.rss() / 2**20, 1)
        finally:
            replay.stop()
    print("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in results.items()) + "\n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
