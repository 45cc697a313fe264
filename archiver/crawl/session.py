"""One visit's session with its site: its cookie jar and its login (pure state, no I/O).

Every request of a visit goes through its ``SiteConnection`` (archiver.crawl.connection), which
asks the ``SiteSession`` for the headers of a request (``Cookie``, ``Authorization``) and tells it
what each answer set (``Set-Cookie``). Both apply to the visit's own site only: a rendered page's
requests to other hosts carry no cookie and no credentials, and what they set is not kept.

The session's id names the captures made inside it (the ``session`` label, a catalog field):
``<credentials table>@<when it was opened, 14 digits UTC>``. ``check`` is the sheet's ``logged_in``
test on a page: when it fails, the session is lost, and the visit pauses the site
(archiver.crawl.login performs the logins; archiver.crawl.visit the checks and the pause).
"""

from __future__ import annotations

import time

from archiver.crawl.http import FetchResult, request_target
from archiver.credentials import Credential
from archiver.web import urls
from archiver.web.cookies import CookieJar
from archiver.web.logins import (
    DigestChallenge,
    basic_authorization,
    digest_authorization,
    digest_challenge,
)
from archiver.web.sheets import Login

LOGIN = "login"  # the label of a login's exchanges (never replayed as content)
SESSION = "session"  # the label of a capture made inside a session
SESSION_LOST = "session-lost"  # the label of a capture made once the session was lost


class SiteSession:
    """The cookie jar and login of one visit of ``origin``."""

    def __init__(self, origin: str, *, jar: CookieJar | None, login: Login | None,
                 credential: Credential | None) -> None:
        """``jar``: None when crawl.cookies is off; ``login`` and its ``credential``: None for a
        site its sheet does not log in to."""
        self.origin = origin
        self._prefix = origin + "/"
        self.jar = jar
        self.login = login
        self.credential = credential
        self.id = ""  # the session's id, "" before its first login
        self.opened = False  # the login succeeded
        self.lost = ""  # why the session was lost (the site pauses), "" while it holds
        self.authorization: str | None = None  # the Basic Authorization value sent to the site
        self.digest: DigestChallenge | None = None  # the Digest challenge answered
        self.digest_count = 0  # requests sent under it (Digest's nc)
        # The form login's page, absolute (None: no form login, or its login_url is not a URL of
        # the site), and the prefix of where a logged-out visitor is sent (a single sign-on
        # service may be another site).
        page = urls.normalize(login.login_url, self._prefix) if login and login.method == "form" \
            else None
        self.login_url = page if page is not None and self.own(page) else None
        self._logged_out = (urls.normalize(login.logged_out_url, self._prefix)
                            or login.logged_out_url) if login and login.logged_out_url else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be written anywhere: the password."""
        return (self.credential.password,) if self.credential is not None else ()

    def begin(self, now: float) -> str:
        """A login starts at ``now``: the session's id (its exchanges are labelled with it)."""
        assert self.login is not None
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now))
        self.id, self.opened, self.lost = f"{self.login.credentials}@{stamp}", False, ""
        return self.id

    def open(self) -> None:
        """The login succeeded: captures from now on are the session's."""
        assert self.login is not None and self.id
        self.opened = True
        if self.login.method == "basic" and self.credential is not None:
            self.authorization = basic_authorization(self.credential.username,
                                                     self.credential.password)

    def login_page(self, url: str) -> bool:
        """Is ``url`` the form login's page (whatever its query: ``/login?next=...``)? Fetched
        to log in only, never crawled as a page: it is not the site's content, and following
        it again could end the session."""
        return self.login_url is not None and (
            url.partition("?")[0] == self.login_url.partition("?")[0])

    def own(self, url: str) -> bool:
        """Is ``url`` (normalised) of the visit's own site (the only one the session speaks to)?"""
        return url.startswith(self._prefix) or url == self.origin

    def request_headers(self, url: str, now: float, method: str = "GET"
                        ) -> list[tuple[str, str]]:
        """The session's headers for a ``method`` request to ``url``."""
        if not self.own(url):
            return []
        headers = []
        if self.jar and (cookie := self.jar.header(url, now)) is not None:
            headers.append(("Cookie", cookie))
        if self.authorization is not None:
            headers.append(("Authorization", self.authorization))
        elif (self.digest is not None and self.credential is not None
              and (target := request_target(url)) is not None):
            self.digest_count += 1
            headers.append(("Authorization", digest_authorization(
                self.credential.username, self.credential.password, self.digest, method, target,
                nc=self.digest_count)))
        return headers

    def challenge(self, result: FetchResult) -> bool:
        """Is ``result`` a Digest challenge the session answers (the first, or a stale nonce)?
        If so, the next request to the site carries the answer."""
        login = self.login
        if (login is None or login.method != "digest" or not self.opened
                or result.status != 401 or not self.own(result.url)):
            return False
        offered = [value for name, value in result.headers if name.lower() == "www-authenticate"]
        challenge = digest_challenge(offered)
        if challenge is None or (self.digest is not None and not challenge.stale):
            return False  # none to answer, or our answer was refused: the check says lost
        self.digest, self.digest_count = challenge, 0
        return True

    def answered(self, result: FetchResult, now: float) -> list[str]:
        """Keep what the answer to ``result.url`` set; the refused cookies' reasons."""
        if self.jar is None or result.status is None or not self.own(result.url):
            return []
        values = [value for name, value in result.headers if name.lower() == "set-cookie"]
        if not values:
            return []
        return [f"{name}: {reason}" for name, reason in self.jar.receive(result.url, values, now)]

    def labels(self) -> dict[str, str]:
        """The labels of a capture made now: the open session's, or its loss's."""
        if self.lost:
            return {SESSION_LOST: self.id}
        return {SESSION: self.id} if self.opened else {}

    def check(self, url: str, status: int, location: str | None, text: str | None) -> str:
        """Why the answer to the page ``url`` shows the session lost ("" if it does not):
        a redirect to ``logged_out_url``, credentials refused (401), or a page of the check's
        scope (``text``: its decoded text, None if not HTML) without the ``logged_in`` text."""
        login = self.login
        if login is None or not self.opened or not self.own(url):
            return ""
        if status == 401 and login.method in ("basic", "digest"):
            return f"session lost: {url} answered 401 (credentials refused)"
        if 300 <= status < 400 and location and self._logged_out is not None:
            target = urls.normalize(location, url) or location
            if target.startswith(self._logged_out):
                return f"session lost: {url} redirected to {target}"
        if (login.logged_in and text is not None and 200 <= status < 300
                and login.checks(url) and login.logged_in not in text):
            return f"session lost: {url} did not contain {login.logged_in!r}"
        return ""

