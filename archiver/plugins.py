"""The plugin API: what a third-party package implements to steer the crawl and label captures.

A plugin is any object with some of three optional hooks (see ``Plugin``); its package names a
factory under the entry point group ``archiver.plugins`` (``ENTRY_POINT_GROUP``), and the factory
is called with the plugin's own config table (``[plugins.<name>]``, a plain dict) and returns the
plugin object. Only plugins named in ``plugins.enable`` run. docs/plugins.md is the tutorial.

This module holds types only, no I/O, and stays stable: plugins import it, the crawler
(archiver.crawl.pluginhost) calls them.

- ``should_visit(url, context: VisitContext) -> bool | None``: False = do not fetch ``url``
  (kept in the decision log as kind ``plugin``); True or None: no objection.
- ``on_capture(capture: CaptureInfo, document: Document) -> Mapping[str, str] | None``: labels
  for a response just written; they are stored with it (a WARC ``metadata`` record referring to
  it and the catalog's ``labels`` field). Not called for revisit records.
- ``site_priority(site, context: LinkContext) -> float | None``: the priority of a linked site
  (the highest answer of all plugins, default 0.0; the site queue claims higher first).

A hook that raises is logged once per site and its plugin is disabled for the rest of that
site's visit; the crawl goes on. Hooks run on the crawler's event loop: keep them cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from archiver.web.http import media_type as _media_type
from archiver.web.pagetext import page_text

ENTRY_POINT_GROUP = "archiver.plugins"
# A label's name: lower-case letters, digits, "_", "-" and "." (a namespace like "focus.score").
LABEL_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
MAX_LABEL_VALUE = 256  # characters
MAX_LABELS = 32  # per capture, all plugins together
MAX_DOCUMENT_BYTES = 2 * 2**20  # the decoded body a Document holds at most

PluginFactory = Callable[[Mapping[str, Any]], object]


@dataclass(frozen=True)
class VisitContext:
    """Where a URL was met: ``site`` is the origin being visited, ``source`` the linking page
    (None for a queued URL about to be fetched), ``depth`` its link depth in the site,
    ``external`` whether ``url`` is on another site than ``site``."""

    site: str
    source: str | None
    depth: int
    external: bool


@dataclass(frozen=True)
class CaptureInfo:
    """A capture just written: its URL, 14-digit ``timestamp``, HTTP ``status``, the response
    record's ``record_id`` (``<urn:uuid:...>``), its WARC ``filename`` and ``offset``, and the
    ``site`` (origin) whose visit fetched it."""

    url: str
    timestamp: str
    status: int
    record_id: str
    filename: str
    offset: int
    site: str


@dataclass(frozen=True)
class Document:
    """One fetched document: ``headers`` with lower-case names, ``body`` with its content coding
    undone (at most ``MAX_DOCUMENT_BYTES``; ``truncated`` if the crawler or that bound cut it)."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    truncated: bool = False

    @property
    def media_type(self) -> str:
        """The Content-Type's media type, lower case (``text/html``), or ``""``."""
        return _media_type(self.headers.get("content-type"))[0]

    @cached_property
    def text(self) -> str:
        """The page's visible text (HTML: title, headings and body without scripts and styles,
        as the full-text index reads it; text/plain: the body), or ``""``. Computed on first use."""
        kind = self.media_type
        if kind in ("text/html", "application/xhtml+xml", ""):
            page = page_text(self.body, self.headers.get("content-type"))
            if page is None:
                return ""
            return "\n".join(part for part in (page.title, page.headings, page.body) if part)
        if kind == "text/plain":
            charset = _media_type(self.headers.get("content-type"))[1] or "utf-8"
            try:
                return self.body.decode(charset, errors="replace")
            except LookupError:
                return self.body.decode("utf-8", errors="replace")
        return ""


@dataclass(frozen=True)
class LinkContext:
    """An external link about to be spooled: the linking page's ``source`` URL, its ``labels``
    (from on_capture), and the link's ``url``."""

    source: str
    labels: Mapping[str, str]
    url: str


class Plugin(Protocol):
    """The three hooks, for reference and type checking; a plugin defines any of them."""

    def should_visit(self, url: str, context: VisitContext) -> bool | None: ...

    def on_capture(self, capture: CaptureInfo, document: Document) -> Mapping[str, str] | None: ...

    def site_priority(self, site: str, context: LinkContext) -> float | None: ...


HOOKS = ("should_visit", "on_capture", "site_priority")
