"""The values the store's interfaces speak in, whichever backend holds them (as httpcore's
``_models.py``): a catalog entry (``Capture``), the DNS history's rows and answers, the full-text
index's keys and hits, and the errors both backends raise. No backend is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

# A label's field in CDXJ and /cdx: "label." and its name.
LABEL_FIELD = "label."
# The mime cdxj-indexer gives a revisit (pywb tells revisits by it).
_REVISIT_MIME = "warc/revisit"
# A page's text as the index keys it: (URL, payload digest).
DocumentKey = tuple[str, str]
# Words around the matches in a snippet.
SNIPPET_WORDS = 24
# The date a search without one is made at: every capture is at or before it.
LATEST = "99999999999999"
# The labels of a capture that is not the site's content (docs/gatekeepers.md): a gatekeeper's
# answer (challenge, rate limit, block page), a login's exchanges, and what was captured after a
# session was lost. Replay never serves such a capture as a page or embed, and a revisit does not
# compare with it.
NOT_CONTENT = ("gatekeeper", "login", "session-lost")
# How each stands in a capture's labels text (labels_text: compact JSON, and a label's name has no
# quote): a key, never part of a value, whose quotes are escaped. The catalogs count by the same.
NOT_CONTENT_KEYS = tuple(f'"{name}":' for name in NOT_CONTENT)
# The kinds of DNS history row (DnsRow.type).
CANONICAL, ADDRESS, ALIAS = "canonical", "address", "alias"


@dataclass(frozen=True, slots=True)
class Capture:
    """One catalog entry: where one response (or revisit) record of a URL lies in the WARC files.

    ``mime`` is the media type without parameters, ``"-"`` when the response had no Content-Type,
    and ``"warc/revisit"`` for a revisit record, all as cdxj-indexer gives it (pywb tells revisits
    by that mime). ``digest`` is the WARC-Payload-Digest as written (``sha1:BASE32``).
    ``rectype`` is "response" or "revisit"; the catalog stores whether it is a revisit.
    ``labels`` are the plugins' labels of the capture (archiver.plugins) as stored: a JSON
    object's text with sorted names (``labels_text``), ``""`` for none; ``label_map`` reads them.
    """

    urlkey: str
    timestamp: str
    url: str
    status: int | None
    mime: str
    digest: str
    redirect: str | None
    filename: str
    offset: int
    length: int
    rectype: str = "response"
    labels: str = ""

    @property
    def label_map(self) -> dict[str, str]:
        """The labels as a dict (empty when none)."""
        return json.loads(self.labels) if self.labels else {}

    @property
    def is_content(self) -> bool:
        """Whether this capture is the site's content: it has none of the NOT_CONTENT labels."""
        return not self.labels or not any(key in self.labels for key in NOT_CONTENT_KEYS)

    def to_json(self) -> dict[str, object]:
        """For our own JSON output: CDXJ field names with native types (numbers as numbers).

        ``status`` is always there (null when unknown), ``redirect`` only for a redirect, and
        ``rectype`` always. Use to_cdxj for files that pywb and other CDXJ tools read.
        """
        out: dict[str, object] = {
            "urlkey": self.urlkey,
            "timestamp": self.timestamp,
            "url": self.url,
            "mime": self.mime,
            "status": self.status,
            "digest": self.digest,
            "length": self.length,
            "offset": self.offset,
            "filename": self.filename,
        }
        if self.redirect is not None:
            out["redirect"] = self.redirect
        out["rectype"] = self.rectype
        if self.labels:
            out["labels"] = self.label_map
        return out

    def to_cdxj(self) -> str:
        """``<urlkey> <timestamp> <json>`` as cdxj-indexer writes it: its field order, its string
        values for status/length/offset, no mime when unknown, no status when None.

        Additions: ``redirect`` (the CDX 11 field of that name) after the others when set, then
        one ``label.<name>`` field per label. pywb keeps unknown CDXJ fields and ignores them,
        and from_cdxj reads them back.
        """
        return f"{self.urlkey} {self.timestamp} {json.dumps(self.cdxj_fields())}"

    def cdxj_fields(self) -> dict[str, str]:
        """The JSON part of ``to_cdxj``, in its order: string values, absent when unknown."""
        fields: dict[str, str] = {"url": self.url}
        mime = _REVISIT_MIME if self.rectype == "revisit" else self.mime
        if mime != "-":
            fields["mime"] = mime
        if self.status is not None:
            fields["status"] = str(self.status)
        fields["digest"] = self.digest
        fields["length"] = str(self.length)
        fields["offset"] = str(self.offset)
        fields["filename"] = self.filename
        if self.redirect is not None:
            fields["redirect"] = self.redirect
        for name, value in self.label_map.items():
            fields[LABEL_FIELD + name] = value
        return fields

    @classmethod
    def from_cdxj(cls, line: str) -> Capture:
        """Parse one CDXJ line (ours or cdxj-indexer's); ValueError if it is not one."""
        try:
            urlkey, timestamp, text = line.rstrip("\r\n").split(" ", 2)
            fields = json.loads(text)
            status = fields.get("status", "")
            mime = fields.get("mime", "-")
            return cls(
                urlkey=urlkey,
                timestamp=timestamp,
                url=fields["url"],
                status=int(status) if status.isdigit() else None,
                mime=mime,
                digest=fields["digest"],
                redirect=fields.get("redirect"),
                filename=fields["filename"],
                offset=int(fields["offset"]),
                length=int(fields["length"]),
                rectype="revisit" if mime == _REVISIT_MIME else "response",
                labels=labels_text({name.removeprefix(LABEL_FIELD): value for name, value
                                    in fields.items() if name.startswith(LABEL_FIELD)}),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a CDXJ capture line ({exc!r}): {line[:200]!r}") from None


def content_only(captures: Iterable[Capture], passed: int | None = None) -> Iterator[Capture]:
    """The captures of ``captures`` that are content (``Capture.is_content``), in their order;
    with ``passed``, none more once more than that many that are not have been passed (a walk
    over a URL's captures then reads a bounded number of rows)."""
    skipped = 0
    for capture in captures:
        if capture.is_content:
            yield capture
            continue
        skipped += 1
        if passed is not None and skipped > passed:
            return


def labels_text(labels: Mapping[str, str]) -> str:
    """How a capture stores ``labels``: compact JSON, names sorted; ``""`` for none."""
    if not labels:
        return ""
    return json.dumps(dict(labels), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class HostTally:
    """One host of the catalog (``CatalogStore.hosts``): ``host``, the host part of its keys as
    ``shard_host`` gives it; ``url``, the URL of its first capture in key order; ``captures``,
    its captures counted no further than asked; ``latest``, the latest timestamp among those
    counted (the host's latest when ``captures`` is below the bound)."""

    host: str
    url: str
    captures: int
    latest: str


class CatalogError(Exception):
    """The catalog on disk cannot be used as asked (missing, other shard count, read-only)."""


@dataclass(frozen=True, slots=True)
class DnsRow:
    row: int
    id: int
    value: str
    type: str  # "canonical", "address" or "alias"
    entered: float
    superseded: float | None
    source: str  # "dns", "hosts" (the hosts-file override) or "inline" (resolved by the crawler)


@dataclass(frozen=True, slots=True)
class Observation:
    name: str  # the name asked for (lower-case, no trailing dot)
    canonical: str  # the end of its CNAME chain (== name when there is no CNAME)
    chain: tuple[str, ...]  # CNAME names from name to canonical, excluding canonical (empty when none)
    addresses: tuple[str, ...]  # A then AAAA addresses as answered (IPv6 compressed form)
    ttl: float  # smallest TTL seen in the answers, seconds (the caller turns it into next_check)
    source: str = "dns"


@dataclass(frozen=True, slots=True)
class Resolved:
    name: str
    id: int
    canonical: str
    addresses: tuple[str, ...]  # addresses[0] is the `address` row, then the alias addresses
    aliases: tuple[str, ...]  # alias names, in entry order
    rows: tuple[DnsRow, ...]  # rows of that id valid at the asked time, by entered then row


@dataclass(frozen=True, slots=True)
class NameState:
    name: str
    checked: float | None
    next_check: float
    outcome: str  # "ok", "no-address" (an answer without A/AAAA), "nxdomain", "servfail", "timeout"...
    failures: int  # consecutive failed checks (reset by any answer)


class SearchTimeout(Exception):
    """A search ran past its deadline (a query whose words are on very many pages)."""


@dataclass(frozen=True)
class IndexedCapture:
    """One catalog entry as the index records it: its record (WARC file and offset), its
    14-digit timestamp, and the document holding its text (None: it has none)."""

    filename: str
    offset: int
    timestamp: str
    document: DocumentKey | None


@dataclass(frozen=True)
class SearchHit:
    """One result: a URL, the title and a snippet of its best-matching capture (matches between
    ``web.textquery.MARK_START`` and ``MARK_END``), and the 14-digit timestamps of all its
    matching captures, oldest first."""

    url: str
    title: str
    snippet: str
    timestamps: list[str]
