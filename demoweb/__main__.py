"""python -m demoweb serve|hosts|examples: run the demo web server, print its hosts file, or write
example documents for `archiver focus train` (a topical web's relevant/ and other/)."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path

import trio

from demoweb.examples import write_examples
from demoweb.model import DemoWeb, WebSpec
from demoweb.server import ADDRESS, DemoServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m demoweb", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)
    serve = verbs.add_parser("serve", help="serve the demo web on 127.0.0.1 until SIGINT/SIGTERM")
    hosts = verbs.add_parser("hosts", help="print an /etc/hosts file for the demo web")
    for verb in (serve, hosts):
        verb.add_argument("--sites", type=int, default=WebSpec.sites)
        verb.add_argument("--pages", type=int, default=WebSpec.pages_per_site)
        verb.add_argument("--port", type=int, default=WebSpec.port, help="0 picks a free port")
        verb.add_argument("--seed", type=int, default=WebSpec.seed)
        verb.add_argument("--domain", default=WebSpec.domain)
        verb.add_argument("--version", type=int, default=WebSpec.version)
        verb.add_argument("--hostile", action="store_true", help="add hostile.<domain>")
        verb.add_argument("--odd", action="store_true", help="add odd.<domain> (odd links)")
        verb.add_argument("--modern", action="store_true",
                          help="add modern.<domain> and assets.<domain> (pages built by scripts)")
        verb.add_argument("--no-trap", dest="trap", action="store_false", help="no trap.<domain>")
        verb.add_argument("--topical", action="store_true",
                          help="sites on two topics, pages only (a focused crawl's test web)")
    serve.add_argument("--log", type=Path, help="append one JSON line per request to this file")
    serve.add_argument("--hosts-out", type=Path, help="write the hosts file here")
    hosts.add_argument("--address", default=ADDRESS)
    examples = verbs.add_parser("examples", help="write example documents for `archiver focus "
                                "train` into DIR/relevant/ and DIR/other/")
    examples.add_argument("directory", type=Path, metavar="DIR")
    examples.add_argument("--count", type=int, default=20, help="documents per class")
    return parser


def _spec(args: argparse.Namespace) -> WebSpec:
    return WebSpec(
        sites=args.sites,
        pages_per_site=args.pages,
        port=args.port,
        seed=args.seed,
        domain=args.domain,
        trap=args.trap,
        hostile=args.hostile,
        odd=args.odd,
        modern=args.modern,
        version=args.version,
        topical=args.topical,
    )


async def _serve(args: argparse.Namespace) -> None:
    # Bind first: links carry the port, so the web is built for the port actually bound.
    listeners = await trio.open_tcp_listeners(args.port, host=ADDRESS)
    port = listeners[0].socket.getsockname()[1]
    web = DemoWeb(dataclasses.replace(_spec(args), port=port))
    if args.hosts_out:
        args.hosts_out.write_text(web.hosts_file())
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(DemoServer(web, log_path=args.log).serve, listeners)
            print(f"listening on {ADDRESS}:{port}", flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.verb == "examples":
        write_examples(args.directory, args.count)
    elif args.verb == "hosts":
        sys.stdout.write(DemoWeb(_spec(args)).hosts_file(args.address))
    else:
        trio.run(_serve, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
