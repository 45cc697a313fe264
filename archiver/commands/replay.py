"""``archiver replay run``: serve the archive as a website, by date."""

from __future__ import annotations

import argparse

from archiver import logs
from archiver.commands.common import Verbs, add_config, group, load_config, verb

EXITS = {0: "the service stopped on a signal", 1: "the service could not start or failed"}


def add(verbs: Verbs) -> None:
    replay = group(verbs, "replay", "the replay service (`replay run` runs it)", "replay_verb")
    parser = verb(replay, "run", "serve the archive as a website, by date", exits=EXITS, run=run)
    add_config(parser)
    parser.add_argument("--listen", metavar="ADDRESS:PORT",
                        help="where the replay's own pages are served (default: replay.listen in "
                             "the config, 127.0.0.1:8080)")


def run(args: argparse.Namespace) -> int:
    from archiver.replay import serve

    cfg = load_config(args)
    logs.setup(cfg.log.level)
    return serve.run(cfg, args.listen)
