"""The built-in plugin ``language``: labels each HTML or plain-text page with its language.

It is the worked example of docs/plugins.md and is loaded as any third party's plugin is: through
the entry point ``language = "archiver.language:plugin"`` of group ``archiver.plugins`` in
pyproject.toml, and only when ``plugins.enable`` names it. Only ``on_capture`` is defined.

The language is guessed from the page's visible text (``Document.text``) by py3langid, a
maintained fork of langid.py (Lui and Baldwin, 2012: a naive Bayes classifier over byte n-grams,
97 languages, its model shipped inside the package; pure Python on numpy, which archiver already
needs). Its answer is kept as label ``lang`` (an ISO 639-1 code such as ``fr``) when its
normalised probability reaches ``min_confidence`` and the text has at least ``min_chars``
characters; otherwise the page gets no label (a menu, an empty page, a mixed one).

Table ``[plugins.language]``: ``min_chars`` (default 200), ``min_confidence`` (0.0 to 1.0,
default 0.9), ``languages`` (a list of codes the guess is limited to; default all).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from archiver.plugins import CaptureInfo, Document

LABEL = "lang"
# Text classified at most: the first characters say the language, the time stays bounded, and the
# probabilities stay calibrated (py3langid flattens them as the text grows).
MAX_TEXT = 4_000
_KNOWN = {"min_chars", "min_confidence", "languages"}


class LanguagePlugin:
    """on_capture: ``{"lang": code}`` for a page whose text says its language clearly enough."""

    def __init__(self, *, min_chars: int = 200, min_confidence: float = 0.9) -> None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier  # its model loads here, once

        self.min_chars = min_chars
        self.min_confidence = min_confidence
        self.identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

    def guess(self, text: str) -> str | None:
        """The language code of ``text``, or None if it is too short or the guess too unsure."""
        text = text[:MAX_TEXT]
        if len(text.strip()) < self.min_chars:
            return None
        code, confidence = self.identifier.classify(text)
        return str(code) if confidence >= self.min_confidence else None

    def on_capture(self, capture: CaptureInfo, document: Document) -> Mapping[str, str] | None:
        if document.status != 200:
            return None
        code = self.guess(document.text)
        return None if code is None else {LABEL: code}


def plugin(table: Mapping[str, Any]) -> LanguagePlugin:
    """The entry point's factory: checks ``[plugins.language]`` (ValueError says what is wrong)."""
    unknown = set(table) - _KNOWN
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(_KNOWN))})")
    min_chars = table.get("min_chars", 200)
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 1:
        raise ValueError(f"min_chars: expected a positive integer, got {min_chars!r}")
    min_confidence = table.get("min_confidence", 0.9)
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float)) \
            or not 0.0 <= min_confidence <= 1.0:
        raise ValueError(f"min_confidence: expected a number from 0 to 1, got {min_confidence!r}")
    languages = table.get("languages", [])
    if not isinstance(languages, list) or not all(isinstance(code, str) for code in languages):
        raise ValueError(f"languages: expected a list of language codes, got {languages!r}")
    made = LanguagePlugin(min_chars=min_chars, min_confidence=float(min_confidence))
    if languages:
        unknown_codes = set(languages) - set(made.identifier.labels)
        if unknown_codes:
            raise ValueError(f"languages: unknown code(s) {', '.join(sorted(unknown_codes))}")
        made.identifier.set_languages(languages)
    return made
