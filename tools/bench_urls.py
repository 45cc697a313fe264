"""python -m tools.bench_urls: µs per link for archiver.web.urls.normalize against ada-url.

ada-url (the WHATWG parser of Node.js, through its Python binding) is measured as a replacement
for the resolver step: `join_url` alone (a lower bound), and `join_url` plus the post-processing
we would still need for the archive's URL identity (http(s) only, userinfo and fragment dropped,
trailing host dot dropped, port 0 and non-DNS hosts refused, RFC 3986 escapes in path and query;
see tests/unit/web/test_urls_ada.py for why). Two workloads: the committed differential corpus (3,000
real-world-shaped links over ten bases) and a typical page's links against its one base (every
link of the demo web's pages, page by page).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable

import ada_url

from archiver.web.urls import normalize
from demoweb import DemoWeb, WebSpec

CORPUS = "tests/data/url_corpus.jsonl"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})|%")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_RAW = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
_QUERY_RAW = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")
_DNS_HOST = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}\Z|\[[0-9a-f:.]+\]\Z|[0-9.]+\Z")


def _escape(match: re.Match[str]) -> str:
    pair = match.group(1)
    if pair is None:
        return "%25"
    char = chr(int(pair, 16))
    return char if char in _UNRESERVED else "%" + pair.upper()


def _encode(match: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in match.group().encode())


def ada_normalize(link: str, base: str) -> str | None:
    """ada-url resolution plus what the archive's URL identity still needs."""
    try:
        # WHATWG escapes a raw ' in the query as %27 (we keep it raw, and keep an explicit %27):
        # a private-use stand-in tells the two apart afterwards.
        href = ada_url.join_url(base, link.replace("'", "\ue000") if "'" in link else link)
    except ValueError:
        return None
    scheme, sep, rest = href.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    rest = rest.partition("#")[0]
    cut = rest.find("/")
    authority, tail = rest[:cut], rest[cut:]
    authority = authority[authority.rfind("@") + 1 :]
    host, _, port = authority.rpartition(":") if not authority.endswith("]") else (authority, "", "")
    if not host:
        host, port = authority, ""
    host = host[:-1] if host.endswith(".") else host
    if port == "0" or len(host) > 253 or not _DNS_HOST.match(host):
        return None
    path, q, query = tail.partition("?")
    path = _PATH_RAW.sub(_encode, _ESCAPE.sub(_escape, path)) if "%" in path or not path.isascii() \
        else _PATH_RAW.sub(_encode, path)
    if q:
        query = _QUERY_RAW.sub(_encode, _ESCAPE.sub(_escape, query))
    origin = f"{scheme}://{host}" + (f":{port}" if port else "")
    url = origin + path + q + query
    return url.replace("%EE%80%80", "'") if "'" in link else url


def ada_join(link: str, base: str) -> str | None:
    try:
        return ada_url.join_url(base, link)
    except ValueError:
        return None


def per_link(resolvers: dict[str, Callable[[str, str], str | None]], pairs: list[tuple[str, str]],
             repeat: int) -> dict[str, float]:
    """µs of CPU per link for each resolver: the best of `repeat` rounds, each round running
    every resolver once in turn (CPU time and interleaving: the machine is shared)."""
    best = dict.fromkeys(resolvers, float("inf"))
    for _ in range(repeat):
        for label, resolve in resolvers.items():
            start = time.process_time()
            for link, base in pairs:
                resolve(link, base)
            best[label] = min(best[label], time.process_time() - start)
    return {label: seconds / len(pairs) * 1e6 for label, seconds in best.items()}


def page_pairs() -> list[tuple[str, str]]:
    """Every link of every demo-web document, each against the document's own URL."""
    web = DemoWeb(WebSpec(sites=3, pages_per_site=30, port=8080))
    pairs = []
    for host in web.normal_hosts:
        origin = web.origin(host)
        for path in web.pages(host):
            url = origin + path
            pairs += [(link.raw, url) for link in web.page_links(url)]
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_urls", description=__doc__)
    parser.add_argument("--repeat", type=int, default=12)
    args = parser.parse_args(argv)
    with open(CORPUS, encoding="utf-8") as f:
        corpus = [(e["link"], e["base"]) for e in map(json.loads, f)]
    workloads = {"corpus": corpus, "page": page_pairs()}
    resolvers = {"normalize": normalize, "ada join_url only": ada_join,
                 "ada join_url + post-processing": ada_normalize}
    for name, pairs in workloads.items():
        differ = sum(normalize(link, base) != ada_normalize(link, base) for link, base in pairs)
        print(f"{name}: {len(pairs)} links, ada+post differs from normalize on {differ}")
        for label, micros in per_link(resolvers, pairs, args.repeat).items():
            print(f"  {label:32s} {micros:6.2f} µs/link")
    return 0


if __name__ == "__main__":
    sys.exit(main())
