"""What archiver does to a rendered page so that it loads what a reader would see, written for
archiver (Apache-2.0): each script here is one short step that :mod:`archiver.browser.render`
runs with ``Runtime.evaluate`` in a world of its own (the page's DOM, not its globals: what the
page patches does not reach them), waiting for the network to go idle between steps.

- :data:`ROUTES_RECORDER` runs among the page's globals, before any script of each document
  (``Page.addScriptToEvaluateOnNewDocument``): it wraps ``history.pushState`` and
  ``history.replaceState`` and keeps every URL the page moves to, read back by :data:`ROUTES`.
- :data:`PREPARE` opens every ``<details>``, makes ``loading=lazy`` images and frames eager, and
  starts every ``<video>`` and ``<audio>``, muted, so that the player fetches its sources.
- :data:`SCROLL` scrolls one viewport down and says, two frames later, whether it reached the
  end, and how tall the page was; :data:`HEIGHT` is that height again, to see whether the page
  grew (an endless list fetched on scroll, IntersectionObserver targets coming into view).
- :data:`COLLECT` is what the page holds at the end: its URL, text, and the URLs of the
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

# A login form filled in and submitted as a person would: each field (by name) focused, its value
# set through the element's own setter (frameworks watch it) with input and change events, then
# the form submitted with its submit button's click (requestSubmit: the page's own handlers run).
# Returns the ``required`` names not found ("" when each was there); other fields the page lacks
# are left out.
FILL_AND_SUBMIT = """((fields, required) => {
  let form = null;
  const missing = [];
  for (const [name, value] of Object.entries(fields)) {
    const input = document.querySelector(`[name="${CSS.escape(name)}"]`);
    if (!input) { if (required.includes(name)) missing.push(name); continue; }
    input.focus();
    const setter = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(input), "value");
    if (setter && setter.set) setter.set.call(input, value); else input.value = value;
    input.dispatchEvent(new Event("input", {bubbles: true}));
    input.dispatchEvent(new Event("change", {bubbles: true}));
    form = form || input.form;
  }
  if (missing.length) return missing.join(", ");
  if (!form) return "a form holding the fields";
  if (form.requestSubmit) form.requestSubmit(); else form.submit();
  return "";
})"""

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

# Observers (IntersectionObserver) learn what came into view only at a frame: the page is given
# two frames before the scroll, so that what it just added is seen out of view first, and two
# after it (or a second, if it gets none), so that they have been told and what they fetch is
# underway by the time it answers.
SCROLL = """(() => {
  const frames = () => new Promise(resolve => {
    setTimeout(resolve, 1000);
    requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(resolve, 0)));
  });
  return frames().then(() => {
    const root = document.scrollingElement || document.documentElement;
    window.scrollBy(0, window.innerHeight);
    const state = {height: root.scrollHeight,
                   end: window.scrollY + window.innerHeight >= root.scrollHeight - 1};
    return frames().then(() => state);
  });
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
  return {url: location.href, base: document.baseURI, urls, srcsets,
          text: document.body ? document.body.innerText.slice(0, characters) : ""};
})"""

ROUTES = "window.__archiverRoutes"
