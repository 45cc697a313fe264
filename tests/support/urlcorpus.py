"""A seeded corpus of real-world-shaped links, each with the page URL it appears on.

`python -m tests.support.urlcorpus` writes tests/data/url_corpus.jsonl (one {"base", "link"} object a
line); the differential test reads that file, and checks it is what this generator gives.
The shapes are those the live web is full of: relative and absolute links, redirectors and share
buttons with URLs in their queries, login `next=` links, tracking parameters, non-ASCII paths
and queries, IDN hosts, IPv6 literals, userinfo, ports, backslashes, tabs and newlines inside
attributes, `%` garbage, dot segments, and the schemes a crawler must leave alone.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

CORPUS = Path(__file__).parents[1] / "data" / "url_corpus.jsonl"
SEED = 20261111
SIZE = 3000

# Pages links are found on (already normalised, as the crawler's bases are).
BASES = [
    "https://www.example.com/news/2024/article.html?id=7",
    "http://blog.example.org/posts/",
    "https://shop.example.net/catalog/item?id=12&ref=home",
    "http://127.0.0.1:8080/",
    "https://[2001:db8::1]/wiki/Main_Page",
    "https://xn--bcher-kva.example/buch/",
    "http://example.de/%C3%BCber/uns.html",
    "https://forum.example.com/t/how-to/1234?page=2",
    "http://old.example.com/~user/index.html",
    "https://example.com/",
]
HOSTS = ["example.com", "www.example.org", "cdn.example.net", "EXAMPLE.COM", "example.com.",
         "bücher.example", "例え.テスト", "ÉCOLE.example.fr", "xn--bcher-kva.example", "my_host.example",
         "127.0.0.1", "0x7f.0.0.1", "2130706433", "[2001:DB8::1]", "[::ffff:192.0.2.1]",
         "[fe80::1%25eth0]", "a..b.example", "-dash.example", "ex ample.com", "sub.例え.jp",
         "192.168.0.1.", "1.2.3.256", "faß.de", "example.com:8080",
         "\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com"]  # fmt: skip
PORTS = ["", "", "", ":80", ":443", ":8080", ":0", ":65535", ":65536", ":99999", ":", ":08080"]
USERINFO = ["", "", "", "", "user@", "user:secret@", "a%40b:c@", "@"]
WORDS = ["news", "about", "Café", "über uns", "北京", "naïve", "a b", "100%", "50%off", "%zz",
         "%7euser", "%E2%82%AC", "%e2%82%ac", "x|y", "{id}", "[1]", "a^b", "a`b", 'q"x', "<b>",
         "it's", "a+b", "a&b", "a=b", "a;b", "a:b", "a@b", "~tilde", "%2Fslash", "%2e", "😀",
         "Ünïcödé", "%", "%%", "%4", "tab\there", "new\nline", "back\\slash"]  # fmt: skip
SCHEMES = ["mailto:someone@example.com", "javascript:void(0)", "javascript:alert('x')",
           "tel:+1-555-0100", "data:image/png;base64,iVBORw0KGgo=", "whatsapp://send?text=hi",
           "about:blank", "sms:+15550100", "ftp://ftp.example.org/pub/", "file:///etc/passwd",
           "irc://irc.example.net/chan", "magnet:?xt=urn:btih:abc", "c:\\windows\\win.ini"]  # fmt: skip
TRACKING = ["utm_source=newsletter&utm_medium=email&utm_campaign=spring", "fbclid=IwAR0x_y-Z",
            "gclid=Cj0KCQ", "ref=home", "mc_eid=1a2b&mc_cid=3c4d", "_ga=2.1.2.3",
            "sessionid=ABC123"]  # fmt: skip


def _word(rng: random.Random) -> str:
    return rng.choice(WORDS)


def _path(rng: random.Random) -> str:
    return "/" + "/".join(_word(rng) for _ in range(rng.randint(0, 3))) + rng.choice(["", "/", ".html"])


def _absolute(rng: random.Random) -> str:
    scheme = rng.choice(["http://", "https://", "https://", "HTTP://", "http:", "http:/", "http:\\\\"])
    return scheme + rng.choice(USERINFO) + rng.choice(HOSTS) + rng.choice(PORTS) + _path(rng)


def _target(rng: random.Random) -> str:
    """A URL as carried inside a query: raw, or encoded as a careful page would."""
    url = _absolute(rng) + rng.choice(["", "?a=1&b=2", "?q=" + _word(rng)])
    return rng.choice([url, url, quote(url, safe=""), quote(url, safe=":/")])


def _relative(rng: random.Random) -> str:
    return rng.choice([
        "page.html", "./page.html", "../img/logo.png", "../../../../../up.html", "/about/", "",
        ".", "..", "./", "?page=3", "?", "#top", "#", "#!/hashbang", "//cdn.example.net/lib.js",
        "\\images\\logo.png", "..\\up.html", "/a/./b/../c", "a/b/../../c", "g;x?y#s", "http:g",
        "https:rel", "%2e%2e/x", "/%2e/y", "1a:b", "./a:b",
    ]) + rng.choice(["", "", "", "#frag", "?x=1"])  # fmt: skip


def _shaped(rng: random.Random) -> str:
    return rng.choice([
        lambda: f"/q?{_target(rng)}",
        lambda: f"/p?{_absolute(rng)}",
        lambda: f"https://twitter.com/intent/tweet?url={_target(rng)}&text={_word(rng)}",
        lambda: f"https://www.facebook.com/sharer/sharer.php?u={_target(rng)}",
        lambda: f"https://l.example.com/l.php?u={_target(rng)}&h=AT0",
        lambda: f"/login?next={_path(rng)}",
        lambda: f"/accounts/login/?next={quote(_path(rng))}",
        lambda: f"/redirect?to={_target(rng)}",
        lambda: f"{_path(rng)}?{rng.choice(TRACKING)}",
        lambda: f"{_absolute(rng)}?{rng.choice(TRACKING)}#{_word(rng)}",
        lambda: f"/search?q={_word(rng)}+{_word(rng)}&lang=de",
        lambda: f"?q={_word(rng)}",
        lambda: _path(rng),
        lambda: _absolute(rng),
        lambda: _relative(rng),
        lambda: rng.choice(SCHEMES),
        lambda: rng.choice([" ", "\t", "\n", " \n "]) + _relative(rng) + rng.choice(["", " ", "\n"]),
        lambda: _path(rng).replace("/", rng.choice(["/", "\\", "/\t", "/\n"]), 2),
    ])()  # fmt: skip


def generate(seed: int = SEED, size: int = SIZE) -> list[dict[str, str]]:
    rng = random.Random(seed)
    maker: Callable[[random.Random], str] = _shaped
    return [{"base": rng.choice(BASES), "link": maker(rng)} for _ in range(size)]


def lines(corpus: list[dict[str, str]]) -> str:
    return "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in corpus)


def main() -> int:
    CORPUS.parent.mkdir(exist_ok=True)
    CORPUS.write_text(lines(generate()), encoding="utf-8")
    print(f"wrote {SIZE} links to {CORPUS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
