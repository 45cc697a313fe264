"""The cookie jar's DevTools shapes in real Chromium: what `CookieJar.browser_cookies` gives,
`Storage.setCookies` stores as the same cookies (host-only ones stay host-only, domain ones keep
their domain), and what `Storage.getCookies` gives back, `CookieJar.receive_browser` takes back
unchanged. Storage.* takes and gives the same CookieParam and Cookie objects as Network.*."""

from __future__ import annotations

import time
from typing import Any

import trio

from archiver.browser.chromium import supervised
from archiver.web.cookies import Cookie, CookieJar


def without_times(cookie: Cookie) -> tuple[Any, ...]:
    return (cookie.name, cookie.value, cookie.domain, cookie.host_only, cookie.path,
            cookie.secure, cookie.http_only, cookie.same_site, cookie.expires)


async def test_the_jar_survives_a_round_trip_through_chromium() -> None:
    now = float(int(time.time()))  # Chromium judges expiry by its own clock
    jar = CookieJar()
    assert jar.receive("https://www.example.com/a/page", [
        "host=1",
        "wide=2; Domain=example.com; Path=/; Max-Age=3600",
        "sec=3; Secure; HttpOnly; SameSite=Strict; Path=/",
        "lax=4; SameSite=Lax; Domain=www.example.com",
        "none=5; SameSite=None; Secure",
        "__Host-h=6; Secure; Path=/",
    ], now) == []
    with trio.fail_after(60):
        async with supervised() as browser:
            devtools = await browser.devtools()
            await devtools.send("Storage.setCookies", {"cookies": jar.browser_cookies(now)})
            stored = (await devtools.send("Storage.getCookies"))["cookies"]
    by_name = {c["name"]: c for c in stored}
    assert by_name["host"]["domain"] == "www.example.com"  # host-only: no leading dot
    assert by_name["wide"]["domain"] == ".example.com"
    assert by_name["lax"]["domain"] == ".www.example.com"  # a Domain attribute: a domain cookie
    assert by_name["wide"]["expires"] == now + 3600 and by_name["host"]["session"]
    back = CookieJar()
    assert back.receive_browser("https://www.example.com/", stored, now) == []
    assert sorted(map(without_times, back.cookies(now))) == sorted(
        map(without_times, jar.cookies(now)))
    for url in ("https://www.example.com/a/x", "http://www.example.com/", "https://example.com/"):
        assert back.header(url, now) == jar.header(url, now)
