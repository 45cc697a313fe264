"""The references one response makes: a redirect's Location, or the links of an HTML or CSS body.

Pure logic: the site visit calls it after each fetch, and crash recovery calls it on the records a
killed process wrote, so both find the same links in the same response.
"""

from __future__ import annotations

from dataclasses import dataclass

from archiver.web import extract, urls
from archiver.web.http import CodingError, content_codings, decode_body, media_type

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
    ``location``). Only 3xx with a Location and 2xx HTML or CSS bodies have references; a body
    with more content codings than ``web.http.MAX_CODINGS`` (a protocol error) is not read.
    """
    found = _read(url, status, headers, body, max_decoded_size, small=False)
    assert found is not None
    return found


def links_if_small(url: str, status: int, headers: dict[str, str], body: bytes, *, bound: int
                   ) -> FoundLinks | None:
    """:func:`links_in_response`, when the body decodes to at most ``bound`` bytes (found by
    decoding at most that much: see :func:`decoded_within`); None when it is larger."""
    return _read(url, status, headers, body, bound, small=True)


def decoded_within(body: bytes, content_encoding: str | None, bound: int) -> bytes | None:
    """The body with its content coding undone (as ``decode_body`` does) when that gives at most
    ``bound`` bytes, at the cost of decoding at most ``bound + 1``; None when it gives more, or
    when the body is longer than ``bound`` or has several codings (each must be undone whole
    before the next). A body with too many codings is returned as it is, undecoded."""
    if len(body) > bound:
        return None
    try:
        codings = content_codings(content_encoding)
    except CodingError:
        return body
    if not codings:
        return body
    if len(codings) > 1:
        return None
    decoded = decode_body(body, content_encoding, bound + 1)
    return decoded if len(decoded) <= bound else None


def _read(url: str, status: int, headers: dict[str, str], body: bytes, limit: int, *,
          small: bool) -> FoundLinks | None:
    """The references of a response, its body decoded up to ``limit`` bytes; with ``small``,
    None if it decodes to more than ``limit``."""
    if 300 <= status < 400:
        location = headers.get("location")
        return FoundLinks(url, [location] if location else [], redirect=True, read=True)
    if not 200 <= status < 300:
        return FoundLinks(url, [])
    mime, charset = media_type(headers.get("content-type"))
    if mime not in HTML_TYPES and mime not in CSS_TYPES:
        return FoundLinks(url, [])
    encoding = headers.get("content-encoding")
    try:
        content_codings(encoding)
    except CodingError:
        return FoundLinks(url, [])
    decoded = decoded_within(body, encoding, limit) if small else decode_body(body, encoding, limit)
    if decoded is None:
        return None
    if mime in CSS_TYPES:
        return FoundLinks(url, extract.css_urls(extract.decode_text(decoded, charset)), read=True)
    raw_base, refs = extract.html_urls(decoded, charset)
    base = url
    if raw_base:
        base = urls.normalize(raw_base, url) or url
    return FoundLinks(base, refs, read=True)
