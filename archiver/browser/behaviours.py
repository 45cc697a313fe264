"""What archiver does to a rendered page so that it loads what a reader would see, written for
archiver (Apache-2.0): each script here is one short step that :mod:`archiver.browser.render`
runs with ``Runtime.evaluate``, waiting for the network to go idle between steps.

- :data:`ROUTES_RECORDER` runs before any script of each document
  (``Page.addScriptToEvaluateOnNewDocument``): it wraps ``history.pushState`` and
  ``history.replaceState`` so that every URL the page moves to is kept for :data:`COLLECT`.
- :data:`PREPARE` opens every ``<details>``, makes ``loading=lazy`` images and frames eager, and
  starts every ``<video>`` and ``<audio>``, muted, so that the player fetches its sources.
- :data:`SCROLL` scrolls one viewport down and says whether it reached the end, and how tall the
  page was; :data:`HEIGHT` is that height again, to see whether the page grew (an endless list
  fetched on scroll, IntersectionObserver targets coming into view).
- :data:`COLLECT` is what the page holds at the end: its URL, text, routes, and the URLs of the
  rendered DOM (resolved by the browser, each list bounded).
"""

from __future__ import annotations

# The page may replace history's methods too: the wrapper calls whatever was there before it.
ROUTES_RECORDER = """(() => {
  const routes = [];
  const keep = 1000;
  for (const name of ["pushState", "replaceState"]) {
    const original = History.prototype[name];
    History.prototype[name] = function (...args) {
      const result = original.apply(this, args);
      if (args.length > 2 && args[2] !== undefined && args[2] !== null && routes.length < keep) {
        routes.push(location.href);
      }
      return result;
    };
  }
  Object.defineProperty(window, "__archiverRoutes", {value: routes, enumerable: false});
})();"""

PREPARE = """(() => {
  let opened = 0, eager = 0, played = 0;
  for (const details of document.querySelectorAll("details:not([open])")) {
    details.open = true;
    opened++;
  }
  for (const element of document.querySelectorAll("img[loading=lazy], iframe[loading=lazy]")) {
    element.loading = "eager";
    eager++;
  }
  for (const media of document.querySelectorAll("video, audio")) {
    media.muted = true;
    try {
      const playing = media.play();
      if (playing && playing.catch) playing.catch(() => {});
      played++;
    } catch (error) {}
  }
  return {opened, eager, played};
})()"""

SCROLL = """(() => {
  const root = document.scrollingElement || document.documentElement;
  window.scrollBy(0, window.innerHeight);
  return {height: root.scrollHeight,
          end: window.scrollY + window.innerHeight >= root.scrollHeight - 1};
})()"""

HEIGHT = "(document.scrollingElement || document.documentElement).scrollHeight"

TOP = "window.scrollTo(0, 0)"

# Called with (the bound on URLs, the bound on text characters).
COLLECT = """((most, characters) => {
  const urls = [], srcsets = [];
  const add = (list, value) => {
    if (typeof value === "string" && value && list.length < most) list.push(value);
  };
  const selectors = [
    ["a[href], area[href], link[href]", "href"],
    ["iframe[src], frame[src], video[src], audio[src], source[src], img[src], embed[src]", "src"],
  ];
  for (const [selector, property] of selectors) {
    for (const element of document.querySelectorAll(selector)) {
      const value = element[property];
      add(urls, typeof value === "string" ? value : element.getAttribute(property));
      if (urls.length >= most) break;
    }
  }
  for (const image of document.querySelectorAll("img")) add(urls, image.currentSrc);
  for (const element of document.querySelectorAll("img[srcset], source[srcset]")) {
    add(srcsets, element.getAttribute("srcset"));
  }
  const routes = window.__archiverRoutes || [];
  return {url: location.href, base: document.baseURI, urls, srcsets,
          routes: routes.slice(0, most),
          text: document.body ? document.body.innerText.slice(0, characters) : ""};
})"""
