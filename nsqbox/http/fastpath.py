"""The HTTP fast path: a cache in front of h11, which stays the only parser and encoder.

Under load (hundreds of keep-alive ``/pub`` clients) h11 was half of the
server's CPU: it validates every request head twice and every response head
twice, and runs its state machine for five events per request. But a client
publishing again sends the head it sent before, and nsqd answers the same
``OK``. So :class:`~nsqbox.http.protocol.ServerConnection` remembers what h11
made of both, and skips h11 when they come again:

* :class:`PlainHead` is a request head h11 parsed on this connection, kept when
  the request was *plain*: HTTP/1.1, not ``HEAD`` or ``CONNECT`` (their answers
  are framed apart), no ``Transfer-Encoding``, ``Upgrade`` or ``Expect:
  100-continue``, lines ending in CRLF, at most :data:`MAX_REMEMBERED_HEAD`
  bytes, and h11 kept the connection alive once it was answered. A request
  whose head is the same bytes (its ``Content-Length`` digits aside) is the same
  parse: only its body is new.
* :func:`encode_response` is what h11 writes for an answer to a plain request:
  that depends on the answer alone, so h11 writes it once (on a connection of
  its own) and the head is remembered (:func:`functools.lru_cache`, bounded).

The only grammar here is ours and small: a ``Content-Length`` line
(:data:`_CONTENT_LENGTH_LINE`), found only to swap its digits, in a head h11
accepted. Everything else is h11's answer to the first request; the tests
compare whole conversations with and without the cache.
"""

from __future__ import annotations

import functools
import re
from typing import Final

import h11
import msgspec

# One Content-Length line of a head h11 accepted: CRLF, the name (any case), the
# value's digits with optional blanks around them, CRLF. Only a head with exactly
# one such line and one Content-Length header takes other digits; h11 reads at
# most 20 digits, the cache 18.
_CONTENT_LENGTH_LINE: Final = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]{1,18})[ \t]*\r\n", re.I)
_DIGITS: Final = re.compile(rb"[0-9]{1,18}")
#: Methods whose answer h11 frames apart (no body; a tunnel): never cached.
_OWN_FRAMING: Final = frozenset({b"HEAD", b"CONNECT"})
#: Request headers that change h11's framing or state: never cached.
_STATEFUL: Final = frozenset({b"transfer-encoding", b"upgrade", b"expect"})
#: The longest head remembered (a connection keeps one): longer ones are rare, h11 takes them.
MAX_REMEMBERED_HEAD: Final = 8192


class FastRequest(msgspec.Struct, frozen=True):
    """A complete request as h11 reports it: ``headers`` have lower-case names."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    content_length: int
    #: How many bytes of the buffer the request took.
    size: int


class PlainHead(msgspec.Struct, frozen=True):
    """A plain request head h11 parsed, for the next request with the same bytes.

    ``raw`` is the head's bytes; ``prefix`` and ``suffix`` the bytes before and
    after its ``Content-Length`` digits (``suffix`` is empty, and ``prefix`` the
    whole head, when the digits cannot change: then ``content_length`` is the head's).
    """

    raw: bytes
    prefix: bytes
    suffix: bytes
    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    content_length: int
    #: Where the Content-Length value is in ``headers`` (-1: nowhere, or fixed).
    length_at: int

    @classmethod
    def of(cls, event: h11.Request, raw: bytes) -> PlainHead | None:
        """The head of ``event``, which h11 parsed from the start of ``raw``; None
        unless the request is plain (see the module doc; keep-alive is the caller's
        to check, once it has answered)."""
        end = raw.find(b"\r\n\r\n", 0, MAX_REMEMBERED_HEAD) + 4
        if end < 4 or event.http_version != b"1.1" or event.method in _OWN_FRAMING:
            return None
        head = raw[:end]
        # With no bare LF, h11's blank line (LF, optional CR, LF) is this first CRLF CRLF.
        if head.count(b"\n") != head.count(b"\r\n"):
            return None
        headers = tuple((bytes(name), bytes(value)) for name, value in event.headers)
        lengths = [i for i, (name, _) in enumerate(headers) if name == b"content-length"]
        if any(name in _STATEFUL for name, _ in headers) or len(lengths) > 1:
            return None
        length = int(headers[lengths[0]][1]) if lengths else 0
        lines = list(_CONTENT_LENGTH_LINE.finditer(head))
        if len(lengths) == 1 and len(lines) == 1:
            digits = lines[0].span(1)
            prefix, suffix, at = head[: digits[0]], head[digits[1] :], lengths[0]
        else:
            prefix, suffix, at = head, b"", -1
        target = bytes(event.target)
        return cls(head, prefix, suffix, event.method, target, headers, length, at)

    def match(self, buf: bytes) -> tuple[int, int, tuple[tuple[bytes, bytes], ...]] | None:
        """Where the complete request at the start of ``buf`` with this head has its body
        (start, end) and its headers; None when there is no such request."""
        if buf.startswith(self.raw):  # the same head again
            start, length, headers = len(self.raw), self.content_length, self.headers
        elif self.length_at < 0 or not buf.startswith(self.prefix):
            return None
        else:
            digits = _DIGITS.match(buf, len(self.prefix))
            if digits is None or not buf.startswith(self.suffix, digits.end()):
                return None
            start = digits.end() + len(self.suffix)
            length, headers = int(digits[0]), self.headers
            if length != self.content_length:  # the same header, another value
                at = self.length_at
                headers = (*headers[:at], (b"content-length", digits[0]), *headers[at + 1 :])
        end = start + length
        return None if len(buf) < end else (start, end, headers)


def parse_request(buf: bytes) -> FastRequest | None:
    """What the cache takes from ``buf``'s first request once h11 has parsed it: h11's
    parse of a complete plain request kept alive, else None. (The server reads
    h11's parse on its own connection; this is the same decision on a fresh one.)"""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(buf)
    try:
        event = conn.next_event()
        if not isinstance(event, h11.Request) or conn.client_is_waiting_for_100_continue:
            return None
        head = PlainHead.of(event, buf)
        while isinstance(data := conn.next_event(), h11.Data):
            pass
        if head is None or not isinstance(data, h11.EndOfMessage):
            return None
        conn.send(h11.Response(status_code=200, headers=[(b"Content-Length", b"0")]))
        conn.send(h11.EndOfMessage())
    except h11.ProtocolError:
        return None
    if (conn.our_state, conn.their_state) != (h11.DONE, h11.DONE):
        return None
    found = head.match(buf)
    if found is None:  # pragma: no cover - h11 read this request from buf
        return None
    start, end, headers = found
    return FastRequest(head.method, head.target, headers, buf[start:end], end - start, end)


def encode_response(
    status: int, reason: bytes, headers: tuple[tuple[str, str], ...], body: bytes, tail: bytes
) -> bytes | None:
    """The bytes h11 writes for this answer to a plain request, or None.

    ``tail`` is the header lines the server adds to every answer (NSQ's content
    type), ending in CRLF; ``Content-Length`` follows them, as in
    :meth:`nsqbox.http.protocol.ServerConnection._encode`. None when h11 refuses
    the answer or would close the connection after it (then the server has h11
    encode it on the connection, which fails or closes as h11 decides).
    """
    head = _answer_head(status, reason, headers, tail, len(body))
    return None if head is None else head + body


@functools.lru_cache(maxsize=256)
def _answer_head(
    status: int, reason: bytes, headers: tuple[tuple[str, str], ...], tail: bytes, length: int
) -> bytes | None:
    """:func:`encode_response`'s head, by h11 on a connection of its own (remembered:
    every field is in the key, the body only by its length, which h11 writes after
    the head unchanged)."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    conn.next_event()
    conn.next_event()
    fields = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    for line in tail.split(b"\r\n"):
        if line:
            name, _, value = line.partition(b": ")
            fields.append((name, value))
    fields.append((b"Content-Length", b"%d" % length))
    try:
        head = conn.send(h11.Response(status_code=status, headers=fields, reason=reason))
        if length:
            conn.send(h11.Data(data=bytes(length)))
        conn.send(h11.EndOfMessage())
    except (h11.ProtocolError, UnicodeError):
        return None
    if (conn.our_state, conn.their_state) != (h11.DONE, h11.DONE):
        return None
    return head


__all__ = ["MAX_REMEMBERED_HEAD", "FastRequest", "PlainHead", "encode_response", "parse_request"]
