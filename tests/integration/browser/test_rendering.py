"""The browser renders, archiver fetches: real Chromium renders a site that does not exist on the
network, every byte of it answered by a Python callback through the DevTools Fetch domain."""

from __future__ import annotations

import base64
import os
import signal

import trio

from archiver.browser.chromium import supervised
from archiver.browser.devtools import ConnectionLost
from archiver.browser.page import Answer, Request, answer_requests, evaluate, navigate, open_page

SITE = "http://modern.test"
PNG = base64.b64decode(  # a 1x1 transparent PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
PAGE = b"""<!doctype html><title>Modern</title><body><p id=static>Served by the callback</p>
<ul id=items></ul><script>
window.done = Promise.all([
  fetch("/api/items.json").then(r => r.json()).then(items => {
    for (const name of items) {
      const li = document.createElement("li"); li.textContent = name;
      document.getElementById("items").appendChild(li);
    }
  }),
  new Promise(resolve => {
    const img = new Image();
    img.onload = () => resolve("image " + img.naturalWidth + "x" + img.naturalHeight);
    img.onerror = () => resolve("image failed");
    img.src = "/pixel.png";
    document.body.appendChild(img);
  }).then(text => { const p = document.createElement("p"); p.textContent = text;
                    document.body.appendChild(p); }),
  fetch("/refused.json").then(() => "refused fetched", () => "refused failed").then(text => {
    const p = document.createElement("p"); p.textContent = text; document.body.appendChild(p);
  }),
]);
</script>"""
RESOURCES = {
    f"{SITE}/": ("text/html", PAGE),
    f"{SITE}/api/items.json": ("application/json", b'["alpha from JSON", "beta from JSON"]'),
    f"{SITE}/pixel.png": ("image/png", PNG),
}


class Site:
    """The callback: answers from RESOURCES, refuses the rest, and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, request: Request) -> Answer | None:
        self.asked.append((request.url, request.kind))
        if request.url not in RESOURCES:
            return None
        media, body = RESOURCES[request.url]
        return Answer(200, [("Content-Type", media), ("Content-Length", str(len(body)))], body)


async def render(devtools, site: Site) -> str:
    session = await open_page(devtools)
    async with answer_requests(devtools, session, site):
        await navigate(devtools, session, f"{SITE}/")
        return await evaluate(devtools, session, "window.done.then(() => document.body.innerText)")


async def test_every_request_goes_through_the_callback_and_the_page_renders_it() -> None:
    site = Site()
    with trio.fail_after(60):
        async with supervised() as browser:
            text = await render(await browser.devtools(), site)
    assert "Served by the callback" in text
    assert "alpha from JSON" in text and "beta from JSON" in text  # a script's fetch() of JSON
    assert "image 1x1" in text  # a script-made image request, decoded
    assert "refused failed" in text  # failRequest: a network error for the page, the rest renders
    asked = dict(site.asked)
    assert asked[f"{SITE}/"] == "Document"
    assert asked[f"{SITE}/api/items.json"] in {"Fetch", "XHR"}  # Chromium 150 says XHR
    assert asked[f"{SITE}/pixel.png"] == "Image"
    assert f"{SITE}/refused.json" in asked


async def test_a_killed_browser_is_noticed_and_the_next_page_renders_in_a_new_one() -> None:
    with trio.fail_after(90):
        async with supervised() as browser:
            devtools = await browser.devtools()
            first = browser.pid()
            assert first is not None and browser.memory() > 10 << 20  # the tree: tens of MiB
            stuck = trio.Event()

            async def hang(request: Request) -> Answer | None:
                stuck.set()  # the document's request: the page is now underway
                await trio.sleep_forever()
                return None

            session = await open_page(devtools)
            failed: list[BaseException] = []
            async with trio.open_nursery() as nursery, answer_requests(devtools, session, hang):
                async def load() -> None:
                    try:
                        await navigate(devtools, session, f"{SITE}/")
                    except ConnectionLost as error:
                        failed.append(error)

                nursery.start_soon(load)
                await stuck.wait()
                os.killpg(first, signal.SIGKILL)
            assert failed and isinstance(failed[0], ConnectionLost)  # failed at once, not at a timeout
            site = Site()
            text = await render(await browser.devtools(), site)
            assert browser.starts == 2 and browser.pid() not in (None, first)
    assert "alpha from JSON" in text
