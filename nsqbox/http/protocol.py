"""One HTTP/1.1 server connection on h11, sans I/O: bytes in, events out.

:class:`ServerConnection` never touches a socket, a clock or an event loop
(hypercorn's ``protocol/`` versus ``trio/`` split). The server's pump feeds it
the bytes it reads and acts on what :meth:`ServerConnection.next_event` says:

* :data:`NEED_DATA` -- read more bytes and call ``receive_data`` (``b""`` at EOF);
* :class:`SendBytes` -- write them (a ``100 Continue``, or an early error);
* :class:`Dispatch` -- a complete request: await ``dispatch.endpoint.respond``,
  then write ``connection.respond(response)``;
* :class:`CloseConnection` -- stop; with ``drain`` set, first half-close and
  read what the client is still sending, so it can read our answer.

Requests are answered one at a time, in order, so pipelining works and no send
lock is needed. A body longer than the endpoint allows is refused before it is
read (from ``Content-Length``) or as soon as it grows too long, with the
endpoint's ``too_large`` response. Malformed HTTP gets ``400 Bad Request`` (or
h11's more precise status, e.g. 431) and the connection is closed.

h11 is the authority: it parses every request head the first time and encodes
every answer the first time. :mod:`nsqbox.http.fastpath` is a cache in front of
it: while h11 is between requests with nothing buffered, received bytes wait in
this object, and a complete request whose head is byte for byte (its
``Content-Length`` digits aside) the last plain head h11 parsed here is
dispatched without h11 (a client publishing again); its answer is the bytes h11
wrote for an equal answer. Anything else goes to h11, which then has every
byte from the start of that request, as if there were no cache.
"""

from __future__ import annotations

import http
from typing import Final, TypeAlias
from urllib.parse import unquote, urlsplit

import h11
import msgspec

from nsqbox.http.fastpath import PlainHead, encode_response
from nsqbox.http.messages import (
    NSQ_CONTENT_TYPE,
    NSQ_CONTENT_TYPE_HEADER,
    Request,
    Response,
)
from nsqbox.http.router import App, Endpoint

#: Largest request head accepted (h11 answers 431 beyond it).
MAX_HEADER_SIZE: Final = 64 * 1024


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


#: :meth:`ServerConnection.next_event` needs more bytes from the peer.
NEED_DATA: Final = _NeedData()


# The events are frozen msgspec Structs: one Dispatch per request, made in a
# quarter of a frozen dataclass's time.
class SendBytes(msgspec.Struct, frozen=True):
    """Bytes to write to the peer before asking for the next event."""

    data: bytes


class Dispatch(msgspec.Struct, frozen=True):
    """A complete request, and the endpoint that answers it."""

    request: Request
    endpoint: Endpoint


class CloseConnection(msgspec.Struct, frozen=True):
    """The connection is finished. ``drain``: the peer may still be sending a body."""

    drain: bool


ConnectionEvent: TypeAlias = _NeedData | SendBytes | Dispatch | CloseConnection

_REASONS: Final = {s.value: s.phrase.encode() for s in http.HTTPStatus}
_NSQ_HEADER: Final = (NSQ_CONTENT_TYPE_HEADER.encode(), NSQ_CONTENT_TYPE.encode())
_NSQ_HEADER_LINE: Final = b"%s: %s\r\n" % _NSQ_HEADER


class ServerConnection:
    """The server side of one HTTP/1.1 connection (see the module doc)."""

    def __init__(
        self,
        app: App,
        *,
        remote_address: str = "",
        max_header_size: int = MAX_HEADER_SIZE,
        fast_path: bool = True,
    ) -> None:
        """``fast_path=False`` sends every request through h11 (tests compare the two)."""
        self.app = app
        self.remote_address = remote_address
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_header_size)
        self._closing: CloseConnection | None = None
        # The request being received or answered.
        self._head: h11.Request | None = None
        self._path = ""
        self._query = ""
        self._endpoint: Endpoint | None = None
        self._body: list[bytes] = []
        self._body_size = 0
        self._awaiting_response = False
        # A streamed answer's head is sent; its body is not ended yet.
        self._streaming = False
        # The cache in front of h11: while h11 is idle with nothing buffered
        # (_idle), received bytes wait in _pending for the last plain head h11
        # parsed here (_plain). _fast_raw is the request the cache dispatched,
        # until it is answered.
        self._fast_path = fast_path
        self._idle = fast_path
        self._pending = b""
        self._plain: _Remembered | None = None
        self._fast_raw = b""
        # The last answer the cache sent, and its bytes (a handler's constant OK).
        self._answered: tuple[Response, bytes] | None = None
        # What h11 got from the start of its current request, until it parsed
        # the head (None: not followed); then that head, if it may be remembered
        # once h11 keeps the connection alive after the answer.
        self._fed: bytearray | None = None
        self._candidate: PlainHead | None = None

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the peer; ``b""`` means the peer closed its side."""
        if not self._idle:
            if self._fed is not None:
                self._fed += data
            self._h11.receive_data(data)
        elif data:
            self._pending += data
        else:
            self._to_h11()
            self._h11.receive_data(b"")

    def next_event(self) -> ConnectionEvent:
        """What the pump should do next (see the module doc)."""
        if self._closing is not None:
            return self._closing
        if self._awaiting_response or self._streaming:
            raise RuntimeError("call respond() (and end_stream()) for the dispatched request first")
        if self._idle:
            if not self._pending:
                return NEED_DATA
            dispatch = self._cached_dispatch()
            if dispatch is not None:
                return dispatch
            self._to_h11()
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                return self._fail(exc.error_status_hint, _go_error_detail(str(exc)))
            if event is h11.NEED_DATA:
                return NEED_DATA
            if isinstance(event, h11.Request):
                self._note(event)
                early = self._start(event)
                if early is not None:
                    return early
            elif isinstance(event, h11.Data):
                self._body_size += len(event.data)
                assert self._endpoint is not None
                if self._body_size > self._endpoint.max_body_size:
                    return self._refuse(self._endpoint.too_large)
                self._body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return self._dispatch()
            elif isinstance(event, h11.ConnectionClosed):
                self._closing = CloseConnection(drain=False)
                return self._closing
            else:  # pragma: no cover - PAUSED cannot happen: we answer before reading on
                raise RuntimeError(f"unexpected h11 event {event!r}")

    def respond(self, response: Response) -> bytes:
        """The bytes of ``response`` to the dispatched request; prepares for the next one."""
        if not self._awaiting_response:
            raise RuntimeError("no request is waiting for a response")
        self._awaiting_response = False
        raw, self._fast_raw = self._fast_raw, b""
        if raw:
            answered = self._answered
            if answered is not None and answered[0] is response:
                return answered[1]
            data = _fast_encode(response) if response.stream is None else None
            if data is not None:
                self._answered = (response, data)
                return data
            self._replay(raw)
        if response.stream is not None:
            self._streaming = True
            return self._encode_head(response, close=False, length=None)
        data = self._encode(response, close=False)
        self._next_cycle()
        return data

    def stream_data(self, data: bytes) -> bytes:
        """The bytes of one piece of a streamed body (a chunk; ``b""`` for an empty piece)."""
        if not self._streaming:
            raise RuntimeError("no streamed response is being sent")
        if not data or (self._head is not None and self._head.method == b"HEAD"):
            return b""  # h11 frames a HEAD answer but refuses its body
        return self._h11.send(h11.Data(data=data)) or b""

    def end_stream(self) -> bytes:
        """The bytes that end a streamed body; prepares for the next request."""
        if not self._streaming:
            raise RuntimeError("no streamed response is being sent")
        self._streaming = False
        data = self._h11.send(h11.EndOfMessage()) or b""
        self._next_cycle()
        return data

    def _next_cycle(self) -> None:
        """After an answer: ready h11 for the next request, or close."""
        candidate, self._candidate = self._candidate, None
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            if candidate is not None:  # plain, and h11 kept the connection alive
                self._plain = _Remembered.of(candidate)
            if self._fast_path:
                trailing, closed = self._h11.trailing_data
                if not trailing and not closed:
                    self._idle = True
                elif not closed:  # the start of the next request, already in h11
                    self._fed = bytearray(trailing)
        else:
            # HTTP/1.0 or "Connection: close": h11 has said close in our headers.
            self._closing = CloseConnection(drain=False)

    def _cached_dispatch(self) -> Dispatch | None:
        """The next request by the cache, or None when h11 must parse it."""
        plain = self._plain
        if plain is None:
            return None
        pending, head = self._pending, plain.head
        if pending.startswith(head.raw):  # the same head again: PlainHead.match, inline
            start, headers = len(head.raw), head.headers
            size = start + head.content_length
            if len(pending) < size:
                return None  # incomplete: h11 takes it
        else:
            found = head.match(pending)
            if found is None:
                return None  # another head, or an incomplete request
            start, size, headers = found
        endpoint = self.app.resolve(plain.method, plain.path)
        if size - start > endpoint.max_body_size:
            return None  # h11's path refuses it before reading the body
        # Kept for _replay; both slices are free when the buffer held just this request.
        self._fast_raw = pending[:size]
        self._pending = pending[size:]
        self._awaiting_response = True
        self._head = None  # as h11's path would have replaced the last request's head
        request = Request(
            plain.method,
            plain.target,
            plain.path,
            plain.query,
            headers,
            pending[start:size],
            endpoint.params,
            self.remote_address,
        )
        return Dispatch(request, endpoint)

    def _note(self, head: h11.Request) -> None:
        """h11 parsed ``head``: keep it as a candidate for the cache, if h11 had it
        from the start and it is plain."""
        fed, self._fed = self._fed, None
        self._candidate = None
        if fed is not None and not self._h11.client_is_waiting_for_100_continue:
            self._candidate = PlainHead.of(head, bytes(fed))

    def _to_h11(self) -> None:
        """Leave the fast path: h11 gets the bytes received so far."""
        self._idle = False
        self._fed = bytearray(self._pending)
        if self._pending:
            self._h11.receive_data(self._pending)
            self._pending = b""

    def _replay(self, raw: bytes) -> None:
        """Run a request the fast path took through h11, for an answer only h11 may encode.

        h11 is idle with nothing buffered (else the fast path would not have
        run), so it sees exactly this request, which it accepts as the fast
        path did.
        """
        self._fed = None
        self._h11.receive_data(raw)
        event = self._h11.next_event()
        while not isinstance(event, h11.EndOfMessage):
            if isinstance(event, h11.Request):
                self._head = event
            elif not isinstance(event, h11.Data):  # pragma: no cover - a fast-path bug
                raise RuntimeError(f"h11 disagrees with the fast path: {event!r}")
            event = self._h11.next_event()
        self._idle = False  # until the answer has been encoded by h11

    def _start(self, head: h11.Request) -> ConnectionEvent | None:
        self._head = head
        self._body = []
        self._body_size = 0
        self._path, self._query = _split_target(head.target.decode("latin-1"))
        if not head.http_version.startswith(b"1."):
            # Go's net/http serves HTTP/1.x only; h11 would take "HTTP/2.0" as 1.1.
            return self._fail(505, "unsupported protocol version")
        self._endpoint = endpoint = self.app.resolve(head.method.decode("ascii"), self._path)
        declared = _content_length(head)
        if declared is not None and declared > endpoint.max_body_size:
            return self._refuse(endpoint.too_large)
        if self._h11.client_is_waiting_for_100_continue:
            go_on = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            return SendBytes(self._h11.send(go_on) or b"")
        return None

    def _dispatch(self) -> Dispatch:
        head, endpoint = self._head, self._endpoint
        assert head is not None
        assert endpoint is not None
        request = Request(
            method=head.method.decode("ascii"),
            target=head.target.decode("latin-1"),
            path=self._path,
            raw_query=self._query,
            headers=tuple((bytes(k), bytes(v)) for k, v in head.headers),
            body=b"".join(self._body),
            params=endpoint.params,
            remote_address=self.remote_address,
        )
        self._body = []
        self._awaiting_response = True
        return Dispatch(request, endpoint)

    def _refuse(self, response: Response) -> ConnectionEvent:
        # Answer now, without the rest of the body; the connection cannot be
        # reused, so close it once the client has had a chance to read this.
        self._closing = CloseConnection(drain=True)
        return SendBytes(self._encode(response, close=True))

    def _fail(self, status: int, detail: str = "") -> ConnectionEvent:
        """Answer a request that cannot be served as Go's net/http does, and close.

        Go writes these few bytes itself, outside its response machinery: a
        status line and a body of ``"<status> <reason>[: <detail>]"``, with
        no Content-Length, Date or NSQ header, then closes.
        """
        self._closing = CloseConnection(drain=True)
        if self._h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return self._closing
        reason = _REASONS.get(status, b"Bad Request").decode()
        text = f"{status} {reason}: {detail}" if detail else f"{status} {reason}"
        # Go's words for a Transfer-Encoding it does not know (h11's only 501)
        content = "Unsupported transfer encoding" if status == 501 else text
        return SendBytes(
            f"HTTP/1.1 {text}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Connection: close\r\n\r\n{content}".encode("latin-1")
        )

    def _encode_head(self, response: Response, *, close: bool, length: int | None) -> bytes:
        """The status line and headers; without ``length``, h11 frames the body chunked
        (HTTP/1.1) or by closing the connection (HTTP/1.0)."""
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        if response.nsq_header:
            headers.append(_NSQ_HEADER)
        if length is not None:
            headers.append((b"Content-Length", str(length).encode()))
        if close:
            headers.append((b"Connection", b"close"))
        reason = _REASONS.get(response.status, b"")
        head = h11.Response(status_code=response.status, headers=headers, reason=reason)
        return self._h11.send(head) or b""

    def _encode(self, response: Response, *, close: bool) -> bytes:
        out = [self._encode_head(response, close=close, length=len(response.body))]
        # h11 frames a HEAD response with Content-Length but refuses its body.
        if response.body and not (self._head is not None and self._head.method == b"HEAD"):
            out.append(self._h11.send(h11.Data(data=response.body)))
        out.append(self._h11.send(h11.EndOfMessage()))
        return b"".join(chunk for chunk in out if chunk)


class _Remembered(msgspec.Struct, frozen=True):
    """The plain head the cache answers, with its request line decoded once."""

    head: PlainHead
    method: str
    target: str
    path: str
    query: str

    @classmethod
    def of(cls, head: PlainHead) -> _Remembered:
        """``head``, with its method, target, path and query as the server's Request has them."""
        target = head.target.decode("latin-1")
        path, query = _split_target(target)
        return cls(head, head.method.decode("ascii"), target, path, query)


def _fast_encode(response: Response) -> bytes | None:
    """What h11 writes for ``response`` to a plain request (None: h11 must encode it
    on this connection)."""
    tail = _NSQ_HEADER_LINE if response.nsq_header else b""
    reason = _REASONS.get(response.status, b"")
    return encode_response(response.status, reason, response.headers, response.body, tail)


def _split_target(target: str) -> tuple[str, str]:
    """The decoded path and the raw query of a request target."""
    if not target.startswith("/"):
        # absolute-form ("http://host/path?q"), which proxies send.
        parts = urlsplit(target)
        return unquote(parts.path or "/"), parts.query
    path, _, query = target.partition("?")
    return unquote(path), query


def _go_error_detail(h11_message: str) -> str:
    """Go's detail for a request h11 refused, where Go gives one (else "")."""
    # h11 says "Missing mandatory Host: header"; Go names only this case.
    if "Missing mandatory Host" in h11_message:
        return "missing required Host header"
    return ""


def _content_length(head: h11.Request) -> int | None:
    for name, value in head.headers:
        if name == b"content-length":
            return int(value)  # h11 has already validated it
    return None


__all__ = [
    "MAX_HEADER_SIZE",
    "NEED_DATA",
    "CloseConnection",
    "ConnectionEvent",
    "Dispatch",
    "SendBytes",
    "ServerConnection",
]
