"""render_page in real Chromium: each behaviour, the rendered links and routes, the bounds (time,
resources), the screenshot, and the tab closed after. The site is a dict answered by a callback."""

from __future__ import annotations

import json
import os
import signal
import struct
import time
from collections.abc import Awaitable, Callable

import pytest
import trio

from archiver.browser.chromium import supervised
from archiver.browser.devtools import CommandError
from archiver.browser.page import Answer, Request
from archiver.browser.render import COLLECT_TIMEOUT, BrowserHung, Rendering, RenderSettings, render_page

SITE = "http://modern.test"
PNG = bytes.fromhex(  # a 1x1 transparent PNG
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6364f8ffbf1e000502027fa8a6d5b10000000049454e44ae426082")
FAST = RenderSettings(page_timeout=20, quiet=0.3)
Handler = Callable[[Request], Awaitable[Answer | None]]


def html(body: str) -> tuple[str, bytes]:
    return "text/html", f"<!doctype html><meta charset=utf-8><title>t</title><body>{body}".encode()


class Site:
    """Answers from ``pages`` (URL -> (media type, body), or a handler), refuses the rest, and
    keeps every URL it was asked, in order."""

    def __init__(self, pages: dict[str, tuple[str, bytes] | Handler]) -> None:
        self.pages = pages
        self.asked: list[str] = []

    async def __call__(self, request: Request) -> Answer | None:
        self.asked.append(request.url)
        page = self.pages.get(request.url)
        if page is None:
            return None
        if callable(page):
            return await page(request)
        media, body = page
        return Answer(200, [("Content-Type", media), ("Content-Length", str(len(body)))], body)


async def render(site: Site, url: str = f"{SITE}/", settings: RenderSettings = FAST) -> Rendering:
    with trio.fail_after(90):
        async with supervised() as browser:
            return await render_page(await browser.devtools(), url, site, settings)


async def test_links_built_by_a_script_are_rendered_links() -> None:
    page = html("""<a href="/static">static</a><script>
    const add = (html) => document.body.insertAdjacentHTML("beforeend", html);
    add('<a href="/built/one#part">one</a><a href="built/two?x=1">two</a>');
    add('<a href="mailto:someone@example.org">mail</a><a href="javascript:void 0">js</a>');
    add('<img srcset="/small.png 1x, /large.png 2x" alt="">');
    add('<iframe src="/frame.html"></iframe><area href="/area" alt="">');
    add('<video src="/clip.webm" preload="none"></video><link rel="next" href="/next">');
    add('<a href="http://other.test/far">far</a>');
    </script>""")
    rendering = await render(Site({f"{SITE}/": page, f"{SITE}/frame.html": html("frame")}))
    assert {f"{SITE}/static", f"{SITE}/built/one", f"{SITE}/built/two?x=1", f"{SITE}/small.png",
            f"{SITE}/large.png", f"{SITE}/frame.html", f"{SITE}/area", f"{SITE}/clip.webm",
            f"{SITE}/next", "http://other.test/far"} <= set(rendering.links)
    assert all(link.startswith("http") for link in rendering.links)  # no mailto:, javascript:
    assert len(rendering.links) == len(set(rendering.links))
    assert rendering.url == f"{SITE}/"


async def test_a_page_that_moves_on_by_script_or_redirect_is_rendered_where_it_arrives() -> None:
    async def slow(request: Request) -> Answer | None:
        await trio.sleep(1)  # holds the first document's load past the script that moves on
        return None

    async def moved(request: Request) -> Answer | None:
        return Answer(302, [("Location", "/there")], b"")

    site = Site({f"{SITE}/": html('<script>location.replace("/there")</script><img src="/slow.png">'),
                 f"{SITE}/slow.png": slow, f"{SITE}/moved": moved, f"{SITE}/there": html("<p>Arrived</p>")})
    for start in (f"{SITE}/", f"{SITE}/moved"):
        rendering = await render(site, start, RenderSettings(page_timeout=15, quiet=0.3))
        assert not rendering.timed_out  # the load of /there ended the wait, not page_timeout
        assert rendering.url == f"{SITE}/there" and "Arrived" in rendering.text


async def test_routes_the_page_pushes_at_load_are_kept() -> None:
    page = html("""<script>
    history.pushState({}, "", "/app/inbox");
    history.replaceState({}, "", "settings?tab=2");
    history.pushState({}, "");  // no URL: no route
    </script>""")
    rendering = await render(Site({f"{SITE}/": page}))
    assert rendering.routes == [f"{SITE}/app/inbox", f"{SITE}/app/settings?tab=2"]
    assert rendering.url == f"{SITE}/app/settings?tab=2"


async def test_a_page_that_patches_what_our_scripts_call_is_still_rendered() -> None:
    page = html("""<details><summary>More</summary><p>Folded text</p></details>
    <a href="/kept">kept</a><script>
    Document.prototype.querySelectorAll = () => 42;
    Element.prototype.querySelectorAll = () => 42;
    Object.defineProperty(Element.prototype, "scrollHeight", {get: () => "tall"});
    window.scrollBy = () => { throw new Error("no scrolling here"); };
    history.pushState({}, "", "/patched");
    window.__archiverRoutes.push({not: "a string"});
    </script>""")
    rendering = await render(Site({f"{SITE}/": page}))
    assert "Folded text" in rendering.text  # the behaviours ran apart from the page's globals
    assert f"{SITE}/kept" in rendering.links
    assert rendering.routes == [f"{SITE}/patched"]  # what is not a URL string is dropped


def endless_list(last: int | None) -> dict[str, tuple[str, bytes] | Handler]:
    """A list fetching its next page of items when its end comes into view; ``last`` pages in
    all (None: endless). Each page is taller than the viewport."""
    page = html("""<ul id=list style="margin:0"></ul><div id=end>end</div><script>
    let next = 1, loading = false;
    const end = document.getElementById("end");
    new IntersectionObserver(entries => {
      if (!entries.some(entry => entry.isIntersecting) || loading || next === null) return;
      loading = true;
      fetch("/items?page=" + next).then(r => r.json()).then(data => {
        for (const item of data.items) {
          const li = document.createElement("li");
          li.textContent = item; li.style.height = "200px";
          document.getElementById("list").appendChild(li);
        }
        next = data.next; loading = false;
      });
    }).observe(end);
    </script>""")
    pages: dict[str, tuple[str, bytes] | Handler] = {f"{SITE}/": page}
    for number in range(1, 100):
        following = number + 1 if last is None or number < last else None
        body = json.dumps({"items": [f"item {number}.{i}" for i in range(8)], "next": following})
        pages[f"{SITE}/items?page={number}"] = ("application/json", body.encode())
    return pages


def list_pages(site: Site) -> list[int]:
    return [int(url.rpartition("=")[2]) for url in site.asked if "/items?page=" in url]


async def test_an_endless_list_is_scrolled_to_its_end_and_no_further() -> None:
    site = Site(endless_list(last=4))
    rendering = await render(site)
    assert list_pages(site) == [1, 2, 3, 4]
    assert "item 4.7" in rendering.text
    assert rendering.scrolls < FAST.max_scrolls  # stopped once the page no longer grew


async def test_an_endless_list_stops_at_max_scrolls() -> None:
    site = Site(endless_list(last=None))
    rendering = await render(site, settings=RenderSettings(page_timeout=20, quiet=0.3, max_scrolls=3))
    assert rendering.scrolls == 3
    assert 2 <= len(list_pages(site)) <= 1 + 3  # the first page, then one at most per scroll


async def test_a_lazy_image_below_the_fold_is_requested() -> None:
    page = html('<div style="height:6000px">tall</div><img loading=lazy src="/lazy.png" alt="">')
    site = Site({f"{SITE}/": page, f"{SITE}/lazy.png": ("image/png", PNG)})
    await render(site, settings=RenderSettings(page_timeout=20, quiet=0.3, max_scrolls=0))
    assert f"{SITE}/lazy.png" in site.asked  # made eager: no scrolling needed


async def test_a_video_that_preloads_nothing_has_its_source_requested() -> None:
    page = html('<video preload=none controls><source src="/clip.webm" type="video/webm"></video>')
    site = Site({f"{SITE}/": page, f"{SITE}/clip.webm": ("video/webm", b"\x1a\x45\xdf\xa3" + bytes(64))})
    await render(site)
    assert f"{SITE}/clip.webm" in site.asked


async def test_details_are_opened() -> None:
    page = html("<details><summary>More</summary><p>Folded text</p></details>")
    rendering = await render(Site({f"{SITE}/": page}))
    assert "Folded text" in rendering.text and "More" in rendering.text


async def test_a_request_never_answered_ends_at_page_timeout_with_what_the_page_had() -> None:
    async def never(request: Request) -> Answer | None:
        await trio.sleep_forever()
        return None

    page = html('<p>Shown before the wait</p><script>fetch("/slow.json")</script>')
    site = Site({f"{SITE}/": page, f"{SITE}/slow.json": never})
    settings = RenderSettings(page_timeout=3, quiet=0.3)
    started = time.monotonic()
    rendering = await render(site, settings=settings)
    assert rendering.timed_out
    assert time.monotonic() - started < 3 + 10  # the timeout, a browser start, the collection
    assert "Shown before the wait" in rendering.text
    assert rendering.screenshot.startswith(b"\x89PNG")


async def test_a_script_that_keeps_fetching_ends_at_page_timeout() -> None:
    page = html('<p>Busy</p><script>setInterval(() => fetch("/tick.json"), 100)</script>')
    site = Site({f"{SITE}/": page, f"{SITE}/tick.json": ("application/json", b"{}")})
    rendering = await render(site, settings=RenderSettings(page_timeout=3, quiet=0.3, max_resources=10_000))
    assert rendering.timed_out
    assert "Busy" in rendering.text
    assert rendering.requests > 10  # it kept fetching, each answered


async def test_a_script_that_never_yields_is_stopped_and_the_page_still_rendered() -> None:
    page = html("""<p>Busy for ever</p><script>
    addEventListener("load", () => setTimeout(() => { for (;;) {} }, 0));
    </script>""")
    site = Site({f"{SITE}/": page, f"{SITE}/next": html("<p>Next page</p>")})
    with trio.fail_after(90):
        async with supervised() as browser:
            devtools = await browser.devtools()
            rendering = await render_page(devtools, f"{SITE}/", site,
                                          RenderSettings(page_timeout=3, quiet=0.3))
            assert rendering.timed_out and "Busy for ever" in rendering.text
            assert rendering.screenshot.startswith(b"\x89PNG")
            following = await render_page(devtools, f"{SITE}/next", site, FAST)
    assert "Next page" in following.text and browser.starts == 1


async def test_a_browser_that_no_longer_answers_raises_browser_hung_in_bounded_time() -> None:
    async def stop_the_browser(request: Request) -> Answer | None:
        os.killpg(pid, signal.SIGSTOP)  # every process of it, renderer included, stands still
        return None

    site = Site({f"{SITE}/": html('<p>Frozen</p><img src="/freeze.png" alt="">'),
                 f"{SITE}/freeze.png": stop_the_browser})
    with trio.fail_after(90):
        async with supervised(grace=1) as browser:
            devtools = await browser.devtools()
            pid = browser.pid()
            assert pid is not None
            started = time.monotonic()
            try:
                with pytest.raises(BrowserHung, match="no rendering within"):
                    await render_page(devtools, f"{SITE}/", site, RenderSettings(page_timeout=2, quiet=0.3))
                elapsed = time.monotonic() - started
            finally:
                os.killpg(pid, signal.SIGCONT)
    # page_timeout, the collection's bound, the tab's close (5 s at most), and room
    assert elapsed < 2 + COLLECT_TIMEOUT + 5 + 10


async def test_requests_past_max_resources_are_refused_without_asking_the_answerer() -> None:
    images = "".join(f'<img src="/image{number}.png" alt="">' for number in range(10))
    pages: dict[str, tuple[str, bytes] | Handler] = {f"{SITE}/": html(images)}
    pages.update({f"{SITE}/image{number}.png": ("image/png", PNG) for number in range(10)})
    site = Site(pages)
    rendering = await render(site, settings=RenderSettings(page_timeout=20, quiet=0.3, max_resources=4))
    assert len(site.asked) == 4 and rendering.requests == 4
    assert rendering.refused >= 7  # the other images (and the favicon, if asked)
    assert not rendering.timed_out


async def test_the_screenshot_is_a_png_of_the_viewport_and_webp_when_asked() -> None:
    site = Site({f"{SITE}/": html("<h1>Picture</h1>")})
    rendering = await render(site, settings=RenderSettings(page_timeout=20, quiet=0.3, viewport=(1000, 640)))
    assert rendering.screenshot_type == "image/png"
    assert rendering.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and rendering.screenshot[12:16] == b"IHDR"
    assert struct.unpack(">II", rendering.screenshot[16:24]) == (1000, 640)
    webp = await render(site, settings=RenderSettings(page_timeout=20, quiet=0.3, screenshot_format="webp"))
    assert webp.screenshot_type == "image/webp"
    assert webp.screenshot[:4] == b"RIFF" and webp.screenshot[8:12] == b"WEBP"


async def test_the_tab_is_closed_after_a_render_a_timeout_a_cancellation_and_a_refusal() -> None:
    async def never(request: Request) -> Answer | None:
        await trio.sleep_forever()
        return None

    site = Site({f"{SITE}/": html("<p>one</p>"), f"{SITE}/hung": never})
    with trio.fail_after(90):
        async with supervised() as browser:
            devtools = await browser.devtools()

            async def pages() -> set[str]:
                targets = (await devtools.send("Target.getTargets"))["targetInfos"]
                return {target["targetId"] for target in targets if target["type"] == "page"}

            before = await pages()
            await render_page(devtools, f"{SITE}/", site, FAST)
            assert await pages() == before
            rendering = await render_page(devtools, f"{SITE}/hung", site,
                                          RenderSettings(page_timeout=2, quiet=0.3))
            assert rendering.timed_out
            assert await pages() == before
            with trio.move_on_after(1):  # cancelled by its caller mid-page
                await render_page(devtools, f"{SITE}/hung", site, RenderSettings(page_timeout=20))
            assert await pages() == before
            with pytest.raises(CommandError, match=r"refused\.html"):  # the document refused
                await render_page(devtools, f"{SITE}/refused.html", site, FAST)
            assert await pages() == before


async def test_pages_rendered_at_once_each_see_their_elements_come_into_view() -> None:
    """Tabs of one window: only the newest is visible, and IntersectionObserver fires in no other,
    so each page gets a window of its own."""
    sites = [Site(endless_list(last=4)) for _ in range(3)]
    with trio.fail_after(120):
        async with supervised() as browser, trio.open_nursery() as nursery:
            devtools = await browser.devtools()
            for site in sites:
                nursery.start_soon(render_page, devtools, f"{SITE}/", site, FAST)
    assert [list_pages(site) for site in sites] == [[1, 2, 3, 4]] * 3


async def test_the_tab_starts_with_the_sites_cookies_and_gives_back_what_scripts_set() -> None:
    page = html("""<script>
    document.cookie = "theme=dark; path=/";
    fetch("/echo?c=" + encodeURIComponent(document.cookie));
    </script>""")
    echo = html("echo")
    site = Site({f"{SITE}/": page})
    site.pages.update({f"{SITE}/echo?c=visitor%3Dabc%3B%20theme%3Ddark": echo,
                       f"{SITE}/echo?c=theme%3Ddark%3B%20visitor%3Dabc": echo})
    cookies = [{"name": "visitor", "value": "abc", "url": f"{SITE}/", "path": "/"}]
    with trio.fail_after(90):
        async with supervised() as browser:
            devtools = await browser.devtools()
            rendering = await render_page(devtools, f"{SITE}/", site, FAST, cookies)
            # A browser context per tab: the next page starts without this one's cookies.
            other = await render_page(devtools, f"{SITE}/", Site({f"{SITE}/": html("x")}), FAST)
    echoed = [url for url in site.asked if "/echo?" in url]
    assert len(echoed) == 1 and "visitor%3Dabc" in echoed[0]  # the script saw the jar's cookie
    assert {(c["name"], c["value"]) for c in rendering.cookies} == {("visitor", "abc"),
                                                                  ("theme", "dark")}
    assert other.cookies == []
