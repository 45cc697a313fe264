"""The references one response makes: a redirect's Location, or the links of an HTML or CSS body.

Pure logic: the site visit calls it after each fetch, and crash recovery calls it on the records a
killed process wrote, so both find the same links in the same response.
"""

from __future__ import annotations

from dataclasses import dataclass

from archiver.web import extract, urls
from archiver.web.http import decode_body, media_type

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
CSS_TYPES = frozenset({"text/css"})


@dataclass(frozen=True)
class FoundLinks:
    """Raw references of one response, in document order, and the base they resolve against
    (the page's URL, or its ``<base href>`` when that normalises). ``redirect``: the one
    reference is a 3xx Location. ``read``: the response could hold references (a redirect, an
    HTML or CSS body); False for images, errors and the like."""

    base: str
    refs: list[str]
    redirect: bool = False
    read: bool = False


def links_in_response(
    url: str,
    status: int,
    headers: dict[str, str],
    body: bytes,
    *,
    max_decoded_size: int,
) -> FoundLinks:
    """The references of the response to ``url`` (a normalised URL).

    ``headers`` maps lower-case names to the first value (``content-type``, ``content-encoding``,
    ``location``). Only 3xx with a Location and 2xx HTML or CSS bodies have references.
    """
    if 300 <= status < 400:
        location = headers.get("location")
        return FoundLinks(url, [location] if location else [], redirect=True, read=True)
    if not 200 <= status < 300:
        return FoundLinks(url, [])
    mime, charset = media_type(headers.get("content-type"))
    if mime not in HTML_TYPES and mime not in CSS_TYPES:
        return FoundLinks(url, [])
    decoded = decode_body(body, headers.get("content-encoding"), max_decoded_size)
    if mime in CSS_TYPES:
        text = extract.decode_text(decoded, charset)
        return FoundLinks(url, [link.url for link in extract.extract_css(text)], read=True)
    found = extract.extract_html(decoded, charset)
    base = url
    if found.base:
        base = urls.normalize(found.base, url) or url
    return FoundLinks(base, [link.url for link in found.links], read=True)
