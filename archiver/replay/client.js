/* archiver's client script: keeps a replayed document inside the archive, at its date.

Replay puts it first in every rewritten HTML document (archiver.replay.rewrite), as
<script src="/_archiver/client.js?v=..." data-timestamp="14 digits" data-url="archived URL">.
The server has already rewritten every link in the markup; this script rewrites what the page's
own scripts build later, to the archive URL /web/<timestamp><modifier>/<absolute URL>:
  - fetch() and XMLHttpRequest (modifier id_: the archived bytes), sent without credentials,
    EventSource;
  - WebSocket: refused (a socket that fails to connect: error, then close with code 1006);
  - window.open, history.pushState and replaceState;
  - writes to location: assignments reach __archiverLocation, as the server rewrites them
    (archiver.replay.scripts), since a document's location cannot be redefined;
  - elements' URL attributes set through properties (img.src, a.href, srcset...), setAttribute,
    innerHTML, outerHTML and insertAdjacentHTML; a MutationObserver catches the rest
    (document.write, attributes changed through other paths) once they are in the document;
  - document.domain: the archived host; setting it to that host or a parent domain is allowed;
  - document.cookie: an in-memory jar for this document, with the archived URL's path rules
    (the sandbox's opaque origin has no cookies to keep);
  - localStorage and sessionStorage: a store in this document's memory each (the opaque origin
    refuses its own);
  - postMessage: a message the server-rewritten call sends goes to "*" wrapped with the sender's
    archived origin; the receiver checks the target origin and dispatches it with that origin.
A relative URL resolves against the archived base URL; an absolute URL on the content origin
outside /web/ (built from location.origin, say) stands for the same path on the archived site.
What it does not cover is listed in README.md ("Client-side rewriting"). */
(() => {
  "use strict";
  const me = document.currentScript;
  if (!me || Object.prototype.hasOwnProperty.call(window, "__archiverPost")) return;
  const TIMESTAMP = me.dataset.timestamp;
  const PAGE = me.dataset.url;
  const ORIGIN = location.origin;
  const ARCHIVE = /^\/web\/(\d{14})([a-z]{2}_)?\/(.*)$/s;
  const ARCHIVE_PATH = /^\/web\/\d{14}(?:[a-z]{2}_)?\//;  // what the server's links look like
  const UNTOUCHED = /^(?:javascript|data|blob|about|mailto|tel|sms|urn|filesystem):/i;
  const EDGES = /^[\u0000-\u0020]+|[\u0000-\u0020]+$/g;
  const MESSAGE = "__archiverMessage";
  const BANNER = "#archiver-banner";

  function parts(url) {
    try {
      const parsed = new URL(url);
      if (parsed.origin !== ORIGIN) return null;
      return ARCHIVE.exec(parsed.pathname + parsed.search + parsed.hash);
    } catch {
      return null;
    }
  }
  const own = parts(location.href);
  const MODIFIER = own && own[2] ? own[2] : "";

  /** The archived URL this document stands for now (pushState may have moved it). */
  function current() {
    const found = parts(location.href);
    return found ? found[3] : PAGE;
  }
  function base() {
    const found = parts(document.baseURI);
    return found ? found[3] : current();
  }

  /** The archive URL of a URL a script wrote, or the value as it was. */
  function rewrite(value, modifier) {
    if (value === null || value === undefined) return value;
    const text = String(value).replace(EDGES, "");
    if (text === "" || text[0] === "#" || ARCHIVE_PATH.test(text) || UNTOUCHED.test(text)) return value;
    let target;
    try {
      const here = new URL(text, document.baseURI);
      if (here.origin === ORIGIN && ARCHIVE.test(here.pathname + here.search + here.hash)) return value;
      target = new URL(text, base());
      if (target.origin === ORIGIN) target = new URL(target.pathname + target.search + target.hash, base());
    } catch {
      return value;
    }
    if (target.protocol !== "http:" && target.protocol !== "https:") return value;
    return `/web/${TIMESTAMP}${modifier}/${target.href}`;
  }

  function rewriteSrcset(value) {
    const text = String(value);
    let out = "";
    const gap = /[\s,]*/y, candidate = /\S*/y, descriptors = /[^,]*/y;
    for (let at = 0; at < text.length; ) {
      gap.lastIndex = at;
      const space = gap.exec(text)[0];
      out += space;
      at += space.length;
      candidate.lastIndex = at;
      const url = candidate.exec(text)[0];
      if (url === "") break;
      const bare = url.replace(/,+$/, "");
      out += rewrite(bare, "im_") + url.slice(bare.length);
      at += url.length;
      if (bare.length < url.length) continue;
      descriptors.lastIndex = at;
      const rest = descriptors.exec(text)[0];
      out += rest;
      at += rest.length;
    }
    return out;
  }

  // Element (local name) -> attribute -> modifier; "rel" stands for the modifier link rel gives.
  const NAVIGATION = "";
  const ATTRIBUTES = {
    a: {href: NAVIGATION}, area: {href: NAVIGATION}, form: {action: NAVIGATION},
    button: {formaction: NAVIGATION}, input: {src: "im_", formaction: NAVIGATION},
    img: {src: "im_", srcset: "im_", lowsrc: "im_"}, image: {href: "im_", "xlink:href": "im_"},
    source: {src: "oe_", srcset: "im_"}, video: {src: "oe_", poster: "im_"}, audio: {src: "oe_"},
    track: {src: "oe_"}, script: {src: "js_"}, link: {href: "rel", imagesrcset: "im_"},
    iframe: {src: "if_"}, frame: {src: "fr_"}, embed: {src: "oe_"}, object: {data: "oe_"},
    base: {href: NAVIGATION}, body: {background: "im_"}, table: {background: "im_"},
    td: {background: "im_"}, th: {background: "im_"},
  };
  const WATCHED = [...new Set(Object.values(ATTRIBUTES).flatMap(Object.keys))];

  function linkModifier(element) {
    const rel = (element.getAttribute("rel") || "").toLowerCase();
    const as = (element.getAttribute("as") || "").toLowerCase();
    if (/\bstylesheet\b/.test(rel) || as === "style") return "cs_";
    if (/icon/.test(rel) || as === "image" || as === "font") return "im_";
    if (/\bmodulepreload\b/.test(rel) || as === "script") return "js_";
    return NAVIGATION;
  }

  /** The value to store in ``element``'s attribute ``name``. */
  function attributeValue(element, name, value) {
    const attribute = String(name).toLowerCase();
    const modifier = (ATTRIBUTES[element.localName] || {})[attribute];
    if (modifier === undefined || value === null || value === undefined) return value;
    if (attribute.endsWith("srcset")) return rewriteSrcset(value);
    return rewrite(value, modifier === "rel" ? linkModifier(element) : modifier);
  }

  const nativeSetAttribute = Element.prototype.setAttribute;
  const nativeSetAttributeNS = Element.prototype.setAttributeNS;
  Element.prototype.setAttribute = function setAttribute(name, value) {
    return nativeSetAttribute.call(this, name, attributeValue(this, name, value));
  };
  Element.prototype.setAttributeNS = function setAttributeNS(namespace, name, value) {
    return nativeSetAttributeNS.call(this, namespace, name, attributeValue(this, name, value));
  };

  function rewriteElement(element) {
    const attributes = ATTRIBUTES[element.localName];
    if (!attributes) return;
    for (const name of Object.keys(attributes)) {
      const value = element.getAttribute(name);
      if (value === null) continue;
      const rewritten = attributeValue(element, name, value);
      if (rewritten === value) continue;
      if (element.closest(BANNER)) return;  // the banner links to the replay's own pages
      nativeSetAttribute.call(element, name, rewritten);
    }
  }
  // Elements already seen with their whole subtree: one whose children arrive later gets a
  // record for each of them, so a subtree is walked once, not once per ancestor's record.
  const seen = new WeakSet();
  const unseen = {acceptNode: (node) => (seen.has(node) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT)};
  function rewriteTree(node) {
    if (node.nodeType !== Node.ELEMENT_NODE || seen.has(node)) return;
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_ELEMENT, unseen);
    for (let element = node; element !== null; element = walker.nextNode()) {
      seen.add(element);
      rewriteElement(element);
    }
  }

  // URL properties of elements: their setters store the rewritten value.
  const PROPERTIES = [
    [HTMLAnchorElement, "href"], [HTMLAreaElement, "href"], [HTMLFormElement, "action"],
    [HTMLButtonElement, "formAction"], [HTMLInputElement, "src"], [HTMLInputElement, "formAction"],
    [HTMLImageElement, "src"], [HTMLImageElement, "srcset"], [HTMLSourceElement, "src"],
    [HTMLSourceElement, "srcset"], [HTMLMediaElement, "src"], [HTMLVideoElement, "poster"],
    [HTMLTrackElement, "src"], [HTMLScriptElement, "src"], [HTMLLinkElement, "href"],
    [HTMLLinkElement, "imageSrcset"], [HTMLIFrameElement, "src"], [HTMLFrameElement, "src"],
    [HTMLEmbedElement, "src"], [HTMLObjectElement, "data"], [HTMLBaseElement, "href"],
    [HTMLBodyElement, "background"],
  ];
  for (const [type, property] of PROPERTIES) {
    const descriptor = Object.getOwnPropertyDescriptor(type.prototype, property);
    if (!descriptor || !descriptor.set) continue;
    Object.defineProperty(type.prototype, property, {
      ...descriptor,
      set(value) {
        descriptor.set.call(this, attributeValue(this, property, value));
      },
    });
  }

  // Markup set as a string: parsed inert in a template, its URLs rewritten, serialised again.
  const innerHTML = Object.getOwnPropertyDescriptor(Element.prototype, "innerHTML");
  const outerHTML = Object.getOwnPropertyDescriptor(Element.prototype, "outerHTML");
  const nativeInsertAdjacentHTML = Element.prototype.insertAdjacentHTML;
  const RAW_TEXT = new Set(["script", "style", "textarea", "title", "xmp", "noscript", "iframe"]);
  const MAY_HOLD_URLS = new RegExp(`(?:${WATCHED.join("|")})\\s*=`, "i");
  function rewriteMarkup(markup) {
    const text = String(markup);
    if (!MAY_HOLD_URLS.test(text)) return markup;
    const inert = document.createElement("template");
    innerHTML.set.call(inert, text);
    for (const element of inert.content.querySelectorAll("*")) rewriteElement(element);
    return innerHTML.get.call(inert);
  }
  Object.defineProperty(Element.prototype, "innerHTML", {
    ...innerHTML,
    set(value) {
      innerHTML.set.call(this, RAW_TEXT.has(this.localName) ? value : rewriteMarkup(value));
    },
  });
  Object.defineProperty(Element.prototype, "outerHTML", {
    ...outerHTML,
    set(value) {
      outerHTML.set.call(this, rewriteMarkup(value));
    },
  });
  Element.prototype.insertAdjacentHTML = function insertAdjacentHTML(position, markup) {
    return nativeInsertAdjacentHTML.call(this, position, rewriteMarkup(markup));
  };

  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "attributes") rewriteElement(record.target);
      else record.addedNodes.forEach(rewriteTree);
    }
  }).observe(document, {childList: true, subtree: true, attributes: true, attributeFilter: WATCHED});

  // Requests.
  const nativeFetch = window.fetch;
  // Without credentials: the archive needs none, and answers no cross-origin read that sends them.
  window.fetch = function fetch(input, init) {
    let request = input;
    if (input instanceof Request) {
      const url = rewrite(input.url, "id_");
      if (url !== input.url) request = new Request(url, input);
    } else request = rewrite(input instanceof URL ? input.href : input, "id_");
    return nativeFetch.call(this, new Request(request, {...init, credentials: "omit"}));
  };
  const nativeOpen = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function open(method, url, ...rest) {
    return nativeOpen.call(this, method, rewrite(url instanceof URL ? url.href : url, "id_"), ...rest);
  };
  const withCredentials = Object.getOwnPropertyDescriptor(XMLHttpRequest.prototype, "withCredentials");
  Object.defineProperty(XMLHttpRequest.prototype, "withCredentials", {
    ...withCredentials,
    set() { withCredentials.set.call(this, false); },
  });
  if (window.EventSource) {
    const NativeEventSource = window.EventSource;
    window.EventSource = class EventSource extends NativeEventSource {
      constructor(url, options) {
        super(rewrite(url instanceof URL ? url.href : url, "id_"), options);
      }
    };
  }

  /** A WebSocket that never connects: the archive holds no conversations to replay. */
  class RefusedWebSocket extends EventTarget {
    constructor(url, protocols) {
      super();
      this.url = String(url);
      this.protocol = "";
      this.extensions = "";
      this.binaryType = "blob";
      this.bufferedAmount = 0;
      this.readyState = RefusedWebSocket.CONNECTING;
      this.onopen = this.onmessage = this.onerror = this.onclose = null;
      void protocols;
      console.warn(`archiver: WebSocket ${this.url} refused: replay has no live connections`);
      setTimeout(() => {
        this.readyState = RefusedWebSocket.CLOSED;
        this.fire(new Event("error"));
        this.fire(new CloseEvent("close", {code: 1006, reason: "", wasClean: false}));
      }, 0);
    }
    fire(event) {
      const handler = this["on" + event.type];
      this.dispatchEvent(event);
      if (typeof handler === "function") handler.call(this, event);
    }
    send() {
      if (this.readyState === RefusedWebSocket.CONNECTING) {
        throw new DOMException("WebSocket is still connecting", "InvalidStateError");
      }
    }
    close() {}
  }
  Object.assign(RefusedWebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  window.WebSocket = RefusedWebSocket;

  // Navigation.
  const nativeWindowOpen = window.open;
  window.open = function open(url, ...rest) {
    return nativeWindowOpen.call(this, url === undefined ? url : rewrite(url, NAVIGATION), ...rest);
  };
  for (const name of ["pushState", "replaceState"]) {
    const native = History.prototype[name];
    History.prototype[name] = function (state, unused, url) {
      if (url === undefined || url === null) return native.call(this, state, unused);
      return native.call(this, state, unused, rewrite(url, MODIFIER));
    };
  }

  /** What __archiverLocation gives: the archived URL's parts; writes navigate in the archive. */
  function go(url) {
    location.href = rewrite(url, MODIFIER);
  }
  const archivedLocation = {
    get href() { return current(); },
    set href(url) { go(url); },
    assign(url) { go(url); },
    replace(url) { location.replace(rewrite(url, MODIFIER)); },
    reload() { location.reload(); },
    toString() { return current(); },
  };
  for (const part of ["origin", "protocol", "host", "hostname", "port", "pathname", "search", "hash"]) {
    Object.defineProperty(archivedLocation, part, {
      enumerable: true,
      get() { return new URL(current())[part]; },
      set(value) {
        const url = new URL(current());
        url[part] = value;
        go(url.href);
      },
    });
  }
  const locationProperty = {configurable: true, get: () => archivedLocation, set: go};
  Object.defineProperty(window, "__archiverLocation", locationProperty);
  Object.defineProperty(Document.prototype, "__archiverLocation", locationProperty);

  // document.domain: the archived host.
  Object.defineProperty(Document.prototype, "domain", {
    configurable: true,
    get() { return new URL(current()).hostname; },
    set(value) {
      const host = new URL(current()).hostname, asked = String(value).toLowerCase();
      if (host !== asked && !host.endsWith("." + asked)) {
        throw new DOMException(`${asked} is not a suffix of ${host}`, "SecurityError");
      }
    },
  });

  // document.cookie: this document's jar, scoped by the archived URL's path (RFC 6265 5.1.4).
  const jar = new Map();
  function pathMatches(path, cookiePath) {
    return path === cookiePath || (path.startsWith(cookiePath) &&
      (cookiePath.endsWith("/") || path[cookiePath.length] === "/"));
  }
  function defaultPath() {
    const path = new URL(current()).pathname;
    return path.lastIndexOf("/") > 0 ? path.slice(0, path.lastIndexOf("/")) : "/";
  }
  Object.defineProperty(Document.prototype, "cookie", {
    configurable: true,
    get() {
      const path = new URL(current()).pathname, now = Date.now();
      const shown = [];
      for (const [key, cookie] of jar) {
        if (cookie.expires !== null && cookie.expires <= now) jar.delete(key);
        else if (pathMatches(path, cookie.path)) shown.push(cookie.name ? `${cookie.name}=${cookie.value}` : cookie.value);
      }
      return shown.join("; ");
    },
    set(value) {
      const [pair, ...attributes] = String(value).split(";");
      const equals = pair.indexOf("=");
      const name = equals < 0 ? "" : pair.slice(0, equals).trim();
      const cookie = {name, value: pair.slice(equals + 1).trim(), path: defaultPath(), expires: null};
      for (const attribute of attributes) {
        const [key, ...rest] = attribute.split("=");
        const field = key.trim().toLowerCase(), given = rest.join("=").trim();
        if (field === "path" && given.startsWith("/")) cookie.path = given;
        else if (field === "max-age" && /^-?\d+$/.test(given)) cookie.expires = Date.now() + 1000 * Number(given);
        else if (field === "expires" && cookie.expires === null && !isNaN(Date.parse(given))) cookie.expires = Date.parse(given);
        else if (field === "domain") {
          const host = new URL(current()).hostname, domain = given.replace(/^\./, "").toLowerCase();
          if (host !== domain && !host.endsWith("." + domain)) return;
        }
      }
      const key = `${cookie.path}\n${name}`;
      if (cookie.expires !== null && cookie.expires <= Date.now()) jar.delete(key);
      else jar.set(key, cookie);
    },
  });

  // localStorage and sessionStorage: a store in this document's memory each (the sandbox's opaque
  // origin refuses its own), empty at every load; nothing is kept or shared with another document.
  const QUOTA = 5 * 1024 * 1024;  // characters of keys and values, as a browser allows an origin
  const STORAGE_API = new Set(["getItem", "setItem", "removeItem", "clear", "key", "length"]);
  function memoryStorage() {
    const items = new Map();
    let used = 0;
    const api = {
      getItem(key) {
        const name = String(key);
        return items.has(name) ? items.get(name) : null;
      },
      setItem(key, value) {
        const name = String(key), text = String(value);
        const size = used + name.length + text.length - (items.has(name) ? name.length + items.get(name).length : 0);
        if (size > QUOTA) throw new DOMException(`Setting the value of '${name}' exceeded the quota.`, "QuotaExceededError");
        items.set(name, text);
        used = size;
      },
      removeItem(key) {
        const name = String(key);
        if (items.has(name)) used -= name.length + items.get(name).length;
        items.delete(name);
      },
      clear() {
        items.clear();
        used = 0;
      },
      key(index) {
        const name = [...items.keys()][index >>> 0];
        return name === undefined ? null : name;
      },
    };
    // Items are properties too (storage.name, storage.name = v, delete, Object.keys); the
    // prototype's names come first, as in a browser's Storage.
    const prototype = typeof Storage === "function" ? Storage.prototype : Object.prototype;
    const item = (name) => typeof name === "string" && items.has(name) && !(name in prototype);
    return new Proxy(Object.create(prototype), {
      get(target, name) {
        if (name === "length") return items.size;
        if (STORAGE_API.has(name)) return api[name];
        return item(name) ? items.get(name) : Reflect.get(target, name);
      },
      set(target, name, value) {
        if (typeof name !== "string") return Reflect.set(target, name, value);
        api.setItem(name, value);
        return true;
      },
      defineProperty(target, name, descriptor) {
        if (typeof name !== "string") return Reflect.defineProperty(target, name, descriptor);
        api.setItem(name, descriptor.value);
        return true;
      },
      deleteProperty(target, name) {
        if (typeof name === "string") api.removeItem(name);
        return true;
      },
      has(target, name) {
        return item(name) || Reflect.has(target, name);
      },
      ownKeys() {
        return [...items.keys()];
      },
      getOwnPropertyDescriptor(target, name) {
        if (!item(name)) return undefined;
        return {value: items.get(name), writable: true, enumerable: true, configurable: true};
      },
    });
  }
  for (const name of ["localStorage", "sessionStorage"]) {
    const storage = memoryStorage();
    Object.defineProperty(window, name, {configurable: true, enumerable: true, get: () => storage});
  }

  // postMessage between archived documents (see archiver.replay.scripts).
  function archivedOrigin() {
    return new URL(current()).origin;
  }
  window.__archiverPost = function (message, target, transfer) {
    const options = typeof target === "object" && target !== null && !Array.isArray(target);
    const origin = options ? target.targetOrigin : target;
    if (typeof origin !== "string") return [...arguments];
    const wrapped = {[MESSAGE]: {origin: archivedOrigin(), target: origin, data: message}};
    if (options) return [wrapped, {...target, targetOrigin: "*"}];
    return transfer === undefined ? [wrapped, "*"] : [wrapped, "*", transfer];
  };
  window.addEventListener("message", (event) => {
    const data = event.data;
    const wrapped = data !== null && typeof data === "object" && Object.prototype.hasOwnProperty.call(data, MESSAGE) ? data[MESSAGE] : null;
    if (wrapped === null) return;
    event.stopImmediatePropagation();
    let accepted = wrapped.target === "*";
    if (!accepted) {
      try {
        accepted = (wrapped.target === "/" ? wrapped.origin : new URL(wrapped.target).origin) === archivedOrigin();
      } catch {
        accepted = false;
      }
    }
    if (!accepted) return;  // a browser drops a message whose target origin is not the receiver's
    window.dispatchEvent(new MessageEvent("message", {
      data: wrapped.data, origin: wrapped.origin, source: event.source, ports: [...event.ports],
    }));
  }, true);
})();
