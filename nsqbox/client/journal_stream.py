"""Following an nsqd's journal stream: ``GET /nsqbox/journal/stream`` read line by line (trio).

What ``nsqbox trace`` reads each node with (docs/journeys.md, "Following"): one plain HTTP/1.1
request on its own connection (h11 on a trio TCP stream), its body's lines decoded as JSON
objects as they arrive. Each line is at most :data:`MAX_LINE` bytes; a longer one, a body
that is not JSON lines, or a connection that breaks ends :func:`open_journal_stream`'s
iterator with :class:`~.journal.JournalError`; a stream the node closed or whose connection
broke once it had started, as when the node stops or restarts, with its subclass
:class:`JournalStreamLost` ("lost the stream to NODE: it closed"). An answer other than
``200`` raises the
error :func:`~.journal.status_error` gives for it: :class:`~.journal.JournalUnsupported` for
real nsqd ("not supported by this nsqd") or a journal turned off.

Leaving the ``async with`` closes the connection, which ends the stream at the nsqd.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlencode

import h11
import msgspec
import trio

from .. import __version__
from ..net.addresses import split_host_port
from ..net.unreachable import unreachable_reason
from ..wire.peer_json import PeerJSONError, decode_peer_json
from .journal import JournalError, status_error

__all__ = ["MAX_LINE", "JournalStream", "JournalStreamLost", "open_journal_stream"]

#: The longest line a stream may send (an event is a few hundred bytes).
MAX_LINE: Final = 1024 * 1024
#: The most of an error answer's body read.
_ERROR_BODY: Final = 64 * 1024
_RECEIVE: Final = 64 * 1024
_DECODER: Final = msgspec.json.Decoder(dict[str, Any])


class JournalStreamLost(JournalError):
    """A stream that had started ended before its end: the node closed the connection in the
    middle of the body, or the connection broke (the node stopped, crashed or restarted)."""


class JournalStream:
    """One open stream: iterate it for its documents (events and markers), in order."""

    def __init__(self, node: str, stream: trio.SocketStream, conn: h11.Connection) -> None:
        self.node = node
        self._stream = stream
        self._conn = conn
        self._buffer = b""
        self._lines: deque[bytes] = deque()
        #: The node answered 200: from now on a connection that ends loses the stream.
        self._started = False
        #: The node closed the connection (its end of file was read).
        self._closed = False

    async def _event(self) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                if self._started and self._closed:  # "incomplete chunked read": it stopped
                    raise JournalStreamLost(f"lost the stream to {self.node}: it closed") from None
                raise JournalError(f"{self.node}: a broken answer ({exc})") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await self._stream.receive_some(_RECEIVE)
            except trio.BrokenResourceError as exc:
                if self._started:
                    lost = f"lost the stream to {self.node}: the connection broke ({exc})"
                    raise JournalStreamLost(lost) from None
                raise JournalError(f"{self.node}: the connection broke ({exc})") from None
            self._closed = not data
            self._conn.receive_data(data)

    async def _status(self) -> None:
        """Read the answer's head; raise the node's error unless it is ``200``."""
        event = await self._event()
        if not isinstance(event, h11.Response):
            raise JournalError(f"{self.node}: no answer")
        if event.status_code == 200:
            self._started = True
            return
        body = b""
        while len(body) < _ERROR_BODY:
            more = await self._event()
            if not isinstance(more, h11.Data):
                break
            body += more.data
        raise status_error(self.node, event.status_code, body[:_ERROR_BODY])

    @property
    def buffered(self) -> int:
        """Documents received and not handed out yet (0: the next waits for the node)."""
        return len(self._lines)

    def __aiter__(self) -> JournalStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        doc = await self.receive()
        if doc is None:
            raise StopAsyncIteration
        return doc

    async def receive(self) -> dict[str, Any] | None:
        """The next document (an event or a marker); None when the stream has ended."""
        while not self._lines:
            event = await self._event()
            if not isinstance(event, h11.Data):
                if self._buffer:
                    raise JournalError(f"{self.node}: the stream ended inside a line")
                return None  # EndOfMessage (or the connection closed)
            self._buffer += event.data
            *lines, self._buffer = self._buffer.split(b"\n")
            self._lines.extend(line for line in lines if line)
            if len(self._buffer) > MAX_LINE:
                raise JournalError(f"{self.node}: a line longer than {MAX_LINE} bytes")
        try:
            return decode_peer_json(self._lines.popleft(), _DECODER)
        except PeerJSONError as exc:
            raise JournalError(f"{self.node}: a line not JSON ({exc})") from None


@asynccontextmanager
async def open_journal_stream(
    node: str, params: Mapping[str, str | int], *, connect_timeout: float = 10.0
) -> AsyncIterator[JournalStream]:
    """A stream of ``node``'s (``host:port``, plain HTTP) journal events that ``params``
    match (the route's filters, ``after``, ``max_ms``); :class:`~.journal.JournalError`
    when it cannot be opened."""
    host, port = split_host_port(node.removeprefix("http://"))
    try:
        with trio.fail_after(connect_timeout):
            stream = await trio.open_tcp_stream(host, port)
    except trio.TooSlowError:
        raise JournalError(
            f"cannot reach {node}: no connection within {connect_timeout:g}s"
        ) from None
    except OSError as exc:
        raise JournalError(f"cannot reach {node}: {unreachable_reason(exc)}") from None
    async with stream:
        conn = h11.Connection(h11.CLIENT)
        target = "/nsqbox/journal/stream"
        if params:
            target += "?" + urlencode({k: str(v) for k, v in params.items()})
        headers = [("Host", node.removeprefix("http://")), ("User-Agent", f"nsqbox/{__version__}")]
        request = conn.send(h11.Request(method="GET", target=target, headers=headers)) or b""
        request += conn.send(h11.EndOfMessage()) or b""
        try:
            await stream.send_all(request)
        except trio.BrokenResourceError as exc:
            raise JournalError(f"cannot reach {node}: {unreachable_reason(exc)}") from None
        opened = JournalStream(node, stream, conn)
        try:
            with trio.fail_after(connect_timeout):
                await opened._status()
        except trio.TooSlowError:
            raise JournalError(f"{node}: no answer within {connect_timeout:g}s") from None
        yield opened
