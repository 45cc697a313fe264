"""Example documents for training a focused crawl's relevance model on a topical demo web.

``write_examples(directory)`` writes ``relevant/`` (documents on RELEVANT_TOPIC) and ``other/``
(documents on the other topic, and some in the plain demo prose), the layout
``archiver focus train`` reads. The text comes from pools of another seed than the web's, so a
model is never trained on the very pages it will score.
"""

from __future__ import annotations

import random
from pathlib import Path

from demoweb import content
from demoweb.model import RELEVANT_TOPIC


def documents(pool: tuple[str, ...], name: str, count: int) -> list[str]:
    """``count`` documents of two to six paragraphs from ``pool``."""
    rng = random.Random(f"examples:{name}")
    return ["\n\n".join(rng.sample(pool, rng.randint(2, 6))) for _ in range(count)]


def write_examples(directory: Path, count: int = 20, seed: int = 1001) -> Path:
    """``count`` relevant and ``count`` other example documents under ``directory``."""
    others = [topic for topic in content.TOPICS if topic != RELEVANT_TOPIC]
    sets = {
        "relevant": documents(content.topic_paragraphs(seed, RELEVANT_TOPIC), "relevant", count),
        "other": [
            *(text for topic in others
              for text in documents(content.topic_paragraphs(seed, topic), topic, count // 2)),
            *documents(content.paragraphs(seed), "plain", count - count // 2),
        ],
    }
    for name, texts in sets.items():
        (directory / name).mkdir(parents=True, exist_ok=True)
        for n, text in enumerate(texts):
            (directory / name / f"{n:03d}.txt").write_text(text + "\n")
    return directory
