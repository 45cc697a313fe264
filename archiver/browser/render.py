"""One page rendered in a tab of its own, every request answered by the caller's answerer.

:func:`render_page` opens a tab, sets its viewport, records the page's ``history`` routes from
before its first script, navigates, runs the behaviours (:mod:`archiver.browser.behaviours`)
with a wait for network idle after each step, and collects a :class:`Rendering`: the final URL,
the links of the rendered DOM, the routes, the text and a screenshot. At ``page_timeout`` it stops
waiting, stops the page loading and collects what it has (a script of the page that holds its
thread is stopped first); collecting is bounded too, and a browser that does not answer in time
raises :class:`BrowserHung` (restart it). The tab is closed in every case.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from archiver.browser import behaviours
from archiver.browser.devtools import CommandError, DevTools, DevToolsError
from archiver.browser.page import (
    Answer,
    Answerer,
    Request,
    Traffic,
    answer_requests,
    evaluate,
    isolated_world,
    navigate,
    tab,
)
from archiver.web.extract import SRCSET_CANDIDATE
from archiver.web.urls import normalize

STEP_WAIT = 2.0  # seconds a behaviour step waits for network idle, at least (4 x quiet if more)
BUSY_WAIT = 2.0  # seconds for the page's thread to run our script before its own is stopped
COLLECT_TIMEOUT = 10.0  # seconds to collect a page's links, text and screenshot, at most
MAX_LINKS = 10_000  # links (and routes) kept from one page
MAX_TEXT = 1 << 20  # characters of a page's text kept
MAX_VIEWPORT = 10_000  # pixels either way
SCREENSHOT_TYPES = {"png": "image/png", "webp": "image/webp"}


class BrowserHung(Exception):
    """The browser did not give a page's rendering within its bound: restart it."""


class FormMissing(Exception):
    """The page holds no form with the fields a login fills in (the message names them)."""


@dataclass(frozen=True)
class FormFill:
    """A form a render fills in and submits (a scripted login): its ``fields`` by name, and the
    names that must be there (``required``: the page's other fields it may lack)."""

    fields: Mapping[str, str]
    required: tuple[str, ...]


@dataclass(frozen=True)
class RenderSettings:
    page_timeout: float = 30.0  # seconds for the whole page; at the bound, keep what it has
    max_scrolls: int = 20  # viewport-high scroll steps at most
    viewport: tuple[int, int] = (1280, 900)  # width, height in CSS pixels
    quiet: float = 0.5  # seconds of no request in flight that make the network idle
    screenshot_format: str = "png"  # or "webp"
    max_resources: int = 500  # requests handed to the answerer per page; later ones are refused

    def __post_init__(self) -> None:
        width, height = self.viewport
        problems = [
            ("page_timeout", self.page_timeout > 0, "must be more than 0 seconds"),
            ("max_scrolls", self.max_scrolls >= 0, "must be 0 or more"),
            ("viewport", all(isinstance(side, int) and 0 < side <= MAX_VIEWPORT for side in (width, height)),
             f"must be two whole numbers of pixels from 1 to {MAX_VIEWPORT}"),
            ("quiet", 0 <= self.quiet < self.page_timeout, "must be from 0 to less than page_timeout"),
            ("screenshot_format", self.screenshot_format in SCREENSHOT_TYPES,
             f"must be one of {', '.join(sorted(SCREENSHOT_TYPES))}"),
            ("max_resources", self.max_resources >= 1, "must be 1 or more"),
        ]
        for name, valid, rule in problems:
            if not valid:
                raise ValueError(f"render setting {name} = {getattr(self, name)!r} {rule}")


@dataclass(frozen=True)
class Rendering:
    url: str  # the document's final URL
    links: list[str]  # absolute http(s) URLs of the rendered DOM, normalised and deduplicated
    routes: list[str]  # URLs the page moved to with history.pushState/replaceState
    screenshot: bytes  # the viewport after the behaviours (scrolled back to the top)
    screenshot_type: str  # "image/png" or "image/webp"
    text: str  # document.body.innerText, at most MAX_TEXT characters
    timed_out: bool  # page_timeout was reached
    requests: int  # requests answered
    refused: int  # requests refused (the answerer said None, or past max_resources)
    scrolls: int  # scroll steps taken
    # The tab's cookies for the page once rendered (DevTools Network.Cookie objects): what its
    # scripts set too, for the site's cookie jar (archiver.web.cookies).
    cookies: list[dict[str, Any]] = field(default_factory=list)


def rendered_links(base: str, urls: Iterable[str], srcsets: Iterable[str],
                   most: int = MAX_LINKS) -> list[str]:
    """The http(s) URLs among ``urls`` and the candidates of ``srcsets``, resolved against
    ``base``, normalised, deduplicated in order, at most ``most``."""
    root = normalize(base)
    candidates = [*urls, *(url.rstrip(",") for srcset in srcsets for url in SRCSET_CANDIDATE.findall(srcset))]
    found: dict[str, None] = {}
    for candidate in candidates:
        url = normalize(candidate, root)
        if url is not None:
            found[url] = None
            if len(found) >= most:
                break
    return list(found)


def _number(value: Any) -> float:
    """A number the page's script returned; 0 for anything else (a page may patch what it calls)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _strings(value: Any, most: int = MAX_LINKS) -> list[str]:
    """The strings of a list the page's script returned, at most ``most``; [] if not a list."""
    return [item for item in value[:most] if isinstance(item, str)] if isinstance(value, list) else []


@dataclass
class _Tally:
    """What one render counts. As an answerer it hands each request to the caller's, counting,
    and refuses those past ``most`` without asking it."""

    answerer: Answerer
    most: int
    asked: int = 0
    answered: int = 0
    refused: int = 0
    scrolls: int = 0

    async def __call__(self, request: Request) -> Answer | None:
        if self.asked >= self.most:
            self.refused += 1
            return None
        self.asked += 1
        answer = await self.answerer(request)
        if answer is None:
            self.refused += 1
        else:
            self.answered += 1
        return answer


async def _behave(devtools: DevTools, session: str, traffic: Traffic, settings: RenderSettings,
                  tally: _Tally) -> None:
    """Open, start and scroll what the page has, waiting for network idle (bounded) after each step."""
    step_wait = max(STEP_WAIT, 4 * settings.quiet)
    try:
        world = await isolated_world(devtools, session)
        await evaluate(devtools, session, behaviours.PREPARE, context=world)
        while tally.scrolls < settings.max_scrolls:
            before = await evaluate(devtools, session, behaviours.SCROLL, context=world)
            tally.scrolls += 1
            with trio.move_on_after(step_wait):
                await traffic.idle(settings.quiet)
            height = _number(await evaluate(devtools, session, behaviours.HEIGHT, context=world))
            at_end = not isinstance(before, dict) or before.get("end") is not False
            if at_end and height <= _number(before.get("height") if isinstance(before, dict) else 0):
                break
        await evaluate(devtools, session, behaviours.PREPARE, context=world)  # what scrolling brought
        await evaluate(devtools, session, behaviours.TOP, context=world)
    except CommandError:
        pass  # the page navigated away from under a step: what it shows now is collected


async def _submit(devtools: DevTools, session: str, url: str, traffic: Traffic,
                  settings: RenderSettings, form: FormFill) -> None:
    """Fill in and submit the page's form once its own scripts are done; return once the
    submission's first request has begun."""
    await traffic.idle(settings.quiet)  # a form built by the page's scripts is there by now
    world = await isolated_world(devtools, session, COLLECT_TIMEOUT)
    begun = traffic.begun
    missing = await evaluate(devtools, session, f"({behaviours.FILL_AND_SUBMIT})"
                             f"({json.dumps(dict(form.fields))}, {json.dumps(form.required)})",
                             COLLECT_TIMEOUT, world)
    if missing:
        raise FormMissing(f"{url}: no form with {missing}")
    await traffic.begun_after(begun)


async def _collect(devtools: DevTools, session: str, url: str, settings: RenderSettings,
                   tally: _Tally, timed_out: bool) -> Rendering:
    expression = f"{behaviours.COLLECT}({MAX_LINKS}, {MAX_TEXT})"
    world: int | None = None
    with trio.move_on_after(BUSY_WAIT):
        world = await isolated_world(devtools, session, COLLECT_TIMEOUT)
    if world is None:  # a script of the page holds its thread (a busy loop): stop it, ask again
        await devtools.send("Runtime.terminateExecution", None, session, COLLECT_TIMEOUT)
        world = await isolated_world(devtools, session, COLLECT_TIMEOUT)
    state = await evaluate(devtools, session, expression, COLLECT_TIMEOUT, world)
    try:  # the recorder's list lives among the page's globals: what the page did to it is checked
        routes = await evaluate(devtools, session, behaviours.ROUTES, COLLECT_TIMEOUT)
    except CommandError:
        routes = []
    shot = await devtools.send("Page.captureScreenshot", {"format": settings.screenshot_format},
                               session, COLLECT_TIMEOUT)
    jar = await devtools.send("Network.getCookies", {"urls": [url]}, session, COLLECT_TIMEOUT)
    if not isinstance(state, dict):
        state = {}
    final = state.get("url")
    base = state.get("base")
    text = state.get("text")
    return Rendering(
        url=final if isinstance(final, str) and normalize(final) is not None else url,
        links=rendered_links(base if isinstance(base, str) else url, _strings(state.get("urls")),
                             _strings(state.get("srcsets"))),
        routes=list(dict.fromkeys(_strings(routes))),
        screenshot=base64.b64decode(shot["data"]),
        screenshot_type=SCREENSHOT_TYPES[settings.screenshot_format],
        text=text[:MAX_TEXT] if isinstance(text, str) else "",
        timed_out=timed_out,
        requests=tally.answered,
        refused=tally.refused,
        scrolls=tally.scrolls,
        cookies=[c for c in jar.get("cookies", ()) if isinstance(c, dict)],
    )


async def render_page(devtools: DevTools, url: str, answerer: Answerer,
                      settings: RenderSettings, cookies: Sequence[dict[str, Any]] = (),
                      form: FormFill | None = None) -> Rendering:
    """Render ``url`` in a new tab, every request answered by ``answerer`` (see the module);
    the tab (in a browser context of its own) starts with ``cookies`` (DevTools
    Network.CookieParam objects: the site's jar). With a ``form``, the page's form is filled
    in and submitted instead of the behaviours, and the rendering is of the page it leads to
    (FormMissing if the page has no such form).
    :class:`BrowserHung` if the browser gave no rendering in time; ``CommandError`` if the
    navigation failed at once (the document refused, say)."""
    tally = _Tally(answerer, settings.max_resources)
    traffic = Traffic()
    width, height = settings.viewport
    async with tab(devtools) as session:
        await devtools.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        await devtools.send("Page.addScriptToEvaluateOnNewDocument",
                            {"source": behaviours.ROUTES_RECORDER}, session)
        if cookies:
            await devtools.send("Network.setCookies", {"cookies": list(cookies)}, session)
        async with answer_requests(devtools, session, tally, traffic):
            with trio.move_on_after(settings.page_timeout) as waiting:
                await navigate(devtools, session, url)
                if form is None:
                    await _behave(devtools, session, traffic, settings, tally)
                else:
                    await _submit(devtools, session, url, traffic, settings, form)
                await traffic.idle(settings.quiet)
            try:
                with trio.fail_after(COLLECT_TIMEOUT):
                    if waiting.cancelled_caught:  # what still loads would hold the screenshot
                        await devtools.send("Page.stopLoading", None, session, COLLECT_TIMEOUT)
                    rendering = await _collect(devtools, session, url, settings, tally,
                                               waiting.cancelled_caught)
            except (trio.TooSlowError, DevToolsError) as error:
                raise BrowserHung(f"{url}: the browser gave no rendering within {COLLECT_TIMEOUT} s"
                                  + (f" ({error})" if str(error) else "")) from error
    return rendering
