"""A fast path past h11 for the plainest HTTP/1.1 requests and answers, with h11's results.

Under load (hundreds of keep-alive ``/pub`` clients) h11 was half of the
server's CPU: it validates every request head twice and every response head
twice, and runs its state machine for five events per request. Nearly every
request is a complete, plain HTTP/1.1 request in one read, and nearly every
answer a small body with fixed headers; for those this module produces exactly
what h11 would (the same request head fields, the same response bytes) in one
pass, and declines (returns None) for everything else, which then goes through
h11 as before. It uses h11's own grammar (``h11._abnf``, restated here), and
tests compare the two on generated requests.

Declined, so h11 decides: HTTP/1.0, any method but GET, POST, PUT, DELETE,
OPTIONS and PATCH (HEAD's answer has no body; CONNECT can switch protocols),
an incomplete request, ``Transfer-Encoding``, ``Expect``, ``Upgrade``, a
``Connection`` header other than ``keep-alive``, a ``Content-Length`` that is
not one plain number, a missing or repeated ``Host``, obsolete line folding,
bare ``\\n`` line ends, and answers with other statuses or headers than
:func:`encode_response` knows to be valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

#: The methods answered here; HEAD and CONNECT have framing rules of their own.
_METHODS: Final = frozenset({b"GET", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH"})
# h11._abnf: token, vchar, and field-value built from vchar_or_obs_text.
_REQUEST_LINE: Final = re.compile(rb"([A-Z]+) ([\x21-\x7e]+) HTTP/1\.1")
_HEADER_LINE: Final = re.compile(
    rb"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*"
)
_DIGITS: Final = re.compile(rb"[0-9]{1,18}")
# Headers whose meaning changes h11's framing or state: h11 handles requests with them.
_SLOW_HEADERS: Final = frozenset({b"transfer-encoding", b"expect", b"upgrade"})
#: The longest request head tried here (longer ones are rare: h11 takes them).
MAX_FAST_HEAD: Final = 8192
# Answer headers known to pass h11's checks and change nothing in its framing;
# their values must be plain printable ASCII words separated by single spaces.
_FAST_RESPONSE_HEADERS: Final = frozenset({"Content-Type", "Allow", "Location"})
_PLAIN_VALUE: Final = re.compile(r"[\x21-\x7e]+(?: [\x21-\x7e]+)*")


@dataclass(frozen=True, slots=True)
class FastRequest:
    """A complete request as h11 would report it: ``headers`` have lower-case names."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    content_length: int
    #: How many bytes of the buffer the request took.
    size: int


def parse_request(buf: bytes) -> FastRequest | None:
    """The complete plain request at the start of ``buf``, or None (see the module doc)."""
    end = buf.find(b"\r\n\r\n", 0, MAX_FAST_HEAD)
    if end < 0:
        return None
    lines = buf[:end].split(b"\r\n")
    first = _REQUEST_LINE.fullmatch(lines[0])
    if first is None or first[1] not in _METHODS:
        return None
    headers = []
    hosts = 0
    length: bytes | None = None
    for line in lines[1:]:
        match = _HEADER_LINE.fullmatch(line)
        if match is None:
            return None
        name = match[1].lower()
        value = match[2]
        if name == b"host":
            hosts += 1
        elif name == b"content-length":
            if length is not None or not _DIGITS.fullmatch(value):
                return None
            length = value
        elif name == b"connection":
            if value.lower() != b"keep-alive":
                return None
        elif name in _SLOW_HEADERS:
            return None
        headers.append((name, value))
    if hosts != 1:
        return None
    content_length = int(length) if length is not None else 0
    start = end + 4
    size = start + content_length
    if len(buf) < size:
        return None
    return FastRequest(
        method=first[1],
        target=first[2],
        headers=tuple(headers),
        body=buf[start:size],
        content_length=content_length,
        size=size,
    )


def encode_response(
    status: int, reason: bytes, headers: tuple[tuple[str, str], ...], body: bytes, tail: bytes
) -> bytes | None:
    """The bytes h11 writes for this answer to a keep-alive request, or None.

    ``tail`` is the header lines the server adds to every answer (NSQ's
    content type), ending in CRLF; ``Content-Length`` follows them, as in
    :meth:`nsqbox.http.protocol.ServerConnection._encode`.
    """
    # 1xx are not final; 204 and 304 carry no body, whatever Content-Length says.
    if status < 200 or status > 599 or status in (204, 304):
        return None
    parts = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
    for name, value in headers:
        if name not in _FAST_RESPONSE_HEADERS or not _PLAIN_VALUE.fullmatch(value):
            return None
        parts.append(f"{name}: {value}\r\n".encode("ascii"))
    parts.append(tail)
    parts.append(b"Content-Length: %d\r\n\r\n" % len(body))
    parts.append(body)
    return b"".join(parts)


__all__ = ["MAX_FAST_HEAD", "FastRequest", "encode_response", "parse_request"]
