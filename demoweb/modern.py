"""The modern site of the demo web (spec.modern): pages that build their content with scripts.

`modern.<domain>` serves a static home page, a static About page, and pages written for the
browser-capture tests (MODERN_PAGES): content and links fetched as JSON, an infinite-scroll list,
lazy images, a single-page app with pushState routes, a script-chosen video source, a
script-built srcset, a cache-busting XHR with a JSONP call, a page whose first script robots.txt
disallows (`/private/`), and a page whose script and stylesheet come from `assets.<domain>` (its
own robots.txt allows all). The pages' scripts are plain ES2020, run no timers and request only
URLs of these two hosts; what each page is built to request is MODERN_REQUESTS.

Pure like the model: `resource` finds what a path answers, `document` writes an HTML page with
the references its markup carries (what a crawler that runs no script finds), `reply` the
bytes of any other resource.
"""

from __future__ import annotations

import html
import json
import random
import re

from demoweb import content

ITEM_PAGES = 5  # /api/items?page=1..5; page 5 says there is no next one
ITEMS_PER_PAGE = 10
ARTICLES = 3
APP_ROUTES = ("intro", "guide", "faq")
LAZY_IMAGES = 4  # 1 and 2 have loading="lazy", 3 and 4 a data-src swapped in by a script
SRCSET_WIDTHS = (480, 800, 1200)
# The HTML pages that need scripts to show their content, in the order "/" links them.
MODERN_PAGES = (
    "/fetch.html",
    "/scroll.html",
    "/lazy.html",
    "/app/",
    "/video.html",
    "/srcset.html",
    "/xhr.html",
    "/blocked.html",
    "/cdn.html",
)
# What a browser loading each page (scrolled to the end, its media played) requests beside the
# page itself: targets on modern.<domain>, or "//assets" + target on assets.<domain>. A target
# ending in "*" is a prefix (a cache-busting value follows). srcset.html asks for one width of
# SRCSET_WIDTHS and video.html for one of the two clips, each the browser's choice: not listed.
MODERN_REQUESTS: dict[str, tuple[str, ...]] = {
    "/fetch.html": ("/api/content.json",),
    "/scroll.html": tuple(f"/api/items?page={n}" for n in range(1, ITEM_PAGES + 1)),
    "/lazy.html": tuple(f"/img/lazy-{n}.png" for n in range(1, LAZY_IMAGES + 1)),
    "/app/": ("/api/menu.json", f"/api/pages/{APP_ROUTES[0]}.json"),
    "/video.html": (),
    "/srcset.html": (),
    "/xhr.html": ("/api/news.json?_=*", "/api/jsonp.js?callback=jQuery3600_*"),
    "/blocked.html": ("/private/tracker.js", "/js/render.js"),
    "/cdn.html": ("//assets/lib/widget.js", "//assets/lib/widget.css"),
}
VIDEO_SOURCES = {"/media/clip.webm": "video/webm", "/media/clip.mp4": "video/mp4"}
_CALLBACK = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,63}")
_ITEMS = re.compile(r"/items/(\d+)\.html")
_ARTICLE = re.compile(r"/articles/(\d+)\.html")
_APP = re.compile(r"/app/[a-z0-9-]*")
_HTML = "text/html; charset=utf-8"
_JSON = "application/json"
_JS = "text/javascript"

# Every fixed resource of each host: path+query -> kind ("page" for HTML, else a reply kind).
_MODERN = {
    "/": "page",
    "/about.html": "page",
    **dict.fromkeys(MODERN_PAGES, "page"),
    **{f"/articles/{n}.html": "page" for n in range(1, ARTICLES + 1)},
    **{f"/items/{n}.html": "page" for n in range(1, ITEM_PAGES * ITEMS_PER_PAGE + 1)},
    "/api/content.json": "json",
    **{f"/api/items?page={n}": "json" for n in range(1, ITEM_PAGES + 1)},
    "/api/menu.json": "json",
    **{f"/api/pages/{route}.json": "json" for route in APP_ROUTES},
    "/js/render.js": "js",
    "/private/tracker.js": "js",
    **{f"/img/lazy-{n}.png": "png" for n in range(1, LAZY_IMAGES + 1)},
    **{f"/img/s-{w}.png": "png" for w in SRCSET_WIDTHS},
    **dict.fromkeys(VIDEO_SOURCES, "media"),
}
_ASSETS = {"/": "page", "/lib/widget.js": "js", "/lib/widget.css": "css"}


def paths(kind: str) -> dict[str, str]:
    """The fixed resources of the "modern" or the "assets" host (robots.txt aside)."""
    return _MODERN if kind == "modern" else _ASSETS


def resource(kind: str, target: str) -> str | None:
    """What a canonical path+query answers on the host of `kind`: "page", "json", "js", "css",
    "png", "media", "news", "jsonp", or None (404). Every /app/<route> is the app's shell."""
    found = paths(kind).get(target)
    if found is not None or kind != "modern":
        return found
    path, _, query = target.partition("?")
    if path == "/api/news.json":
        return "news"
    if path == "/api/jsonp.js" and _callback(query):
        return "jsonp"
    return "page" if _APP.fullmatch(path) and not query else None


def _callback(query: str) -> str:
    """The JSONP callback name a query asks for ("" if none or not a plain name)."""
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "callback" and _CALLBACK.fullmatch(value):
            return value
    return ""


def is_static(kind: str, path: str) -> bool:
    """Whether an HTML page of the host of `kind` shows its content without scripts."""
    return kind == "assets" or not (path in MODERN_PAGES or path.startswith("/app/"))


# -- documents -------------------------------------------------------------------------------

Ref = tuple[str, str, str]  # (link kind, raw reference, absolute URL)


def document(kind: str, path: str, origin: str, assets: str, seed: int) -> tuple[str, list[Ref]]:
    """The HTML page at `path` of the host of `kind` and the references its markup carries, in
    document order (`origin` is this host's, `assets` the assets host's)."""
    refs: list[Ref] = []

    def ref(link_kind: str, raw: str, base: str = origin) -> str:
        refs.append((link_kind, raw, raw if raw.startswith("http") else base + raw))
        return html.escape(raw)

    if kind == "assets":
        links = "".join(
            f'<li><a href="{ref("a/href", p)}">{p}</a></li>\n' for p in ("/lib/widget.js", "/lib/widget.css")
        )
        intro = "<p>Scripts and styles the modern pages share.</p>\n"
        return _page("Shared assets", f"{intro}<ul>\n{links}</ul>\n"), refs
    if path.startswith("/app/"):
        return _page("App", '<div id="app"></div>\n', script=_APP_SCRIPT), refs
    rng = random.Random(f"{seed}:modern:{path}")
    pool = content.paragraphs(seed)

    def prose(count: int) -> str:
        return "".join(f"<p>{html.escape(pool[rng.randrange(len(pool))])}</p>\n" for _ in range(count))

    if path == "/":
        anchors = [("/about.html", "About"), *((p, p.strip("/").removesuffix(".html")) for p in MODERN_PAGES)]
        items = "".join(f'<li><a href="{ref("a/href", p)}">{t}</a></li>\n' for p, t in anchors)
        return _page("Modern pages", prose(1) + f"<ul>\n{items}</ul>\n"), refs
    home = f'<p><a href="{ref("a/href", "/")}">Home</a></p>\n'
    if path == "/about.html":
        return _page("About the modern pages", prose(3) + home), refs
    if (found := _ARTICLE.fullmatch(path)) is not None:
        # A static page with an analytics snippet: a script, yet its content needs none.
        return _page(f"Article {found[1]}", prose(3) + home, script=_ANALYTICS), refs
    if (found := _ITEMS.fullmatch(path)) is not None:
        return _page(f"Item {found[1]}", prose(1) + home), refs
    if path == "/fetch.html":
        return _page("Loading", '<main id="content"></main>\n', script=_FETCH_SCRIPT), refs
    if path == "/scroll.html":
        return _page("Items", '<ul id="items"></ul>\n', script=_SCROLL_SCRIPT), refs
    if path == "/lazy.html":
        parts = []
        for n in range(1, LAZY_IMAGES + 1):
            parts.append('<div style="height: 3000px"></div>\n')
            source = f"/img/lazy-{n}.png"
            if n <= LAZY_IMAGES // 2:
                image = f'src="{ref("img/src", source)}" loading="lazy"'
            else:
                image = f'data-src="{source}" class="lazy"'
            parts.append(f'<img {image} width="64" height="64" alt="">\n')
        return _page("Gallery", "".join(parts), script=_LAZY_SCRIPT), refs
    if path == "/video.html":
        player = '<video id="player" preload="none" controls muted width="320" height="180"></video>\n'
        return _page("Clip", player, script=_VIDEO_SCRIPT), refs
    if path == "/srcset.html":
        return _page("Picture", '<figure id="picture"></figure>\n', script=_SRCSET_SCRIPT), refs
    if path == "/xhr.html":
        return _page("News", '<ul id="news"></ul>\n<p id="extra"></p>\n', script=_XHR_SCRIPT), refs
    if path == "/blocked.html":
        scripts = (
            f'<script src="{ref("script/src", "/private/tracker.js")}"></script>\n'
            f'<script src="{ref("script/src", "/js/render.js")}"></script>\n'
        )
        return _page("Rendered", '<main id="content"></main>\n', head=scripts), refs
    # /cdn.html: a script and a stylesheet from the assets host
    head = (
        f'<link rel="stylesheet" href="{ref("link/href", assets + "/lib/widget.css")}">\n'
        f'<script src="{ref("script/src", assets + "/lib/widget.js")}" defer></script>\n'
    )
    return _page("Widget", '<div id="widget"></div>\n', head=head), refs


def _page(title: str, body: str, script: str = "", head: str = "") -> str:
    inline = f"<script>\n{script}</script>\n" if script else ""
    # No icon (an empty data: URL): a browser asks no page for /favicon.ico.
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<title>{html.escape(title)}</title>\n<link rel="icon" href="data:,">\n{head}</head>\n'
        f"<body>\n<h1>{html.escape(title)}</h1>\n"
        f"{body}{inline}</body>\n</html>\n"
    )


# -- other resources -------------------------------------------------------------------------


def reply(kind: str, name: str, target: str, seed: int) -> tuple[str, bytes]:
    """(Content-Type, body) of a resource that is not an HTML page; `name` is what
    `resource` said it is."""
    path, _, query = target.partition("?")
    # Drawn from the path alone: a cache buster or a callback name changes no text.
    rng = random.Random(f"{seed}:modern:{path}")
    pool = content.paragraphs(seed)
    if name == "json":
        return _JSON, json.dumps(_json(path, query, rng, pool), sort_keys=True).encode()
    if name == "news":
        news = {"items": [pool[rng.randrange(len(pool))][:120] for _ in range(3)]}
        return _JSON, json.dumps(news).encode()
    if name == "jsonp":
        extra = json.dumps({"text": pool[rng.randrange(len(pool))][:200]})
        return _JS, f"{_callback(query)}({extra});\n".encode()
    if name == "js":
        return _JS, _SCRIPTS[path].encode()
    if name == "css":
        return "text/css", b"#widget { border: 2px solid #246; padding: 1em; background: #eef; }\n"
    if name == "png":
        size = int(path.rsplit("-", 1)[1].removesuffix(".png")) // 10 if "/s-" in path else 64
        return "image/png", content.png(f"{seed}:{kind}:{path}", size, size)
    ctype = VIDEO_SOURCES[path]
    magic = b"\x1a\x45\xdf\xa3" if ctype == "video/webm" else b"\x00\x00\x00\x18ftypmp42"
    return ctype, content.binary(f"{seed}:{kind}:{path}", magic, 4096)


def _json(path: str, query: str, rng: random.Random, pool: list[str]) -> object:
    if path == "/api/content.json":
        links = [{"href": f"/articles/{n}.html", "text": f"Article {n}"} for n in range(1, ARTICLES + 1)]
        return {"title": "Fetched content", "paragraphs": rng.sample(pool, 3), "links": links}
    if path == "/api/items":
        page = int(query.removeprefix("page="))
        first = (page - 1) * ITEMS_PER_PAGE + 1
        items = [{"n": n, "title": f"Item {n}"} for n in range(first, first + ITEMS_PER_PAGE)]
        return {"items": items, "next": page + 1 if page < ITEM_PAGES else None}
    if path == "/api/menu.json":
        return {"routes": [{"route": r, "title": r.capitalize()} for r in APP_ROUTES]}
    route = path.removeprefix("/api/pages/").removesuffix(".json")
    return {"title": route.capitalize(), "text": " ".join(rng.sample(pool, 2))}


# -- scripts (plain ES2020, no library, no timers) -------------------------------------------

_ANALYTICS = """\
window.dataLayer = window.dataLayer || [];
window.dataLayer.push({event: "view", page: location.pathname});
"""
_FETCH_SCRIPT = """\
fetch("/api/content.json").then((r) => r.json()).then((data) => {
  const main = document.getElementById("content");
  document.title = data.title;
  document.querySelector("h1").textContent = data.title;
  for (const text of data.paragraphs) {
    const p = document.createElement("p");
    p.textContent = text;
    main.append(p);
  }
  for (const link of data.links) {
    const a = document.createElement("a");
    a.href = link.href;
    a.textContent = link.text;
    const p = document.createElement("p");
    p.append(a);
    main.append(p);
  }
});
"""
_SCROLL_SCRIPT = """\
const list = document.getElementById("items");
const watcher = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting && list.dataset.next) {
      watcher.unobserve(entry.target);
      load(list.dataset.next);
    }
  }
});
function load(page) {
  delete list.dataset.next;
  fetch(`/api/items?page=${page}`).then((r) => r.json()).then((data) => {
    for (const item of data.items) {
      const li = document.createElement("li");
      li.style.minHeight = "120px";
      const a = document.createElement("a");
      a.href = `/items/${item.n}.html`;
      a.textContent = item.title;
      li.append(a);
      list.append(li);
    }
    if (data.next !== null) {
      list.dataset.next = data.next;
      watcher.observe(list.lastElementChild);
    }
  });
}
load(1);
"""
_LAZY_SCRIPT = """\
const seen = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting) {
      entry.target.src = entry.target.dataset.src;
      seen.unobserve(entry.target);
    }
  }
});
document.querySelectorAll("img.lazy").forEach((img) => seen.observe(img));
"""
_APP_SCRIPT = """\
const root = document.getElementById("app");
const view = document.createElement("article");
function show(route) {
  fetch(`/api/pages/${route}.json`).then((r) => r.json()).then((page) => {
    view.innerHTML = "";
    const h = document.createElement("h2");
    h.textContent = page.title;
    const p = document.createElement("p");
    p.textContent = page.text;
    view.append(h, p);
  });
}
fetch("/api/menu.json").then((r) => r.json()).then((menu) => {
  const nav = document.createElement("nav");
  for (const entry of menu.routes) {
    const a = document.createElement("a");
    a.href = `/app/${entry.route}`;
    a.textContent = entry.title + " ";
    a.addEventListener("click", (event) => {
      event.preventDefault();
      history.pushState({route: entry.route}, "", a.href);
      show(entry.route);
    });
    nav.append(a);
  }
  root.append(nav, view);
  let route = location.pathname.slice("/app/".length);
  if (!route) {
    route = menu.routes[0].route;
    history.pushState({route}, "", `/app/${route}`);
  }
  show(route);
});
addEventListener("popstate", (event) => event.state && show(event.state.route));
"""
_VIDEO_SCRIPT = """\
const player = document.getElementById("player");
player.src = player.canPlayType('video/webm; codecs="vp8"') ? "/media/clip.webm" : "/media/clip.mp4";
const note = document.createElement("p");
note.textContent = `Playing ${player.src.split("/").pop()}`;
player.after(note);
"""
_SRCSET_SCRIPT = f"const widths = [{', '.join(map(str, SRCSET_WIDTHS))}];\n" + """\
const img = document.createElement("img");
img.srcset = widths.map((w) => `/img/s-${w}.png ${w}w`).join(", ");
img.sizes = "100vw";
img.alt = "A picture in three widths";
document.getElementById("picture").append(img);
"""
_XHR_SCRIPT = """\
const xhr = new XMLHttpRequest();
xhr.open("GET", "/api/news.json?_=" + Date.now());
xhr.onload = () => {
  for (const text of JSON.parse(xhr.responseText).items) {
    const li = document.createElement("li");
    li.textContent = text;
    document.getElementById("news").append(li);
  }
};
xhr.send();
const callback = "jQuery3600_" + Date.now();
window[callback] = (data) => { document.getElementById("extra").textContent = data.text; };
const jsonp = document.createElement("script");
jsonp.src = "/api/jsonp.js?callback=" + callback;
document.head.append(jsonp);
"""
_SCRIPTS = {
    "/private/tracker.js": "window.tracked = true;\n",
    "/js/render.js": """\
addEventListener("DOMContentLoaded", () => {
  const p = document.createElement("p");
  p.textContent = "This text was written by an allowed script; the tracker before it may be refused.";
  document.getElementById("content").append(p);
});
""",
    "/lib/widget.js": """\
const widget = document.getElementById("widget");
const p = document.createElement("p");
p.textContent = "This widget was built by a script from the assets host.";
widget.append(p);
""",
}
