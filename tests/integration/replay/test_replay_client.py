"""Client-side rewriting in a real browser: an archived page whose scripts build a link, images,
a fetch() and XMLHttpRequest call, a media element, a WebSocket, cookies, a location write and a
postMessage, replayed in headless Chromium. Everything it loads comes from the replay's content
origin (the page's requests and Chromium's NetLog), the built link and the location write
navigate inside the archive, the audio is seeked by a range request, and the page reads the
archived JSON. The archive is written as another tool would (tests/support/replayarchive).
"""

from __future__ import annotations

import io
import json
import math
import struct
import wave

import trio

from archiver.config import Config
from archiver.replay.app import CLIENT_SCRIPT, CLIENT_SRC
from archiver.replay.scripts import LOCATION
from demoweb import content
from tests.support import chromium
from tests.support.chromium import ERR_NAME_NOT_RESOLVED, read_netlog
from tests.support.crawls import load
from tests.support.rawhttp import get
from tests.support.replayarchive import serving, write_archive

STAMP = "20260101000000"
STEP = 10.0  # seconds allowed for one step in the browser (it takes well under one here)
SITE = "http://scripted.test"
NEWS = {"headline": "archived news", "items": [1, 2, 3]}
SECONDS = 40  # of audio: long enough that Chromium fetches it in parts
SCRIPTED = b"""<!DOCTYPE html><html><head><title>scripted</title><script>
window.results = {messages: []};
window.addEventListener("message", (event) => results.messages.push([event.origin, event.data]));
window.finished = new Promise((finish) => document.addEventListener("DOMContentLoaded", async () => {
  const link = document.createElement("a");
  link.id = "built";
  link.textContent = "a link built by a script";
  link.href = "/" + "next" + ".html";
  document.body.append(link);
  const image = new Image();
  image.id = "built-image";
  image.src = "/img/" + "dot.png";
  document.body.append(image);
  document.body.insertAdjacentHTML("beforeend", '<p><img id="inserted" src="/img/dot.png?via=markup"></p>');
  const set = document.createElement("img");
  set.id = "attribute";
  set.setAttribute("src", location.origin + "/img/dot.png?via=attribute");
  document.body.append(set);
  results.fetched = await (await fetch("/data/" + "news.json")).json();
  results.requested = await new Promise((done) => {
    const request = new XMLHttpRequest();
    request.open("GET", "data/news.json");
    request.onload = () => done(JSON.parse(request.responseText));
    request.onerror = () => done("error");
    request.send();
  });
  // Asked with credentials, which the archive never allows across origins: sent without them.
  results.credentialed = await (await fetch("/data/news.json", {credentials: "include"})).json();
  results.credentialedRequest = await new Promise((done) => {
    const request = new XMLHttpRequest();
    request.open("GET", "/data/news.json");
    request.withCredentials = true;
    request.onload = () => done(JSON.parse(request.responseText));
    request.onerror = () => done("error");
    request.send();
  });
  results.socket = await new Promise((done) => {
    const socket = new WebSocket("ws://scripted.test/live");
    socket.onerror = () => done("error");
    socket.onopen = () => done("open");
  });
  document.cookie = "visit=1; path=/";
  document.cookie = "elsewhere=1; path=/other/";
  results.cookie = document.cookie;
  results.domain = document.domain;
  const here = location.href;
  history.pushState(null, "", "/pushed" + ".html");
  // What the script reads (the archived URL), and where the tab really is (a computed member,
  // which replay does not rewrite).
  results.pushed = [location.href, window["location"].href];
  history.replaceState(null, "", here);
  finish(results);
}));
</script></head><body><h1>Scripted</h1>
<video id="clip" preload="metadata" muted></video>
<script>document.getElementById("clip").src = "/media/" + "tone.wav";
document.write('<img id="written" src="/img/dot.png?via=write">');</script>
<button id="go" onclick="location.href = '/other.html'">go</button>
<iframe id="child" srcdoc="<script>parent.postMessage('hello', 'http://scripted.test');
parent.postMessage('not for you', 'http://elsewhere.test');</script>"></iframe>
</body></html>"""


def page(title: str) -> bytes:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{title}</body></html>".encode()


def tone(seconds: int) -> bytes:
    """A WAV file: a 440 Hz tone, 8 kHz, 16-bit mono."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        samples = (int(8000 * math.sin(2 * math.pi * 440 * i / 8000)) for i in range(8000 * seconds))
        wav.writeframes(b"".join(struct.pack("<h", sample) for sample in samples))
    return out.getvalue()


def write(config: Config) -> dict[str, bytes | tuple[bytes, str]]:
    archived: dict[str, bytes | tuple[bytes, str]] = {
        f"{SITE}/": SCRIPTED,
        f"{SITE}/next.html": page("next"),
        f"{SITE}/other.html": page("other"),
        f"{SITE}/img/dot.png": (content.png("dot", 8, 8), "image/png"),
        f"{SITE}/img/dot.png?via=markup": (content.png("dot", 8, 8), "image/png"),
        f"{SITE}/img/dot.png?via=attribute": (content.png("dot", 8, 8), "image/png"),
        f"{SITE}/img/dot.png?via=write": (content.png("dot", 8, 8), "image/png"),
        f"{SITE}/data/news.json": (json.dumps(NEWS).encode(), "application/json"),
        f"{SITE}/media/tone.wav": (tone(SECONDS), "audio/wav"),
    }
    write_archive(config, STAMP, archived)
    return archived


async def test_a_tabbuilt_by_scripts_stays_in_the_archive(tmp_path):
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(tmp_path / "archiver.toml")
    write(config)
    netlog = tmp_path / "netlog.json"
    rules = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    async with serving(config) as replay:
        origin = replay.content
        async with (
            chromium.chromium(tmp_path / "chromium", rules, [f"--log-net-log={netlog}"]) as browser,
            chromium.connect(browser.port, browser.path) as devtools,
        ):
            page = await devtools.open_page()
            await page.enable()
            start = f"{origin}/web/{STAMP}/{SITE}/"
            with trio.fail_after(STEP):
                await page.goto(start)
                results = await page.evaluate("finished")
            assert results["fetched"] == NEWS and results["requested"] == NEWS
            assert results["credentialed"] == NEWS and results["credentialedRequest"] == NEWS
            assert results["socket"] == "error"
            assert results["cookie"] == "visit=1"
            assert results["domain"] == "scripted.test"
            assert results["messages"] == [[SITE, "hello"]]
            archive = f"{origin}/web/{STAMP}"
            assert results["pushed"] == [f"{SITE}/pushed.html", f"{archive}/{SITE}/pushed.html"]
            assert await page.evaluate("built.href") == f"{archive}/{SITE}/next.html"
            built = (
                ("built-image", "img/dot.png"),
                ("inserted", "img/dot.png?via=markup"),
                ("attribute", "img/dot.png?via=attribute"),
                ("written", "img/dot.png?via=write"),  # by document.write: the observer's
            )
            for element, url in built:
                src = await page.evaluate(f"document.getElementById('{element}').src")
                assert src == f"{archive}im_/{SITE}/{url}"
                with trio.fail_after(STEP):
                    loaded = await page.evaluate(
                        f"(async () => {{ const image = document.getElementById('{element}'); "
                        "await image.decode(); return image.naturalWidth; })()"
                    )
                assert loaded == 8

            # The audio: its metadata, then a seek near the end, which Chromium asks as a range.
            since = devtools.mark()
            with trio.fail_after(STEP):
                duration = await page.evaluate(
                    "new Promise(done => { const clip = document.getElementById('clip'); "
                    "if (clip.readyState >= 1) done(clip.duration); "
                    "else clip.addEventListener('loadedmetadata', () => done(clip.duration)); })"
                )
                assert round(duration) == SECONDS
                await page.evaluate(
                    "new Promise(done => { const clip = document.getElementById('clip'); "
                    "clip.addEventListener('seeked', () => done(), {once: true}); "
                    f"clip.currentTime = {SECONDS - 2}; }})"
                )
            media = f"{archive}oe_/{SITE}/media/tone.wav"
            size = len(tone(SECONDS))

            def seek(params: dict) -> bool:
                asked = params["request"]["headers"].get("Range", "")
                return params["request"]["url"] == media and asked.startswith("bytes=") and (
                    int(asked[6:].split("-")[0]) > size // 2
                )

            with trio.fail_after(STEP):
                request = await page.wait_for("Network.requestWillBeSent", since, seek)
                answer = await page.wait_for(
                    "Network.responseReceived", since, lambda p: p["requestId"] == request.params["requestId"]
                )
            asked = request.params["request"]["headers"]["Range"][6:].split("-")[0]
            assert answer.params["response"]["status"] == 206
            ranged = answer.params["response"]["headers"]["content-range"]
            assert ranged == f"bytes {asked}-{size - 1}/{size}"

            # The built link, clicked, and the location write, navigate inside the archive.
            for button, path, title in (("built", "next.html", "next"), ("go", "other.html", "other")):
                with trio.fail_after(STEP):
                    await page.goto(start)
                    await page.evaluate("finished")  # the page's scripts are done
                since = devtools.mark()
                await page.click(f"document.getElementById('{button}')")
                with trio.fail_after(STEP):
                    landed = await page.next_document(since)
                assert landed == f"{archive}/{SITE}/{path}"
                assert await page.evaluate("document.title") == title

            requested = page.requests()
            assert len(requested) >= 10
            assert [url for url in requested if not url.startswith(origin + "/")] == []
            await browser.quit(devtools)

    net = read_netlog(netlog)
    assert net.tcp_peers == {"127.0.0.1"}
    elsewhere = {url: error for url, error in net.requests.items() if not url.startswith(origin + "/")}
    assert all(error == ERR_NAME_NOT_RESOLVED for error in elsewhere.values()), elsewhere


async def test_scripts_are_served_rewritten_and_archived_content_answers_cors(tmp_path):
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(tmp_path / "archiver.toml")
    navigating = b"if (x) location.href = '/a';"
    write_archive(config, STAMP, {
        f"{SITE}/": page("home"),
        f"{SITE}/app.js": (navigating, "application/javascript"),
        f"{SITE}/plain.js": (b"var a = 1;", "text/javascript"),
    })  # fmt: skip
    async with serving(config) as replay:
        status, headers, body = await get(replay.content, f"/web/{STAMP}js_/{SITE}/app.js")
        assert status == 200 and body == f"if (x) {LOCATION}.href = '/a';".encode()
        assert headers["content-type"] == "application/javascript; charset=utf-8"
        status, headers, body = await get(replay.content, f"/web/{STAMP}id_/{SITE}/app.js")
        assert body == navigating
        status, headers, body = await get(replay.content, f"/web/{STAMP}js_/{SITE}/plain.js")
        assert body == b"var a = 1;" and headers["content-type"] == "text/javascript"

        # A replayed page's requests say Origin: null (an opaque origin); it may read the answers,
        # never with credentials.
        status, headers, _ = await get(replay.content, f"/web/{STAMP}id_/{SITE}/app.js", Origin="null")
        assert headers["access-control-allow-origin"] == "null"
        assert "access-control-allow-credentials" not in headers
        asked = {"Origin": "null", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "x-requested-with,authorization,x-token"}
        status, headers, _ = await get(replay.content, f"/web/{STAMP}id_/{SITE}/app.js", "OPTIONS", **asked)
        assert status == 204
        assert headers["access-control-allow-methods"] == "GET, HEAD"
        assert headers["access-control-allow-headers"] == "x-requested-with"
        assert "access-control-allow-credentials" not in headers
        # The replay's own pages stay closed to other origins.
        status, headers, _ = await get(replay.app, "/", Origin="null")
        assert status == 200 and "access-control-allow-origin" not in headers

        status, headers, body = await get(replay.content, CLIENT_SRC)
        assert status == 200 and body == CLIENT_SCRIPT
        assert headers["content-type"].startswith("text/javascript")
        assert "immutable" in headers["cache-control"]
        status, _, body = await get(replay.content, f"/web/{STAMP}/{SITE}/")
        assert status == 200 and f'<script src="{CLIENT_SRC}"'.encode() in body


# A page that keeps its state as documentation sites do (a theme in localStorage, a tab in
# sessionStorage, a cookie) and shows it, and a page that refreshes (the Apache manual's root
# does) into another.
STORING = b"""<!DOCTYPE html><html><head><title>storing</title><script>
localStorage.setItem("theme", "dark");
localStorage.count = 2;
localStorage.setItem("gone", "1");
localStorage.removeItem("gone");
sessionStorage.setItem("tab", "one");
document.cookie = "a=1";
document.cookie = "expired=1; max-age=0";
window.stored = {
  keys: Object.keys(localStorage).sort(), length: localStorage.length, first: localStorage.key(0),
  missing: localStorage.getItem("gone"), isStorage: localStorage instanceof Storage,
  json: JSON.stringify(sessionStorage), quota: (() => {
    try { sessionStorage.setItem("big", "x".repeat(6 * 1024 * 1024)); return "stored"; }
    catch (e) { return e.name; }
  })(),
};
sessionStorage.clear();
</script></head><body><p id="shown"></p>
<script>document.getElementById("shown").textContent =
  [localStorage.getItem("theme"), localStorage.count, sessionStorage.length, document.cookie]
  .join(" ");</script>
</body></html>"""
REFRESHING = b'<!DOCTYPE html><html><head><meta http-equiv="refresh" content="0; url=en/index.html"></head>'
READING = b"""<!DOCTYPE html><html><head><title>reading</title><script>
window.read = [localStorage.getItem("theme"), sessionStorage.length, document.cookie];
</script></head><body></body></html>"""


async def test_replayed_scripts_get_storage_cookies_and_a_frame_refresh_stays_framed(tmp_path):
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(tmp_path / "archiver.toml")
    stored, other = "http://stored.test", "http://other.test"
    write_archive(config, STAMP, {
        f"{stored}/": STORING,
        f"{stored}/manual/": REFRESHING,
        f"{stored}/manual/en/index.html": page("manual"),
        f"{other}/": READING,
    })  # fmt: skip
    rules = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    async with (
        serving(config) as replay,
        chromium.chromium(tmp_path / "chromium", rules) as browser,
        chromium.connect(browser.port, browser.path) as devtools,
    ):
        tab = await devtools.open_page()
        await tab.enable()
        await tab.send("Runtime.enable")
        since = devtools.mark()
        archive = f"{replay.content}/web/{STAMP}"
        with trio.fail_after(STEP):
            await tab.goto(f"{archive}/{stored}/")
        thrown = [e.params for e in devtools.events[since:] if e.method == "Runtime.exceptionThrown"]
        assert thrown == []
        # What the page shows: sessionStorage is cleared by then; the expired cookie is gone.
        assert await tab.evaluate("document.getElementById('shown').textContent") == "dark 2 0 a=1"
        assert await tab.evaluate("window.stored") == {
            "keys": ["count", "theme"], "length": 2, "first": "theme", "missing": None, "isStorage": True,
            "json": '{"tab":"one"}', "quota": "QuotaExceededError",
        }  # fmt: skip
        # A frame-mode page's refresh stays in frame mode: no banner comes in.
        with trio.fail_after(STEP):
            await tab.goto(f"{archive}if_/{stored}/manual/")
            refreshed = await tab.next_document(devtools.mark())
        assert refreshed == f"{archive}if_/{stored}/manual/en/index.html"
        assert await tab.evaluate("document.querySelector('#archiver-banner')") is None

        # Another archived site in the same tab starts with nothing of the first's.
        with trio.fail_after(STEP):
            await tab.goto(f"{archive}/{other}/")
        assert await tab.evaluate("window.read") == [None, 0, ""]
        await browser.quit(devtools)
