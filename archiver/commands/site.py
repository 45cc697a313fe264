"""``archiver site resume ORIGIN``: one site of the site queues, by hand."""

from __future__ import annotations

import argparse
import contextlib
import sys

from archiver.commands.common import (
    Verbs,
    add_config,
    fail,
    group,
    load_config,
    storage_errors,
    store_failure,
    verb,
)
from archiver.stores import open_stores
from archiver.web import urls

RESUME_EXITS = {0: "the site was paused and waits for a crawler now",
                1: "the site is not paused (its state is named on stderr), or a store failed",
                2: "bad usage or bad input: a config, or an origin no site queue holds"}


def add(verbs: Verbs) -> None:
    site = group(verbs, "site", "one site of the site queues (`site resume` continues a paused one)",
                 "site_verb")
    resume_ = verb(site, "resume", "continue a site paused when its session was lost (fix its "
                   "credentials first): its next visit logs in again and goes on from its cursor",
                   exits=RESUME_EXITS, run=resume)
    resume_.add_argument("origin", metavar="ORIGIN",
                         help="the site, scheme://host[:port] (example.org means http://example.org)")
    add_config(resume_)


def resume(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    given = urls.site_of_seed(args.origin)
    if given is None:
        return fail(f"site resume: {args.origin!r} names no site (want scheme://host[:port], or "
                    "a host name for http://)")
    origin = urls.origin(given)
    try:
        for _, queue in open_stores(cfg).site_queues():  # the one that holds it
            with contextlib.closing(queue):
                row = queue.site(origin)
                if row is None:
                    continue
                if not queue.resume(origin):
                    print(f"archiver: site resume: {origin} is {queue.state(origin)}, not "
                          "paused; nothing to do", file=sys.stderr)
                    return 1
                print(f"site resume: {origin} was paused ({row.note or 'no note'}); it waits for "
                      "a crawler now, and its next visit goes on from its cursor")
                return 0
    except storage_errors() as e:
        return store_failure("site resume", e)
    return fail(f"site resume: no site queue holds {origin}")
