"""Full-text search in the replay: ``GET /fulltext?q=WORDS[&at=DATE][&page=N]``.

The same search as ``archiver search`` (archiver.store.embedded.fulltext): the archived pages holding the
words, best first, one result per URL. Each result links to its latest matching capture on the
content origin and lists its matching captures' dates, each a link to that capture (the first
``DATES_SHOWN``, then the URL's capture list). ``at`` keeps captures at or before a date (ISO
8601 or 4 to 14 digits), ``page`` turns the results ``PAGE_SIZE`` at a time.

The index is opened read-only for each request and read in a worker thread, never on the event
loop, at most ``replay.search_workers`` searches at once (archiver.replay.workers: up to
``replay.max_waiting`` more wait, past that a 503 with Retry-After), each for at most
``replay.scan_deadline`` seconds (a word on every page of a large archive costs
its ranking every page). A missing, empty or over-long query, a bad date or page number answers
400 with the form and the reason; an archive without an index yet, or a search past the deadline,
503 saying what to do. The home
page has the search box too. Every value shown is escaped by the template (autoescape).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from archiver.replay.pages import list_url
from archiver.replay.rewrite import archive_url
from archiver.replay.workers import Busy
from archiver.store.embedded.fulltext import FullTextMissing
from archiver.store.models import SearchHit, SearchTimeout
from archiver.web.textquery import MAX_QUERY, SearchQuery, parse_query, snippet_parts
from archiver.web.timestamps import parse_date, to_iso

PAGE_SIZE = 20
MAX_PAGE = 50
DATES_SHOWN = 10
_MAX_DATE = 40  # characters of a date shown back in the form (the longest valid one has 32)
_templates = Environment(loader=PackageLoader("archiver.replay", "templates"), autoescape=True,
                         trim_blocks=True, lstrip_blocks=True)


@dataclass(frozen=True)
class _Asked:
    """A search as the request asks it."""

    query: SearchQuery
    at: str | None
    page: int


def _asked(request: Request) -> _Asked:
    """The request's search; ValueError (a QueryError for the query) saying what is wrong."""
    params = request.query_params
    query = parse_query(params.get("q", ""))
    at_text = params.get("at", "").strip()
    page = params.get("page", "1")
    if not (page.isascii() and page.isdigit() and 1 <= int(page) <= MAX_PAGE):
        raise ValueError(f"page must be a number from 1 to {MAX_PAGE}")
    return _Asked(query, parse_date(at_text, upper=True) if at_text else None, int(page))


async def fulltext_page(request: Request) -> Response:
    """The search form, then the results of the search the request asks, or why there are none."""
    archive = request.app.state.archive
    prefix = archive.config.replay.base_url
    form = {"prefix": prefix, "query": request.query_params.get("q", "")[:MAX_QUERY],
            "at_text": request.query_params.get("at", "")[:_MAX_DATE], "max_query": MAX_QUERY}
    try:
        asked = _asked(request)
    except ValueError as e:
        return _page(form, status=400, error=str(e))

    deadline = archive.config.replay.scan_deadline

    def search() -> list[SearchHit]:
        fulltext = archive.stores.fulltext(readonly=True)
        try:
            return fulltext.search(asked.query, at=asked.at, limit=PAGE_SIZE + 1,
                                   offset=(asked.page - 1) * PAGE_SIZE, deadline=deadline)
        finally:
            fulltext.close()

    try:
        hits = await archive.searching.run(search)
    except Busy as e:
        page = _page(form, status=503, error=f"The replay is running as many searches as it can: try again "
                                              f"in {e.retry_after} s.")
        page.headers["Retry-After"] = str(e.retry_after)
        return page
    except FullTextMissing:
        return _page(form, status=503, error="The archive has no full-text index yet: build it with "
                                             "`archiver search index --config FILE`.")
    except SearchTimeout:
        return _page(form, status=503, error=f"This search took more than {deadline:g} s: its words are "
                                             "on very many pages. Add a rarer word, or a phrase.")
    content = archive.config.replay.content_origin
    results = [_result(hit, prefix, content) for hit in hits[:PAGE_SIZE]]
    return _page(form, results=results, at=to_iso(asked.at) if asked.at else None,
                 first=(asked.page - 1) * PAGE_SIZE + 1,
                 previous=_turn(request, asked.page - 1) if asked.page > 1 else None,
                 next=_turn(request, asked.page + 1) if len(hits) > PAGE_SIZE and asked.page < MAX_PAGE
                 else None)


def _result(hit: SearchHit, prefix: str, content: str) -> dict[str, object]:
    """One result as the template shows it."""
    return {
        "url": hit.url,
        "title": hit.title or hit.url,
        "href": archive_url(content, hit.timestamps[-1], "", hit.url),
        "snippet": snippet_parts(hit.snippet),
        "count": len(hit.timestamps),
        "captures": [{"href": archive_url(content, ts, "", hit.url), "when": to_iso(ts)}
                     for ts in hit.timestamps[:DATES_SHOWN]],
        "more": max(0, len(hit.timestamps) - DATES_SHOWN),
        "list": list_url(prefix, hit.url),
    }


def _turn(request: Request, page: int) -> str:
    """This search at another page of results, as a link relative to this one."""
    params = {name: request.query_params[name] for name in ("q", "at") if name in request.query_params}
    return "?" + urlencode({**params, "page": page})


def _page(form: dict[str, object], *, status: int = 200, **shown: object) -> HTMLResponse:
    """The search page: the form, then an error or the results (None: no search made)."""
    values = {"error": None, "results": None, "at": None, "first": 1, "previous": None, "next": None}
    page = _templates.get_template("fulltext.html").render(**form, **{**values, **shown})
    return HTMLResponse(page, status_code=status)


routes = [Route("/fulltext", fulltext_page)]
