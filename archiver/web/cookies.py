"""A site's cookie jar per RFC 6265bis (draft-ietf-httpbis-rfc6265bis): pure logic, no I/O.

`CookieJar.receive` reads a response's Set-Cookie values (§5.6 parsing, §5.7 storage model),
`CookieJar.header` gives the Cookie header for a request (§5.8.3 retrieval), `to_json` /
`from_json` persist a jar between visits, and `browser_cookies` / `receive_browser` share it with
a rendering browser (DevTools `Network.setCookies` / `Network.getCookies` shapes). Time is always
an argument (epoch seconds), so the jar never reads a clock.

Choices within or beyond the RFC's letter:

- A cookie name or value holding anything but printable ASCII, space and tab (or holding ";", or
  a name holding "=") is refused (`bad-character`), so `header` always yields a valid RFC 9110
  field value, whatever encoding the caller writes it in.
- The public suffix list is tldextract's bundled snapshot with its private section (github.io is
  a suffix), read once per process and never fetched; a single-label Domain is a public suffix
  (the list's default rule "*"). A Domain attribute equal to the request's IP address makes a
  host-only cookie, as browsers do. SameSite=None without Secure is refused, as in browsers.
- Limits (§6.1 asks for at least 4096 octets per cookie, 50 cookies per domain and 3000 in all):
  name and value together at most 4096 octets, an attribute value at most 1024 (a longer one is
  ignored), expiry at most 400 days ahead (§5.6.1), at most 50 cookies per domain and
  `max_cookies` (180) per jar, since a jar holds one site's cookies. Past a limit the jar
  evicts, per §5.7: within an overfull domain non-Secure cookies first, then in both cases the
  least recently used (last sent or set) first.

`to_json` keeps every unexpired cookie, session cookies included: a site's visits make one
browsing session, as Heritrix keeps its cookies across a crawl, and where a server has ended the
session the crawler's login logic logs in again.

SameSite is parsed and kept for the browser; it filters none of the crawler's own requests,
which are all same-site top-level navigations of the site. A cookie is Secure-only when sent:
`header` gives it to https URLs alone.
"""

from __future__ import annotations

import calendar
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from archiver.web.urls import normalize, origin_parts, split_origin

if TYPE_CHECKING:
    import tldextract

MAX_NAME_VALUE_BYTES = 4096  # §5.6: a larger cookie is ignored
MAX_ATTRIBUTE_VALUE_BYTES = 1024  # §5.6: a longer attribute is ignored
MAX_AGE_SECONDS = 400 * 86400  # §5.6.1 / §5.6.2: the cookie-age-limit
MAX_COOKIES_PER_DOMAIN = 50  # §6.1 minimum
MAX_COOKIES = 180  # per jar, so per site (§6.1 asks 3000 for a whole browser)

# Why a cookie was refused: short names for the log.
REFUSALS = (
    "bad-url",  # the response URL is not http(s)
    "bad-character",  # a control character (§5.6), or see the module docstring
    "empty",  # no name and no value
    "too-large",  # name and value over MAX_NAME_VALUE_BYTES
    "public-suffix",  # Domain is a public suffix other than the host itself
    "domain-mismatch",  # the host does not domain-match Domain
    "secure-from-insecure",  # Secure set over http
    "shadows-secure",  # over http, would overwrite or shadow a Secure cookie (§5.7)
    "samesite-none-insecure",  # SameSite=None without Secure
    "prefix",  # __Secure- / __Host- requirements not met
    "bad-entry",  # a browser or persisted cookie with a missing or ill-typed field
)

_SAME_SITE = {"strict": "Strict", "lax": "Lax", "none": "None"}
# A set-cookie-string holding one of these is ignored whole (§5.6): CTLs but HTAB.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# What a name or value may hold (see the module docstring); a name no "=" either.
_VALUE = re.compile(r"[\t\x20-\x3a\x3c-\x7e]*")
_NAME = re.compile(r"[\t\x20-\x3a\x3c\x3e-\x7e]*")
_HOST = re.compile(r"[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*")
_IPV4 = re.compile(r"[0-9.]+")
_IPV6 = re.compile(r"[0-9a-f:.]*:[0-9a-f:.]*")
_NOT_HOST = re.compile(r"[:/?#@\\%\[\]\s]|\.\Z")
_WSP = " \t"
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")

# cookie-date (§5.1.1)
_DATE_DELIMITER = re.compile(r"[\x09\x20-\x2f\x3b-\x40\x5b-\x60\x7b-\x7e]+")
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[^0-9]|\Z)")
_DAY = re.compile(r"([0-9]{1,2})(?:[^0-9]|\Z)")
_YEAR = re.compile(r"([0-9]{2,4})(?:[^0-9]|\Z)")
_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_MAX_AGE = re.compile(r"-?[0-9]+")


class Refusal(NamedTuple):
    """A cookie the jar did not take: its name (for the log; never its value) and the reason,
    one of REFUSALS."""

    name: str
    reason: str


@dataclass(slots=True)
class Cookie:
    """One stored cookie (§5.7's fields); `expires` None for a session cookie."""

    name: str
    value: str
    domain: str  # canonical host, no leading dot
    host_only: bool
    path: str
    secure: bool
    http_only: bool
    same_site: str  # "Strict", "Lax", "None" or "Default" (no attribute)
    expires: float | None
    created: float
    last_access: float


class _Parsed(NamedTuple):
    """A Set-Cookie value after §5.6: the last of each attribute, None where absent."""

    name: str
    value: str
    expires: float | None  # Max-Age wins over Expires; -inf for "already expired"
    domain: str | None
    path: str | None  # the last Path attribute, "" if it did not start with "/"; None: none
    secure: bool
    http_only: bool
    same_site: str


def _printable(name: str) -> str:
    """A refused cookie's name, fit for a log line."""
    return _UNPRINTABLE.sub("?", name[:100])


def _octets(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def parse_cookie_date(text: str) -> float | None:
    """Epoch seconds of a cookie-date (§5.1.1), or None when it does not parse."""
    time: tuple[int, int, int] | None = None
    day = month = year = None
    for token in _DATE_DELIMITER.split(text):
        if not token:
            continue
        if time is None and (found := _TIME.match(token)):
            time = (int(found[1]), int(found[2]), int(found[3]))
        elif day is None and (found := _DAY.match(token)):
            day = int(found[1])
        elif month is None and token[:3].lower() in _MONTHS:
            month = _MONTHS[token[:3].lower()]
        elif year is None and (found := _YEAR.match(token)):
            year = int(found[1])
    if time is None or day is None or month is None or year is None:
        return None
    if 70 <= year <= 99:
        year += 1900
    elif year <= 69:
        year += 2000
    hour, minute, second = time
    if (year < 1601 or hour > 23 or minute > 59 or second > 59
            or not 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    return float(calendar.timegm((year, month, day, hour, minute, second)))


def _parse(text: str, now: float) -> _Parsed | str:
    """§5.6: a Set-Cookie value -> its parts, or the reason it is ignored whole."""
    if _CONTROL.search(text):
        return "bad-character"
    pair, _, attributes = text.partition(";")
    name, equals, value = pair.partition("=")
    if not equals:
        name, value = "", name
    name, value = name.strip(_WSP), value.strip(_WSP)
    if not name and not value:
        return "empty"
    if _octets(name) + _octets(value) > MAX_NAME_VALUE_BYTES:
        return "too-large"
    max_age: float | None = None
    expires: float | None = None
    domain = path = None
    secure = http_only = False
    same_site = "Default"
    for item in attributes.split(";") if attributes else ():
        key, _, argument = item.partition("=")
        key, argument = key.strip(_WSP).lower(), argument.strip(_WSP)
        if _octets(argument) > MAX_ATTRIBUTE_VALUE_BYTES:
            continue
        if key == "expires":
            date = parse_cookie_date(argument)
            if date is not None:
                expires = min(date, now + MAX_AGE_SECONDS)
        elif key == "max-age":
            if _MAX_AGE.fullmatch(argument):
                seconds = int(argument)
                max_age = -math.inf if seconds <= 0 else now + min(seconds, MAX_AGE_SECONDS)
        elif key == "domain":
            if argument:  # "Domain=." leaves "": the last Domain then makes a host-only cookie
                domain = argument.removeprefix(".").lower()
        elif key == "path":
            path = argument if argument.startswith("/") else ""  # "": the default path
        elif key == "secure":
            secure = True
        elif key == "httponly":
            http_only = True
        elif key == "samesite":
            same_site = _SAME_SITE.get(argument.lower(), "Default")
    return _Parsed(name, value, max_age if max_age is not None else expires, domain, path,
                   secure, http_only, same_site)


def _default_path(path: str) -> str:
    """§5.1.4: the directory of a request path."""
    if not path.startswith("/") or path.count("/") == 1:
        return "/"
    return path[: path.rfind("/")]


def _path_matches(path: str, cookie_path: str) -> bool:
    """§5.1.4 path-match."""
    return path == cookie_path or (path.startswith(cookie_path) and (
        cookie_path.endswith("/") or path[len(cookie_path)] == "/"))


def _is_ip(host: str) -> bool:
    return ":" in host or _IPV4.fullmatch(host) is not None


def _domain_matches(host: str, domain: str) -> bool:
    """§5.1.3 domain-match of a canonical host against a canonical domain."""
    return host == domain or (
        host.endswith(domain) and host[-len(domain) - 1] == "." and not _is_ip(host))


@cache
def _suffixes() -> tldextract.TLDExtract:
    """The public suffix list bundled with tldextract, private domains included; never fetched
    (no URL to fetch, no disk cache). Imported here, not at the top: it loads requests, 75 ms
    that a command using no cookie should not pay."""
    import tldextract

    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True,
        include_psl_private_domains=True,
    )


def is_public_suffix(domain: str) -> bool:
    """True if a canonical domain is a public suffix ("com", "co.uk", "github.io", "test")."""
    if "." not in domain:
        return not _is_ip(domain)  # the list's default rule "*"
    parts = _suffixes()(domain)
    return not parts.domain and parts.suffix == domain


def _canonical_domain(domain: str) -> str | None:
    """A Domain attribute's canonical host (lower case, IDNA), or None if it names no host."""
    if _HOST.fullmatch(domain):
        return domain
    bare = domain[1:-1] if domain.startswith("[") and domain.endswith("]") else domain
    if _IPV6.fullmatch(bare):
        url = normalize(f"http://[{bare}]/")
    elif domain.isascii() or _NOT_HOST.search(domain):  # no port, path, userinfo, final dot
        return None
    else:
        url = normalize(f"http://{domain}/")
    return None if url is None else origin_parts(split_origin(url)[0])[1]


def _request(url: str) -> tuple[bool, str, str] | None:
    """(secure, canonical host, path) of an http(s) URL, or None."""
    normal = normalize(url)
    if normal is None:
        return None
    origin, rest = split_origin(normal)
    scheme, host, _ = origin_parts(origin)
    return scheme == "https", host, rest.partition("?")[0]


def _problem(cookie: Cookie) -> str | None:
    """What makes a cookie unfit whatever its source (the rules §5.7 applies to every cookie and
    ours on characters), or None."""
    if not cookie.name and not cookie.value:
        return "empty"
    if not _NAME.fullmatch(cookie.name) or not _VALUE.fullmatch(cookie.value) or (
        cookie.name != cookie.name.strip(_WSP) or cookie.value != cookie.value.strip(_WSP)):
        return "bad-character"
    if len(cookie.name) + len(cookie.value) > MAX_NAME_VALUE_BYTES:
        return "too-large"
    if cookie.same_site == "None" and not cookie.secure:
        return "samesite-none-insecure"
    lowered = (cookie.name or cookie.value).lower()
    if not cookie.name and lowered.startswith(("__secure-", "__host-")):
        return "prefix"
    if lowered.startswith("__secure-") and not cookie.secure:
        return "prefix"
    if lowered.startswith("__host-") and not (
            cookie.secure and cookie.host_only and cookie.path == "/"):
        return "prefix"
    if not cookie.host_only and is_public_suffix(cookie.domain):
        return "public-suffix"
    return None


class CookieJar:
    """The cookies of one site (see the module docstring for the rules)."""

    def __init__(self, *, max_cookies: int = MAX_COOKIES) -> None:
        if max_cookies < 1:
            raise ValueError(f"a cookie jar holds at least one cookie, not {max_cookies}")
        self.max_cookies = max_cookies
        # keyed by (name, domain, host_only, path): §5.7's identity for replacement
        self._cookies: dict[tuple[str, str, bool, str], Cookie] = {}
        self._per_domain: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._cookies)

    def receive(self, url: str, set_cookie_values: Iterable[str], now: float) -> list[Refusal]:
        """Store what a response from `url` sets; return what was refused and why."""
        request = _request(url)
        refusals: list[Refusal] = []
        for text in set_cookie_values:
            pair = text.partition(";")[0]
            name = pair.partition("=")[0].strip(_WSP) if "=" in pair else ""
            if request is None:
                reason: str | None = "bad-url"
            else:
                parsed = _parse(text, now)
                reason = parsed if isinstance(parsed, str) else self._receive(parsed, *request, now)
            if reason is not None:
                refusals.append(Refusal(_printable(name), reason))
        return refusals

    def _receive(self, parsed: _Parsed, secure: bool, host: str, path: str, now: float
                 ) -> str | None:
        """§5.7 for one parsed cookie from a request to (secure, host, path)."""
        host_only = True
        domain = host
        if parsed.domain:
            wanted = _canonical_domain(parsed.domain)
            if wanted is None:
                return "domain-mismatch"
            if wanted != host and is_public_suffix(wanted):
                return "public-suffix"
            if not _domain_matches(host, wanted):
                return "domain-mismatch"
            host_only = wanted == host and (_is_ip(host) or is_public_suffix(wanted))
            domain = wanted
        if parsed.secure and not secure:
            return "secure-from-insecure"
        cookie = Cookie(
            parsed.name, parsed.value, domain, host_only,
            parsed.path or _default_path(path),
            parsed.secure, parsed.http_only, parsed.same_site, parsed.expires, now, now,
        )
        if parsed.name.lower().startswith("__host-") and parsed.path is None:
            return "prefix"
        if not secure and self._shadows_secure(cookie):
            return "shadows-secure"
        return self._store(cookie, now)

    def _shadows_secure(self, cookie: Cookie) -> bool:
        """§5.7, "leave Secure cookies alone": over http, no cookie may overlay a Secure one of
        the same name."""
        return any(
            old.secure and old.name == cookie.name and _path_matches(cookie.path, old.path) and (
                _domain_matches(old.domain, cookie.domain)
                or _domain_matches(cookie.domain, old.domain))
            for old in self._cookies.values())

    def _store(self, cookie: Cookie, now: float) -> str | None:
        """The end of §5.7 and the limits: check, replace, insert, evict."""
        reason = _problem(cookie)
        if reason is not None:
            return reason
        key = (cookie.name, cookie.domain, cookie.host_only, cookie.path)
        old = self._cookies.get(key)
        if cookie.expires is not None and cookie.expires <= now:
            if old is not None:  # a deletion
                self._drop(old)
            return None
        if old is not None:  # replaced in place: the dict's order stays the creation order
            cookie.created = old.created
        else:
            self._count(cookie.domain, 1)
        self._cookies[key] = cookie
        self._evict(cookie.domain, now)
        return None

    def _count(self, domain: str, change: int) -> None:
        count = self._per_domain.get(domain, 0) + change
        if count:
            self._per_domain[domain] = count
        else:
            del self._per_domain[domain]

    def _evict(self, domain: str, now: float) -> None:
        """Drop expired cookies, then the excess over the limits (module docstring)."""
        if self._per_domain.get(domain, 0) <= MAX_COOKIES_PER_DOMAIN and (
                len(self._cookies) <= self.max_cookies):
            return
        self._drop_expired(now)
        while self._per_domain.get(domain, 0) > MAX_COOKIES_PER_DOMAIN:
            self._drop(min((c for c in self._cookies.values() if c.domain == domain),
                           key=lambda c: (c.secure, c.last_access)))
        while len(self._cookies) > self.max_cookies:
            self._drop(min(self._cookies.values(), key=lambda c: c.last_access))

    def _drop(self, cookie: Cookie) -> None:
        del self._cookies[(cookie.name, cookie.domain, cookie.host_only, cookie.path)]
        self._count(cookie.domain, -1)

    def _drop_expired(self, now: float) -> None:
        for cookie in [c for c in self._cookies.values()
                       if c.expires is not None and c.expires <= now]:
            self._drop(cookie)

    def header(self, url: str, now: float) -> str | None:
        """The Cookie header value for a request to `url` (§5.8.3), None if no cookie goes."""
        request = _request(url)
        if request is None:
            return None
        self._drop_expired(now)
        secure, host, path = request
        chosen = [
            c for c in self._cookies.values()
            if (host == c.domain if c.host_only else _domain_matches(host, c.domain))
            and _path_matches(path, c.path) and (secure or not c.secure)
        ]
        if not chosen:
            return None
        chosen.sort(key=lambda c: (-len(c.path), c.created))  # ties: the dict's creation order
        for cookie in chosen:
            cookie.last_access = now
        return "; ".join(f"{c.name}={c.value}" if c.name else c.value for c in chosen)

    def cookies(self, now: float) -> list[Cookie]:
        """Copies of the unexpired cookies, oldest first."""
        self._drop_expired(now)
        return sorted((replace(c) for c in self._cookies.values()), key=lambda c: c.created)

    def to_json(self, now: float) -> str:
        """The unexpired cookies, session cookies included, as JSON for `from_json`."""
        return json.dumps({"cookie-jar": 1, "cookies": [asdict(c) for c in self.cookies(now)]},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, now: float, *, max_cookies: int = MAX_COOKIES
                  ) -> tuple[CookieJar, str | None]:
        """A jar from `to_json`'s text, and None; or with a reason ("not-json", "not-a-jar",
        "bad-entry") the jar of what could be read (empty unless only some entries were bad)."""
        jar = cls(max_cookies=max_cookies)
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return jar, "not-json"
        if not (isinstance(data, dict) and data.get("cookie-jar") == 1
                and isinstance(data.get("cookies"), list)):
            return jar, "not-a-jar"
        reason = None
        for entry in data["cookies"]:
            cookie = _from_entry(entry)
            if cookie is None or jar._store(cookie, now) is not None:
                reason = "bad-entry"
        return jar, reason

    def browser_cookies(self, now: float) -> list[dict[str, Any]]:
        """The cookies as DevTools `Network.CookieParam`s for `Network.setCookies`.

        `domain` has a leading dot for a domain cookie and none for a host-only one, as in
        `Network.getCookies` (Chromium sets a dotless domain as host-only: the integration
        test checks it). `sameSite` is left out where the cookie had none, `expires` for a
        session cookie.
        """
        params = []
        for c in self.cookies(now):
            param: dict[str, Any] = {
                "name": c.name, "value": c.value, "domain": ("" if c.host_only else ".") + c.domain,
                "path": c.path, "secure": c.secure, "httpOnly": c.http_only,
            }
            if c.same_site != "Default":
                param["sameSite"] = c.same_site
            if c.expires is not None:
                param["expires"] = c.expires
            params.append(param)
        return params

    def receive_browser(self, url: str, cookies: Iterable[Mapping[str, Any]], now: float
                        ) -> list[Refusal]:
        """Take back what `Network.getCookies` gives after rendering `url` (or what
        `browser_cookies` gave): the cookies `url`'s host could set, under the same rules as
        `receive`, less the Secure ones the browser has applied already."""
        request = _request(url)
        refusals: list[Refusal] = []
        for entry in cookies:
            cookie = _from_browser(entry, now)
            name = _printable(str(entry.get("name", ""))) if isinstance(entry, Mapping) else ""
            if cookie is None:
                reason: str | None = "bad-entry"
            elif request is None:
                reason = "bad-url"
            elif not (request[1] == cookie.domain if cookie.host_only
                      else _domain_matches(request[1], cookie.domain)):
                reason = "domain-mismatch"
            else:
                reason = self._store(cookie, now)
            if reason is not None:
                refusals.append(Refusal(name, reason))
        return refusals


def _time(value: object) -> float | None:
    """A finite number as a float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _well_formed(cookie: Cookie) -> bool:
    """Domain and path of a cookie that did not come through `receive` are in canonical form."""
    return (_canonical_domain(cookie.domain) == cookie.domain and cookie.path.startswith("/")
            and not _CONTROL.search(cookie.path)
            and _octets(cookie.path) <= MAX_ATTRIBUTE_VALUE_BYTES)


def _from_entry(entry: object) -> Cookie | None:
    """A Cookie from one of `to_json`'s entries, or None if it is not one."""
    if not isinstance(entry, dict) or set(entry) != set(Cookie.__dataclass_fields__):
        return None
    texts = ("name", "value", "domain", "path", "same_site")
    if not all(isinstance(entry[k], str) for k in texts) or not all(
            isinstance(entry[k], bool) for k in ("host_only", "secure", "http_only")):
        return None
    created, last_access = _time(entry["created"]), _time(entry["last_access"])
    expires = None if entry["expires"] is None else _time(entry["expires"])
    if created is None or last_access is None or (expires is None) != (entry["expires"] is None):
        return None
    if entry["same_site"] not in ("Strict", "Lax", "None", "Default"):
        return None
    cookie = Cookie(**{**entry, "created": created, "last_access": last_access,
                       "expires": expires})
    return cookie if _well_formed(cookie) else None


def _from_browser(entry: object, now: float) -> Cookie | None:
    """A Cookie from a DevTools Cookie (or `browser_cookies`' CookieParam), or None if it is
    not one."""
    if not isinstance(entry, Mapping):
        return None
    name, value, path = entry.get("name"), entry.get("value"), entry.get("path", "/")
    domain = entry.get("domain")
    if not (isinstance(name, str) and isinstance(value, str) and isinstance(path, str)
            and isinstance(domain, str)):
        return None
    host_only = not domain.startswith(".")
    domain = _canonical_domain(domain.removeprefix(".").lower())
    if domain is None:
        return None
    expires = None
    if not entry.get("session", False) and entry.get("expires", -1) != -1:
        expires = _time(entry.get("expires"))
        if expires is None:
            return None
        expires = min(expires, now + MAX_AGE_SECONDS)
    same_site = entry.get("sameSite", "Default")
    if same_site not in ("Strict", "Lax", "None", "Default"):
        return None
    cookie = Cookie(name, value, domain, host_only, path, entry.get("secure") is True,
                    entry.get("httpOnly") is True, same_site, expires, now, now)
    return cookie if _well_formed(cookie) else None
