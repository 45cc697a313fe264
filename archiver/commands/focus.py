"""``archiver focus train EXAMPLES_DIR``: a relevance model from example documents."""

from __future__ import annotations

import argparse
from pathlib import Path

from archiver.commands.common import Verbs, add_config, fail, group, load_config, verb

EXITS = {0: "the model was written"}


def add(verbs: Verbs) -> None:
    focus = group(verbs, "focus", "focused crawling: the relevance model", "focus_verb")
    train = verb(focus, "train", "fit a relevance model to example documents: EXAMPLES_DIR/relevant/ "
                 "and EXAMPLES_DIR/other/ holding .html, .htm or .txt files", exits=EXITS, run=run)
    train.add_argument("examples", metavar="EXAMPLES_DIR",
                       help="the folder of examples (relevant/ and other/ in it)")
    train.add_argument("--out", metavar="FILE",
                       help="where the model goes (default: the file crawl.focus names)")
    add_config(train)


def run(args: argparse.Namespace) -> int:
    """The model is written to ``--out`` or else to the file ``crawl.focus`` names; a short report
    on standard output."""
    cfg = load_config(args, stores_built=False)
    try:
        from archiver.crawl.focustrain import TrainError, read_examples, train
    except ImportError as e:
        return fail(f"focus train needs scikit-learn ({e}): pip install 'archiver[focus]'")
    from archiver.web.relevance import model_bytes
    out = Path(args.out) if args.out else cfg.crawl.focus
    if out is None:
        return fail("name the model file: --out FILE, or crawl.focus in the config")
    try:
        examples = read_examples(Path(args.examples))
        trained = train(examples)
    except TrainError as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"cannot read the examples: {e}")
    try:
        from archiver.store.durable import write_durably

        write_durably(out, model_bytes(trained.model))
    except OSError as e:
        return fail(f"{out}: cannot write the model: {e.strerror}")
    counts = trained.counts
    accuracy = ("n/a (a class has one document)" if trained.accuracy is None
                else f"{trained.accuracy:.3f} ({trained.folds}-fold cross-validation)")
    skipped = f" ({examples.skipped} skipped: no text, or not .html, .htm or .txt)" \
        if examples.skipped else ""
    print(f"documents: {counts['relevant']} relevant, {counts['other']} other{skipped}")
    print(f"accuracy: {accuracy}")
    print(f"time: {trained.seconds:.2f} s")
    print(f"model: {out}")
    return 0

