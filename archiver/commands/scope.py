"""``archiver scope test URL``: in or out of the config's scope, and the deciding rule."""

from __future__ import annotations

import argparse
import json

from archiver.commands.common import (
    InputError,
    Verbs,
    add_config,
    add_json,
    fail,
    group,
    load_config,
    url,
    verb,
)

EXITS = {0: "the URL is in scope", 1: "it is out of scope", 2: "bad usage, a bad URL or a bad config"}


def add(verbs: Verbs) -> None:
    scope = group(verbs, "scope", "the crawl's scope rules ([scope] in the config)", "scope_verb")
    test = verb(scope, "test", "is a URL in scope, and which rule decided", exits=EXITS, run=run)
    test.add_argument("url", metavar="URL", help="the URL (example.org/x means http://example.org/x)")
    add_json(test)
    add_config(test)


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args, stores_built=False)
    try:
        wanted = url(args.url)
    except InputError as e:
        return fail(str(e))
    decision = cfg.scope.rules().decide(wanted)
    if args.json:
        print(json.dumps({"url": wanted, "decision": decision.word, "rule": decision.rule}))
    else:
        rule = decision.rule if decision.rule is not None else (
            "no rule (no include rules)" if decision.in_scope else "no include rule matched")
        print(f"{decision.word}\t{wanted}\t{rule}")
    return 0 if decision.in_scope else 1
