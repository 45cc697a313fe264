"""Temporal coherence of a replayed page: the dates of the captures it is assembled from (pure).

A replayed page loads its embeds (images, stylesheets, scripts, frames, media: the links
archiver.replay.rewrite sends into the archive with an embedding modifier, never ``<a href>``
navigation) at the page's own timestamp, and replay serves each the capture closest to it,
following archived redirects as a browser follows replay's: the target is asked for at the
redirect capture's timestamp. :func:`follow` walks that, given a lookup of the capture replay
serves for one URL at one instant; :func:`assess` gives each embed's skew (its capture's time
minus the page's, in seconds), flags those more than ``max_skew`` away, and the spread of the
dates the page loaded.

Bounded: only the first ``EMBED_LIMIT`` distinct embeds of a page are looked up, each through at
most ``REDIRECT_LIMIT`` redirects; the report says how many there were and how many were checked.
Only the page's own embeds count, not those of its frames or stylesheets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from archiver.replay.rewrite import FRAME, IFRAME, IMAGE, OBJECT, SCRIPT, STYLE, Embed
from archiver.store.models import Capture
from archiver.web import urls
from archiver.web.timestamps import to_datetime

# Distinct embeds looked up per page (one or two catalog seeks each), redirects followed per embed.
EMBED_LIMIT = 100
REDIRECT_LIMIT = 5
KINDS = {IMAGE: "image", STYLE: "stylesheet", SCRIPT: "script", IFRAME: "frame", FRAME: "frame",
         OBJECT: "media"}  # fmt: skip
# The query parameter of a memento URL that asks for this report instead of the page.
PARAMETER = "coherence"

# A lookup: the capture replay serves for a URL asked for at a 14-digit timestamp, or None.
Lookup = Callable[[str, str], Capture | None]


def distinct(embeds: Iterable[Embed]) -> list[Embed]:
    """Each embedded URL once, at its first place in the page."""
    seen: dict[str, Embed] = {}
    for embed in embeds:
        seen.setdefault(embed.url, embed)
    return list(seen.values())


@dataclass(frozen=True)
class Served:
    """What replay serves for one embed: the capture (None: not in the archive) and the
    redirect targets followed to reach it."""

    embed: Embed
    capture: Capture | None
    via: tuple[str, ...] = ()


def follow(embed: Embed, at: str, lookup: Lookup, limit: int = REDIRECT_LIMIT) -> Served:
    """The capture replay ends on for ``embed`` asked for at ``at``: the closest capture, then,
    while that is a redirect (at most ``limit`` of them), its target's closest capture to the
    redirect's timestamp. A chain cut by the limit ends on the last redirect."""
    capture = lookup(embed.url, at)
    via: list[str] = []
    while capture is not None and capture.redirect is not None and len(via) < limit:
        target = urls.normalize(capture.redirect)
        if target is None:  # replay answers 400 to it: the redirect is what the page got
            break
        via.append(target)
        capture = lookup(target, capture.timestamp)
    return Served(embed, capture, tuple(via))


def skew(page: str, served: str) -> int:
    """Seconds from the page's capture to an embed's (negative: the embed is older)."""
    return int((to_datetime(served) - to_datetime(page)).total_seconds())


@dataclass(frozen=True)
class EmbedDate:
    """One embed in the report: its URL and kind, the capture served (timestamp None: not in the
    archive), where redirects led, the skew and whether it is beyond ``max_skew``."""

    url: str
    modifier: str
    timestamp: str | None
    skew: int | None
    exceeds: bool
    served_url: str | None = None

    @property
    def kind(self) -> str:
        return KINDS.get(self.modifier, "embed")

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "kind": self.kind, "timestamp": self.timestamp, "skew": self.skew,
                "exceeds_max_skew": self.exceeds, "served_url": self.served_url}


@dataclass(frozen=True)
class Coherence:
    """The dates a replayed page is assembled from."""

    url: str
    timestamp: str
    max_skew: int
    embeds: tuple[EmbedDate, ...]
    found: int  # distinct embeds in the page; the first len(embeds) were looked up

    @property
    def checked(self) -> int:
        return len(self.embeds)

    @property
    def complete(self) -> bool:
        return self.checked == self.found

    @property
    def earliest(self) -> str:
        return min([self.timestamp, *(e.timestamp for e in self.embeds if e.timestamp)])

    @property
    def latest(self) -> str:
        return max([self.timestamp, *(e.timestamp for e in self.embeds if e.timestamp)])

    @property
    def spread(self) -> int:
        """Seconds from the earliest capture the page loaded to the latest."""
        return skew(self.earliest, self.latest)

    @property
    def skewed(self) -> list[EmbedDate]:
        return [e for e in self.embeds if e.exceeds]

    @property
    def missing(self) -> list[EmbedDate]:
        return [e for e in self.embeds if e.timestamp is None]

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url, "timestamp": self.timestamp, "max_skew": self.max_skew,
            "earliest": self.earliest, "latest": self.latest, "spread": self.spread,
            "embeds_found": self.found, "embeds_checked": self.checked, "complete": self.complete,
            "embeds": [e.to_json() for e in self.embeds],
        }  # fmt: skip


def assess(url: str, timestamp: str, served: Iterable[Served], *, found: int, max_skew: int) -> Coherence:
    """The report of a page captured at ``timestamp`` whose embeds replay serves as ``served``
    (``found``: how many distinct embeds the page has, looked up or not)."""
    dates = []
    for one in served:
        capture = one.capture
        if capture is None:
            dates.append(EmbedDate(one.embed.url, one.embed.modifier, None, None, False))
            continue
        seconds = skew(timestamp, capture.timestamp)
        dates.append(EmbedDate(one.embed.url, one.embed.modifier, capture.timestamp, seconds,
                               abs(seconds) > max_skew, one.via[-1] if one.via else None))
    return Coherence(url, timestamp, max_skew, tuple(dates), max(found, len(dates)))


def split_parameter(rest: str) -> tuple[str, str | None]:
    """A memento path (what follows ``/web/``, query included) without a final
    ``coherence=VALUE`` query field, and VALUE (None without one). Only the last field counts:
    an archived URL's own query keeps everything before it."""
    path, mark, query = rest.partition("?")
    if not mark:
        return rest, None
    head, amp, last = query.rpartition("&")
    name, _, value = last.partition("=")
    if name != PARAMETER:
        return rest, None
    return (f"{path}?{head}" if amp else path), value
