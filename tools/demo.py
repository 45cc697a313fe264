"""Crawl the embedded demo web: the README's first command.

Starts the demo web server on 127.0.0.1 (a free port), writes a config, a hosts file and a seeds
file under ``demo-archive/``, runs ``archiver crawl run --until-idle`` as a real process, and prints
where the WARC bundles are. Run from the repository root: ``python -m tools.demo``.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from demoweb import WebSpec, run_demo_process

SCREENSHOT = "urn:screenshot:"

CONFIG = """\
# Written by tools/demo.py: the demo web lives on 127.0.0.1, so rests are short.
[archive]
root = "archive"
operator = "archiver demo"

[crawl]
# Every demo site lives on 127.0.0.1: allow one connection per site, not per address.
connections_per_address = 64
# The demo web is on loopback, which the crawler otherwise refuses to fetch from.
allowed_networks = ["127.0.0.0/8"]
min_rest = 0.05
max_rest = 2.0
rest_factor = 1.0
retry_delay = 1.0
site_retries = 2
status_interval = 2.0
# Short timeouts: with --hostile the demo web has servers that drip, hang and never end.
connect_timeout = 2.0
first_byte_timeout = 3.0
total_timeout = 5.0

[browser]
# A rendered page's requests to its own site rest this long between them, and a page is done
# after this long with none in flight: the demo web answers at once, on loopback.
embed_rest = 0.05
quiet = 0.25

[dns]
hosts_file = "hosts"
# Every demo name is in the hosts file; an unused loopback port keeps DNS off the network.
nameservers = ["127.0.0.1:9"]

# The modern site builds its pages with scripts: render in Chromium those that need it
# (docs/capture.md). Without Chromium they are captured over HTTP, as every other page.
[[sheets]]
match = ["domain:modern.demo"]
capture = "auto"
"""


def _shown(path: Path) -> str:
    """``path`` relative to the current folder if it lies under it, else absolute."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _archiver() -> str:
    """How to run ``archiver`` from here: the script beside this Python (a venv's ``bin/``, which
    need not be on PATH), else this Python with ``-m archiver``."""
    script = Path(sys.executable).parent / "archiver"
    if script.is_file():
        return shlex.quote(_shown(script))
    return f"{shlex.quote(sys.executable)} -m archiver"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="demo-archive", help="working folder (default: %(default)s)")
    parser.add_argument("--sites", type=int, default=12)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--hostile", action="store_true", help="add a site of misbehaving servers")
    args = parser.parse_args()
    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, hostile=args.hostile,
                   modern=True)
    with run_demo_process(spec, log_path=work / "demoweb-requests.jsonl") as (web, port, _):
        print(f"demo web: {len(web.hosts)} sites on 127.0.0.1:{port}", flush=True)
        (work / "hosts").write_text(web.hosts_file())
        (work / "archiver.toml").write_text(CONFIG)
        (work / "seeds.txt").write_text("# one URL or host name a line\n"
                                        + "".join(f"{o}/\n" for o in web.origins()))
        crawl = subprocess.run([sys.executable, "-m", "archiver", "crawl", "run",
                                "--config", str(work / "archiver.toml"),
                                "--seeds", str(work / "seeds.txt"), "--until-idle"], check=False)
    if crawl.returncode != 0:
        print(f"crawl failed with exit code {crawl.returncode}", file=sys.stderr)
        return crawl.returncode
    warcs = sorted((work / "archive" / "warcs").glob("*.warc.gz"))
    size = sum(p.stat().st_size for p in warcs)
    print(f"\n{len(warcs)} WARC file(s), {size / 2**20:.1f} MiB, in {work / 'archive' / 'warcs'}")
    for path in warcs:
        print(f"  {path.name}")
    rendered = _rendered(warcs)
    if rendered:
        print(f"\n{len(rendered)} page(s) rendered in Chromium, each with a screenshot; one of them:"
              f"\n  {rendered[0]}\n  its captures, with the screenshot, once the replay runs:"
              f"\n  http://127.0.0.1:8080/web/*/{rendered[0]}")
    else:
        print("\nNo page was rendered: Chromium did not start (install the distribution's "
              "package: apt-get install chromium). Every page was captured over HTTP.")
    archiver, config = _archiver(), shlex.quote(_shown(work / "archiver.toml"))
    print("\nNext steps, each as printed from this folder:")
    for what, verb in (("the crawl's progress", "status"),
                       ("the links batch: spooled external links to new URLs and sites", "links run --once"),
                       ("the replay, then open http://127.0.0.1:8080/ in a browser", "replay run")):
        print(f"  {what}:\n    {archiver} {verb} --config {config}")
    return 0


def _rendered(warcs: list[Path]) -> list[str]:
    """The pages rendered in the browser: those with a screenshot record, in crawl order."""
    pages = []
    for path in warcs:
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                if record.rec_type == "resource" and uri.startswith(SCREENSHOT):
                    pages.append(uri.removeprefix(SCREENSHOT))
    return pages


if __name__ == "__main__":
    sys.exit(main())
