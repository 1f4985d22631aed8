"""Requests, responses and errors for nsqbox's HTTP services, with NSQ's conventions.

NSQ's HTTP APIs (nsqd, nsqlookupd, nsqadmin) share a few rules, taken from
internal/http_api/api_response.go in NSQ v1.3.0:

* responses of NSQ's ``V1`` handlers (JSON and most text answers, and the
  404, 405 and 500 errors) carry ``X-NSQ-Content-Type: nsq; version=1.0``
  (go-nsq and friends parse a bare JSON body only when it is present);
  ``PlainText`` handlers (``/ping``), ``OPTIONS`` answers and redirects do not;
* a handler's result becomes the body: a ``str`` or ``bytes`` as is, ``None`` as
  an empty body, anything else as JSON with ``Content-Type: application/json;
  charset=utf-8``;
* errors are JSON ``{"message": "CODE"}`` with the error's status.

Nothing here touches a socket; :mod:`nsqbox.http.protocol` turns these values
into bytes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Final
from urllib.parse import unquote_to_bytes

import msgspec

#: The header NSQ puts on every HTTP response, and its value.
NSQ_CONTENT_TYPE_HEADER: Final = "X-NSQ-Content-Type"
NSQ_CONTENT_TYPE: Final = "nsq; version=1.0"
JSON_CONTENT_TYPE: Final = "application/json; charset=utf-8"
# What Go's net/http sniffs for a non-empty plain-text body.
TEXT_CONTENT_TYPE: Final = "text/plain; charset=utf-8"

_json_encoder = msgspec.json.Encoder()
# A '%' not followed by two hex digits, which Go's url.ParseQuery refuses.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class HTTPError(Exception):
    """An HTTP error answered as NSQ does: ``{"message": text}`` with ``status``.

    Handlers raise it where nsqd's Go returns ``http_api.Err{code, text}``.
    ``body`` overrides the JSON body for the rare error that carries more than a
    message (nsqd's ``TLS_REQUIRED`` also names the HTTPS port).
    """

    def __init__(self, status: int, message: str, *, body: bytes | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body

    def __repr__(self) -> str:
        return f"HTTPError({self.status}, {self.message!r})"


class Response(msgspec.Struct, frozen=True):
    """A complete HTTP response. The server adds framing, and NSQ's header if ``nsq_header``.

    With ``stream``, the body is not ``body`` but what ``stream`` yields, written as it comes
    (chunked; an HTTP/1.0 client reads until the server closes): the server ends it when the
    iterator ends or the peer goes away (see :mod:`nsqbox.http.server`).
    """

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    #: Whether ``X-NSQ-Content-Type`` goes out (see the module doc).
    nsq_header: bool = True
    #: A streamed body's pieces (nsqbox's own routes only: NSQ's answers are whole).
    stream: AsyncIterator[bytes] | None = None

    @classmethod
    def text(cls, body: str | bytes, status: int = 200) -> Response:
        """A plain-text body (``OK``, ``/stats`` text format, ``/ping``)."""
        data = body.encode() if isinstance(body, str) else body
        headers = (("Content-Type", TEXT_CONTENT_TYPE),) if data else ()
        return cls(status, data, headers)

    @classmethod
    def json(cls, value: object, status: int = 200) -> Response:
        """``value`` encoded as JSON by msgspec (Structs, dicts, lists, scalars)."""
        return cls(status, _json_encoder.encode(value), (("Content-Type", JSON_CONTENT_TYPE),))

    @classmethod
    def error(cls, error: HTTPError) -> Response:
        """NSQ's JSON error body for ``error``."""
        if error.body is not None:
            return cls(error.status, error.body, (("Content-Type", JSON_CONTENT_TYPE),))
        return cls.json({"message": error.message}, error.status)

    @classmethod
    def v1(cls, data: object) -> Response:
        """A handler's result as NSQ's ``RespondV1`` sends it with status 200.

        ``str``/``bytes`` go out as they are, ``None`` as an empty body, a
        :class:`Response` unchanged, and anything else as JSON.
        """
        if isinstance(data, Response):
            return data
        if data is None:
            return cls()
        if isinstance(data, str | bytes):
            return cls.text(data)
        return cls.json(data)


def parse_query(raw: str) -> dict[str, list[str]]:
    """Parse a query string as Go's ``url.ParseQuery`` does, strictly.

    Pairs are split on ``&``; ``+`` is a space; a key without ``=`` has the
    value ``""``; empty pairs are skipped. Raises ValueError where Go returns an
    error (a ``;`` in a pair, a bad ``%`` escape), so callers can answer
    ``INVALID_REQUEST`` as nsqd does.
    """
    if "&" not in raw and ";" not in raw and "%" not in raw and "+" not in raw:
        # One pair with nothing to unescape (``topic=name``): the loop's result.
        if not raw:
            return {}
        key, _, value = raw.partition("=")
        return {key: [value]}
    values: dict[str, list[str]] = {}
    for pair in raw.split("&"):
        if not pair:
            continue
        if ";" in pair:
            raise ValueError("invalid semicolon separator in query")
        key, _, value = pair.partition("=")
        values.setdefault(_unescape(key), []).append(_unescape(value))
    return values


def _unescape(text: str) -> str:
    if "%" not in text:
        # Nothing to unescape, nothing Go refuses: the text round-trips through UTF-8.
        return text.replace("+", " ") if "+" in text else text
    if _BAD_ESCAPE.search(text):
        raise ValueError(f"invalid URL escape in {text!r}")
    # Go strings hold any bytes; undecodable ones cannot be valid NSQ names,
    # so replacing them loses nothing a handler could accept.
    return unquote_to_bytes(text.replace("+", " ")).decode("utf-8", "replace")


class Request(msgspec.Struct, frozen=True):
    """A complete HTTP request: head, decoded path, raw query, body and path params.

    The query is parsed on demand by :meth:`args`, which answers a malformed one
    with ``400 INVALID_REQUEST`` as nsqd does; routes that take no parameters
    never fail on it. A frozen :class:`msgspec.Struct` rather than a dataclass:
    the server makes one per request, and a Struct is made in a fifth of the
    time (``msgspec.structs.replace`` copies one with changes).
    """

    method: str
    target: str
    path: str
    raw_query: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes = b""
    params: dict[str, str] = msgspec.field(default_factory=dict)
    remote_address: str = ""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower().encode()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value.decode("latin-1")
        return None

    def args(self) -> dict[str, list[str]]:
        """The parsed query; ``HTTPError(400, "INVALID_REQUEST")`` if malformed."""
        try:
            return parse_query(self.raw_query)
        except ValueError:
            raise HTTPError(400, "INVALID_REQUEST") from None

    def arg(self, name: str) -> str | None:
        """The first value of query parameter ``name``, or None when absent (Go's ``Get``)."""
        values = self.args().get(name)
        return values[0] if values else None

    def require(self, name: str, missing: str) -> str:
        """The first value of ``name``; ``HTTPError(400, missing)`` when absent.

        ``missing`` is NSQ's code for it, e.g. ``MISSING_ARG_TOPIC``.
        """
        value = self.arg(name)
        if value is None:
            raise HTTPError(400, missing)
        return value
