"""Resolve and normalise links: the crawl's URL identity (pure logic, no I/O).

A normalised URL is ``scheme://host[:port]/path[?query]`` where:

- the scheme is ``http`` or ``https``; every other scheme is refused (None);
- leading/trailing C0 controls and spaces are stripped and tab/CR/LF removed anywhere, and in
  the part before the query a backslash counts as a slash (WHATWG URL, "basic URL parser");
- relative references are resolved against the base (RFC 3986 §5.2), with the WHATWG twist
  that ``http:g`` against an http base is relative, as browsers do (RFC 3986 §5.4.2 allows it);
- scheme and host are lower-case, a non-ASCII host is IDNA-encoded (RFC 3986 §6.2.2.1, WHATWG
  "domain to ASCII"), the default port is dropped (RFC 3986 §6.2.3), userinfo and fragment are
  dropped, the path has no dot segments (§5.2.4) and is never empty (§6.2.3);
- percent-encoding is normalised (§6.2.2.1-2): escapes of unreserved characters are decoded,
  other escapes keep their meaning with upper-case hex, characters that may not appear raw
  are UTF-8 percent-encoded, reserved characters keep their form (``%2F`` stays ``%2F``);
- the query keeps its order and an empty query (``/p?`` stays ``/p?``): RFC 3986 §6.2.3 does
  not license dropping an empty component's delimiter, and WHATWG keeps it too.

The characters left raw are RFC 3986's, so every result is a valid URI (fit for WARC-Target-URI):
this encodes a few characters browsers send raw (``[]|^`` in paths) and keeps ``'`` raw in
queries where browsers send ``%27``; servers decode both forms alike. The query is encoded as
UTF-8 whatever the page's charset (WHATWG would use a legacy page encoding there). Hosts that
are already ASCII are checked for syntax only (``xn--`` labels are not decoded), which keeps
the common case fast and the result stable under a second pass.

``normalize(normalize(x)) == normalize(x)`` for every input.

Nothing leaves ``normalize`` unchecked: the path and query pass either the fast path's
normal-form gate or, after percent-encoding, an RFC 3986 path-and-query check, and the origin
passed its own check when it was built (once per authority, cached). A slip in any regex here
costs one link (None; `rejection` says "not-uri"), never a non-URI handed to the HTTP client.
"""

import functools
import ipaddress
import re
from urllib.parse import unquote

import idna

_DEFAULT_PORTS = {"http": 80, "https": 443}

# WHATWG: strip leading/trailing "C0 control or space", remove ASCII tab or newline anywhere.
_C0_SPACE = "".join(map(chr, range(0x21)))
_TAB_NEWLINE = {0x09: None, 0x0A: None, 0x0D: None}

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")

# Characters allowed raw in a path or query (RFC 3986 §3.3-3.4: unreserved, sub-delims, ":@/?").
# Anything else, including "%", sends the string through the slow percent pass.
_PLAIN = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*\Z")
# Text already in normal form: allowed characters and upper-case escapes of other than unreserved
# bytes (the second, slower gate, for the many links that carry escaped UTF-8 or URLs). The
# possessive quantifiers keep the match linear on long near-misses.
_NORMAL_ESCAPE = r"%(?!2[DE]|3[0-9]|[46][1-9A-F]|[57][0-9A]|5F|7E)[0-9A-F]{2}"
_NORMAL_TEXT = re.compile(rf"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]++|{_NORMAL_ESCAPE})*+\Z")
# A path (and query) in normal form: the gate of the fast path, and so the guarantee that what it
# returns is a valid RFC 3986 path-abempty [ "?" query ]. Unlike _NORMAL_TEXT, no "?" in the path.
_NORMAL_TAIL = re.compile(
    rf"/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]++|{_NORMAL_ESCAPE})*+"
    rf"(?:\?(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]++|{_NORMAL_ESCAPE})*+)?+\Z"
)
# RFC 3986 §3.3-3.4 path-abempty (absolute here) [ "?" query ]: what the slow path must produce.
_URI_TAIL = re.compile(
    r"/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]++|%[0-9A-F]{2})*+"
    r"(?:\?(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]++|%[0-9A-F]{2})*+)?+\Z"
)
# What `_origin` builds: scheme, a host name, dotted IPv4 or bracketed IPv6, a port not the default.
_ORIGIN = re.compile(r"https?://(?:[a-z0-9_\-.]++|\[[0-9a-f:.]++\])(?::[1-9][0-9]{0,4})?+\Z")
_RAW = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")
_PCT_BYTE = [f"%{b:02X}" for b in range(256)]
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Every two-hex-digit escape body, in any case -> its normal form: the character if unreserved,
# else the escape with upper-case hex.
_ESCAPES = {
    a + b: chr(int(a + b, 16)) if int(a + b, 16) in _UNRESERVED else "%" + (a + b).upper()
    for a in "0123456789abcdefABCDEF"
    for b in "0123456789abcdefABCDEF"
}

# Host names: letters, digits, hyphen and underscore, labels of 1-63 bytes (RFC 1035 §2.3.4).
# Underscores and edge hyphens are outside strict LDH but occur on the live web and resolve,
# and browsers accept them (WHATWG runs UTS #46 with UseSTD3ASCIIRules and CheckHyphens off).
_HOST = re.compile(r"[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*\Z")
_MAX_HOST = 253  # RFC 1035 §2.3.4: 255 octets on the wire = 253 characters in dotted form
# WHATWG "ends in a number checker": such a host must parse as an IPv4 address or is invalid.
_NUMERIC_LABEL = re.compile(r"(?:[0-9]+|0[xX][0-9A-Fa-f]*)\Z")


def normalize(url: str, base: str | None = None) -> str | None:
    """Resolve `url` against `base` (an already-normalised absolute URL) and normalise it.

    Returns None for anything that is not an http/https URL we could fetch: other schemes
    (mailto:, javascript:, data:, tel:, ftp:, ...), empty or invalid hosts, unparsable input,
    invalid ports; `rejection` says which. `base` should come from here: it is checked once
    (cached) and normalised if it was not; a base that is not an absolute http(s) URL gives None
    for every relative link.

    Every result is an ASCII RFC 3986 URI: the path and query it returns passed either the
    fast-path gate (`_NORMAL_TAIL`) or, after percent-encoding, the URI check (`_URI_TAIL`), and
    the origin passed `_ORIGIN` when it was built; nothing else is returned.
    """
    url = url.strip(_C0_SPACE)
    if not url.isprintable():  # cheap gate: tab, CR and LF are not printable
        url = url.translate(_TAB_NEWLINE)
    cut = url.find("#")
    if cut >= 0:
        url = url[:cut]
    cut = url.find("?")
    if cut >= 0:
        head, query = url[:cut], url[cut + 1 :]
    else:
        head, query = url, None
    if "\\" in head:
        head = head.replace("\\", "/")

    if head[:4] == "http":  # fast path for the usual lower-case absolute URLs
        if head[4:7] == "://":
            return _absolute("http", head[5:], query)
        if head[4:8] == "s://":
            return _absolute("https", head[6:], query)
    match = _SCHEME.match(head) if ":" in head else None
    if match is not None:
        scheme = match.group(1).lower()
        if scheme not in _DEFAULT_PORTS:
            return None
        rest = head[match.end() :]
        # WHATWG "special relative or authority state": "http:g" and "http:/g" against an http
        # base are relative, as in browsers (RFC 3986 §5.4.2 allows it for compatibility).
        if base is None or rest.startswith("//") or not base.startswith(scheme + ":"):
            return _absolute(scheme, rest, query)
        head = rest
    elif base is None:
        return None

    parts = _base_parts(base)
    if parts is None:
        return None
    base, base_origin, base_path, base_directory = parts
    if head.startswith("//"):  # scheme-relative: the normalised base's scheme
        return _absolute(base[: base.find(":")], head, query)
    if not head:
        if query is None:
            return base
        return _finish(base_origin, base_path, query)
    if head[0] != "/":
        head = base_directory + head if head[0] != "." else _merge(base_directory, head)
    return _finish(base_origin, head, query)


REJECTIONS = ("empty", "scheme", "relative-without-base", "base", "host", "port", "not-uri")


def rejection(url: str, base: str | None = None) -> str:
    """Why `normalize(url, base)` gave None, as one of REJECTIONS ("" if it did not):

    - "empty": nothing but spaces, controls or a fragment, and no base to stand for;
    - "scheme": a scheme other than http or https (mailto:, javascript:, data:, tel:, ftp:, ...);
    - "relative-without-base": a relative reference and no base to resolve it against;
    - "base": a relative reference against a base that is not an absolute http(s) URL;
    - "host": an empty or invalid host (bad characters or label lengths, a bad IPv4 or IPv6
      literal, an IPv6 zone, a name with no ASCII form);
    - "port": a port that is not 1-65535 in ASCII digits;
    - "not-uri": the result failed the final URI check, which means a bug in this module.

    Slower than `normalize` (it runs it first); meant for counting the links it refused.
    """
    if normalize(url, base) is not None:
        return ""
    url = url.strip(_C0_SPACE).translate(_TAB_NEWLINE)
    head = url.partition("#")[0].partition("?")[0].replace("\\", "/")
    if not url.partition("#")[0] and base is None:
        return "empty"
    match = _SCHEME.match(head)
    if match is not None:
        scheme = match.group(1).lower()
        if scheme not in _DEFAULT_PORTS:
            return "scheme"
        rest = head[match.end() :]
        relative = base is not None and not rest.startswith("//") and base.startswith(scheme + ":")
        if not relative:
            return _authority(scheme, rest.lstrip("/").partition("/")[0])[1] or "not-uri"
    elif base is None:
        return "relative-without-base"
    parts = _base_parts(base) if base is not None else None
    if parts is None:
        return "base"
    if match is None and head.startswith("//"):
        scheme = parts[0][: parts[0].find(":")]
        return _authority(scheme, head.lstrip("/").partition("/")[0])[1] or "not-uri"
    return "not-uri"


def _finish(origin: str, path: str, query: str | None) -> str | None:
    """``origin + path [? query]`` with the path and query normalised, or None if they cannot
    be made a valid URI path and query (which would be a bug here: see `_URI_TAIL`)."""
    tail = path if query is None else f"{path}?{query}"
    if _NORMAL_TAIL.match(tail) is None:
        path = _pct(path)
        if query is not None:
            query = _pct(query)
        tail = path if query is None else f"{path}?{query}"
        if _URI_TAIL.match(tail) is None:
            return None
    if "/." in path:
        path = _remove_dot_segments(path)
        tail = path if query is None else f"{path}?{query}"
    return origin + tail


@functools.lru_cache(maxsize=64)
def _base_parts(base: str) -> tuple[str, str, str, str] | None:
    """(base, origin, path, directory) of a base URL, normalised first if it was not (a WARC
    from elsewhere, say), or None if it is not an absolute http(s) URL; cached, as a page's
    links share it.

    "http://" and "https://" are 7 and 8 characters and a host is not empty, so the path's
    slash is the first one from index 8.
    """
    cut = base.find("/", 8)
    if cut < 0 or _ORIGIN.match(base[:cut]) is None or _URI_TAIL.match(base[cut:]) is None:
        fixed = normalize(base)
        if fixed is None:
            return None
        base, cut = fixed, fixed.find("/", 8)
    origin, path = base[:cut], base[cut:]
    cut = path.find("?")
    if cut >= 0:
        path = path[:cut]
    return base, origin, path, path[: path.rfind("/") + 1]


def _merge(directory: str, ref: str) -> str:
    """RFC 3986 §5.2.3 merge of a relative-path `ref` starting with '.' into `directory`,
    consuming its leading "./" and "../" segments at once: the common case, cheaper than §5.2.4
    on the whole path (which still runs afterwards if dot segments remain). `directory` ends
    with '/'."""
    i, end = 0, len(ref)
    while ref.startswith(".", i):
        if ref.startswith("../", i) or (i + 2 == end and ref.endswith("..")):
            directory = directory[: directory.rfind("/", 0, -1) + 1] or "/"
            i += 3
        elif ref.startswith("./", i) or i + 1 == end:
            i += 2
        else:
            break
    return directory + ref[i:]


def _absolute(scheme: str, rest: str, query: str | None) -> str | None:
    """Build the URL from `rest` = slashes + authority + path (WHATWG: special schemes ignore
    any number of slashes before the authority, so ``http:/x`` and ``http:///x`` mean http://x/)."""
    rest = rest.lstrip("/")
    cut = rest.find("/")
    if cut >= 0:
        origin, path = _origin(scheme, rest[:cut]), rest[cut:]
    else:
        origin, path = _origin(scheme, rest), "/"
    if origin is None:
        return None
    return _finish(origin, path, query)


@functools.lru_cache(maxsize=4096)
def _origin(scheme: str, authority: str) -> str | None:
    """``scheme://host[:port]`` from a raw authority, or None if it is not fetchable."""
    return _authority(scheme, authority)[0]


def _authority(scheme: str, authority: str) -> tuple[str | None, str]:
    """(origin, "") for a fetchable raw authority, else (None, the `rejection` reason).

    Userinfo is dropped: it is not part of the resource's identity (RFC 9110 §4.2.4 forbids
    sending it in http(s) URIs and deprecates it), browsers strip it from requests, and a
    public archive must not store passwords. Heritrix keeps it; most crawlers drop it.
    """
    authority = authority[authority.rfind("@") + 1 :]
    if authority.startswith("["):
        cut = authority.find("]")
        if cut < 0:
            return None, "host"
        host = _ipv6(authority[1:cut])
        port = authority[cut + 1 :]
        if port and port[0] != ":":
            return None, "host"
        port = port[1:]
    else:
        cut = authority.find(":")
        if cut >= 0:
            host, port = _host(authority[:cut]), authority[cut + 1 :]
        else:
            host, port = _host(authority), ""
    if host is None:
        return None, "host"
    if not port:  # WHATWG: "http://a:/" has no port
        origin = f"{scheme}://{host}"
    elif not (port.isascii() and port.isdigit() and len(digits := port.lstrip("0")) <= 5
              and 0 < int(digits or "0") < 65536):
        # Port 0 is valid syntax (WHATWG) but no server can listen there. The length test comes
        # first: int() refuses more than 4300 digits with an exception.
        return None, "port"
    elif int(digits) == _DEFAULT_PORTS[scheme]:
        origin = f"{scheme}://{host}"
    else:
        origin = f"{scheme}://{host}:{int(digits)}"
    if _ORIGIN.match(origin) is None:
        return None, "not-uri"
    return origin, ""


def _host(host: str) -> str | None:
    """Lower-case, IDNA-encoded host name or dotted IPv4 address; None if invalid."""
    if "%" in host:  # WHATWG host parser: percent-decode, then UTF-8 decode (U+FFFD fails)
        host = unquote(host, errors="replace")
    host = host.lower()
    # A single trailing dot (the fully qualified form) is dropped, as Google Safe Browsing
    # canonicalisation and the IA SURT canonicaliser do, so that "example.com." is not crawled
    # as a second site; servers often reject it in Host anyway. WHATWG would keep it.
    if host.endswith("."):
        host = host[:-1]
    if not host.isascii():
        host = _idna(host)
        if host.endswith("."):  # "example.com。" maps to a trailing full stop too
            host = host[:-1]
    if len(host) > _MAX_HOST or _HOST.match(host) is None:
        return None
    last = host[host.rfind(".") + 1 :]
    if _NUMERIC_LABEL.match(last) is not None:
        return _ipv4(host)
    return host


def _idna(host: str) -> str:
    """ASCII form of a non-ASCII host name, or "" if it has none.

    First UTS #46 non-transitional processing over IDNA 2008 (what WHATWG and current browsers
    do: "faß.de" is xn--fa-hia.de), then IDNA 2003 (Python's codec) for names IDNA 2008 refuses
    but that resolve and that browsers still open, such as emoji domains or underscores.
    """
    try:
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        pass
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return ""


def _ipv4(host: str) -> str | None:
    """Dotted-decimal form of a WHATWG IPv4 host (1-4 parts, each decimal, 0x-hex or 0-octal)."""
    parts = host.split(".")
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        if part[:2] in ("0x", "0X"):
            digits, radix = part[2:] or "0", 16
        elif len(part) > 1 and part[0] == "0":
            digits, radix = part[1:], 8
        else:
            digits, radix = part, 10
        if not (digits.isascii() and digits.isalnum()):  # int() would take "-1", "+1", "1_0"
            return None
        try:
            numbers.append(int(digits, radix))
        except ValueError:
            return None
    last = numbers.pop()
    if any(n > 255 for n in numbers) or last >= 256 ** (4 - len(numbers)):
        return None
    for i, n in enumerate(numbers):
        last += n << (8 * (3 - i))
    return str(ipaddress.IPv4Address(last))


def _ipv6(text: str) -> str | None:
    """``[compressed lower-case form]`` of an IPv6 literal (RFC 5952), None if invalid."""
    if "%" in text:  # zone identifiers (RFC 6874) mean nothing off the local link
        return None
    try:
        return f"[{ipaddress.IPv6Address(text).compressed}]"
    except ValueError:
        return None


def _pct(text: str) -> str:
    """Normalise the percent-encoding of a path or query (RFC 3986 §2.1, §2.3, §6.2.2.2)."""
    if _PLAIN.match(text) is not None or _NORMAL_TEXT.match(text) is not None:
        return text
    parts = text.split("%")
    out = [_encode(parts[0])]
    for part in parts[1:]:
        escape = _ESCAPES.get(part[:2])
        if escape is None:
            # A '%' that starts no escape is encoded (RFC 3986 §2.4). WHATWG keeps it raw,
            # but then "%%61b" would become "%ab", which a second pass would read as an escape.
            out.append("%25")
            rest = part
        else:
            out.append(escape)
            rest = part[2:]
        if rest:
            out.append(_encode(rest))
    return "".join(out)


def _encode(text: str) -> str:
    """UTF-8 percent-encode the characters of `text` (which has no '%') not allowed raw."""
    if _PLAIN.match(text) is not None:
        return text
    return _RAW.sub(_encode_run, text)


def _encode_run(match: re.Match[str]) -> str:
    run = match.group()
    try:
        data = run.encode()
    except UnicodeEncodeError:  # lone surrogates: WHATWG turns them into U+FFFD
        data = run.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()
    return "".join([_PCT_BYTE[b] for b in data])


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 on an absolute path: '.' segments go, '..' removes its parent."""
    segments = path.split("/")
    out: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


# URLs that ``normalize`` returns unchanged, in their commonest shape: a lower-case host name of
# ASCII labels ending in a letter label (no IP address, no port), a path and query of characters
# that stay raw, no dot segment, no "%". ``is_normal`` is a fast test for the external-link batch,
# whose input mostly came out of ``normalize`` already; anything else takes the full path.
_NORMAL_URL = re.compile(
    r"https?://(?=[^/]{1,253}/)(?:[a-z0-9_-]{1,63}\.)*[a-z][a-z0-9_-]{0,62}"
    r"(?!.*/\.\.?(?:[/?]|$))/[A-Za-z0-9._~!$&'()*+,;=:@/-]*(?:\?[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?"
)


def is_normal(url: str) -> bool:
    """True only if ``normalize(url) == url`` (a fast, conservative check: False says nothing)."""
    return _NORMAL_URL.fullmatch(url) is not None


def origin(url: str) -> str:
    """'scheme://host' or 'scheme://host:port' (default port omitted) of a normalised URL."""
    return url[: url.find("/", 8)]


def split_origin(url: str) -> tuple[str, str]:
    """(origin, path-and-query) of a normalised URL; path-and-query always starts with '/'."""
    cut = url.find("/", 8)
    return url[:cut], url[cut:]


def origin_parts(origin: str) -> tuple[str, str, int]:
    """(scheme, host, port) with the port always explicit (80 / 443 filled in).

    An IPv6 host comes without its brackets, ready for a socket or a resolver.
    """
    scheme, _, authority = origin.partition("://")
    if authority.startswith("["):
        cut = authority.find("]")
        host, port = authority[1:cut], authority[cut + 2 :]
    else:
        host, _, port = authority.partition(":")
    return scheme, host, int(port) if port else _DEFAULT_PORTS[scheme]


def site_of_seed(line: str) -> str | None:
    """A seeds-file line (a URL, or a bare host name / host:port which means http://) ->
    normalised URL, or None. Blank lines and '#' comments give None."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    if "://" in line:
        return normalize(line)
    # A bare "host[:port][/path]": refuse "user@host" so that "mailto:a@b" is not read as b.
    if "@" in line.split("/", 1)[0]:
        return None
    return normalize("http://" + line)


def path_segments(url: str) -> list[str]:
    """Percent-decoded path segments of a normalised URL, for trap guards.

    "/a/b%20c/" gives ["a", "b c"]: the empty segment after a final slash is dropped, inner
    empty segments ("//") are kept. Undecodable bytes become U+FFFD.
    """
    path = url[url.find("/", 8) + 1 :]
    cut = path.find("?")
    if cut >= 0:
        path = path[:cut]
    if not path:
        return []
    segments = path.split("/")
    if not segments[-1]:
        segments.pop()
    return [unquote(s, errors="replace") if "%" in s else s for s in segments]


def scheme_twin(origin: str) -> str | None:
    """``origin``'s host in the other scheme, when both are on their default ports (``http://h``
    and ``https://h``); None for an origin with a port of its own."""
    scheme, _, authority = origin.partition("://")
    if ":" in authority.rpartition("]")[2]:  # normalised origins leave out ports 80 and 443
        return None
    return ("https" if scheme == "http" else "http") + "://" + authority
