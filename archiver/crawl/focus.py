"""The focused crawl (``crawl.focus``) as a built-in plugin on the plugin API (``archiver.plugins``).

``FocusPlugin`` holds the relevance model (``web.relevance``) that ``archiver focus train``
wrote, and implements two hooks:

- ``on_capture``: a page (a 2xx answer of HTML or plain text with some text) gets the label
  ``relevance``, its score with three decimals ("0.830"): stored with the capture like any label
  (WARC metadata record, catalog field, ``/cdx?filter=``);
- ``site_priority``: an external link's site gets the score of the page that links it, so the
  site queue, which keeps the highest priority a site was given and claims higher first, takes
  the sites that relevant pages link to before the others.

The plugin host registers it when ``crawl.focus`` names a model (``focus_plugin``); a model file
that cannot be read stops the crawler at start with the reason, not in the middle of a crawl.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from archiver.plugins import CaptureInfo, Document, LinkContext
from archiver.web.relevance import ModelError, RelevanceModel, parse_model

LABEL = "relevance"
_TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "")


class FocusPlugin:
    """The focused crawl's hooks over one relevance model."""

    def __init__(self, model: RelevanceModel) -> None:
        self.model = model

    def on_capture(self, capture: CaptureInfo, document: Document) -> Mapping[str, str] | None:
        """``{"relevance": "0.830"}`` for a page with text; None for anything else."""
        if not 200 <= document.status < 300 or document.media_type not in _TEXT_TYPES:
            return None
        text = document.text
        if not text:
            return None
        return {LABEL: f"{self.model.score(text):.3f}"}

    def site_priority(self, site: str, context: LinkContext) -> float | None:
        """The linking page's relevance (None if it has none: the default priority)."""
        score = context.labels.get(LABEL)
        if score is None:
            return None
        try:
            return float(score)
        except ValueError:
            return None


def focus_plugin(path: Path) -> FocusPlugin:
    """The plugin for the model file at ``path``; ``ModelError`` naming the file if it cannot
    be read or is not a model."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelError(f"crawl.focus: {path}: cannot read the relevance model: {e.strerror}"
                         ) from None
    try:
        return FocusPlugin(parse_model(data))
    except ModelError as e:
        raise ModelError(f"crawl.focus: {path}: {e}") from None
