"""Logging a visit in to its site, as its sheet says (the trio shell of archiver.crawl.session).

Basic credentials need no exchange: the session opens at once and every request to the site
carries them. Digest credentials answer the site's first ``401`` challenge (that answer is the
login's exchange). A form login fetches ``login_url``, fills in the form holding the two fields
(its hidden fields, a CSRF token say, as the page gave them), posts it, follows the redirects on
the site, and checks that the page it ends on contains ``login_success``. On a site captured in
the browser (``capture = "browser"``) the form login is scripted: the login page is rendered, its
form (one its scripts built, too) filled in and submitted in the tab, and the text of the page it
leads to checked.

Every request of a login is a fetch of the visit: it rests as any other, obeys robots.txt (a login
page robots.txt disallows cannot be used: the site pauses with that reason), and is archived
with the label ``login`` (never replayed as content); its request record holds the password
replaced (archiver.web.logins.redact_request). A form that would send the password in its URL
(method GET) is refused.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from archiver.browser.render import FormFill, FormMissing
from archiver.crawl.rendering import RenderFailed
from archiver.crawl.session import LOGIN
from archiver.web import urls
from archiver.web.http import decode_body
from archiver.web.logins import find_login_form

if TYPE_CHECKING:
    from archiver.crawl.http import FetchResult
    from archiver.crawl.visit import SiteVisit

MAX_LOGIN_REDIRECTS = 5  # redirects after the form is posted (followed on the site only)


async def log_in(visit: SiteVisit) -> str:
    """Log ``visit`` in as its sheet says; "" once the session is open, else why it cannot be
    (the visit then pauses the site)."""
    session = visit.session
    login, credential = session.login, session.credential
    if login is None:
        return ""
    if credential is None:
        return f"login: the credentials file has no table {login.credentials!r}"
    labels = {LOGIN: session.begin(time.time())}
    if login.method != "form":
        session.open()
        return ""
    page = session.login_url
    if page is None:
        return f"login: login_url {login.login_url!r} is not a URL of the site"
    if (refusal := _refused(visit, page)) is not None:
        return refusal
    if visit.crawl.capture == "browser" and visit.ctx.browsers is not None:
        return await _log_in_browser(visit, page, labels)
    answer = await visit.fetch(page, [], conditional=False, labels=labels)
    if answer.status != 200:
        return f"login: {page} answered {answer.status or answer.error}"
    form = find_login_form(_html(visit, answer), page, login.username_field,
                           login.password_field)
    if form is None:
        return (f"login: no form with the fields {login.username_field!r} and "
                f"{login.password_field!r} on {page}")
    if form.method != "POST":
        return f"login: the form on {page} sends with {form.method}: its URL would hold the password"
    if not session.own(form.action):
        return f"login: the form on {page} sends to another site ({form.action})"
    if (refusal := _refused(visit, form.action)) is not None:
        return refusal
    answer = await visit.fetch(
        form.action, [], conditional=False, method="POST",
        body=form.body(credential.username, credential.password, dict(login.fields)),
        headers=[("Content-Type", "application/x-www-form-urlencoded"), ("Referer", page)],
        labels=labels)
    for _ in range(MAX_LOGIN_REDIRECTS):
        location = answer.header("location")
        if answer.status is None or not 300 <= answer.status < 400 or not location:
            break
        target = urls.normalize(location, answer.url)
        if target is None or not session.own(target) or _refused(visit, target) is not None:
            break
        answer = await visit.fetch(target, [], conditional=False, labels=labels)
    if answer.status is None or login.login_success not in _html(visit, answer).decode(
            "utf-8", "replace"):
        return (f"login failed: the page after it ({answer.url}, "
                f"{answer.status or answer.error}) did not contain {login.login_success!r}")
    session.open()
    return ""


async def _log_in_browser(visit: SiteVisit, page: str, labels: dict[str, str]) -> str:
    """The scripted login of a site captured in the browser: the login page rendered, its form
    filled in and submitted in the tab (its scripts run: a form they build, a token they
    compute), every request answered by the visit."""
    session = visit.session
    login, credential = session.login, session.credential
    assert login is not None and credential is not None
    required = (login.username_field, login.password_field)
    fields = {**dict(login.fields), login.username_field: credential.username,
              login.password_field: credential.password}
    try:
        rendering = await visit.renderer.log_in(page, FormFill(fields, required), labels)
    except FormMissing as e:
        return f"login: {e}"
    except RenderFailed as e:
        return f"login: the browser could not log in: {e}"
    if visit.renderer.leaked:
        return f"login: the form on {page} sends with GET: its URL would hold the password"
    if login.login_success not in rendering.text:
        return (f"login failed: the page after it ({rendering.url}) did not contain "
                f"{login.login_success!r}")
    session.open()
    return ""


def _refused(visit: SiteVisit, url: str) -> str | None:
    """Why robots.txt forbids fetching the login's ``url``, or None."""
    origin, path = urls.split_origin(url)
    rules = visit.rules.get(origin)
    if rules is not None and not rules.allowed(path):
        return f"login: robots.txt disallows {url}"
    return None


def _html(visit: SiteVisit, answer: FetchResult) -> bytes:
    """The answer's body, its content codings undone (within crawl.max_decoded_size)."""
    return decode_body(answer.body, answer.header("content-encoding"),
                       visit.crawl.max_decoded_size)
