"""The server side of protocol V2, sans-IO: bytes in, command events out.

nsqd reads a command line, validates its parameters, and only then reads the
body (if the command has one). The parser follows the same two steps so that
error texts and their order match nsqd exactly: :meth:`CommandParser.next_event`
returns a :class:`Command` as soon as its line is complete; a handler that wants
the body calls :meth:`~CommandParser.expect_body` or
:meth:`~CommandParser.expect_mpub`, and the next event is the :class:`Body` or
:class:`MPUBBody`. Size violations raise :class:`~nsqbox.wire.errors.NSQError`
with nsqd's code and text (all fatal).

A consumer FINs every message, so a chunk it sends is mostly ``FIN <id>\n`` lines.
A parser made with ``fin_runs=True`` returns a run of such lines as one
:class:`FinRun` (their ids, in order) instead of a :class:`Command` each: only
lines that the generic path would split into exactly ``[b"FIN", <16-byte id>]``
(one space, no ``\r``), so what a FIN means, or which error it gets, is the same
either way. Likewise, a parser given ``pub_limit`` returns a ``PUB <topic>`` line whose
body is already buffered and of a size nsqd accepts (1 to ``pub_limit`` bytes) as one
:class:`Pub`: the command and its body, for the one call nsqd's steps need; and with it
the PUBs that follow with the very same line, each body whole and of such a size (a
pipelining publisher's burst), up to :data:`MAX_PUB_RUN`: each is still published, and
answered, as one PUB.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from .buffer import ReceiveBuffer
from .errors import NSQError, ProtocolViolation

#: nsqd reads commands through a 16 KiB bufio.Reader; a longer line is dropped.
MAX_LINE_LENGTH: Final = 16 * 1024

_INT32 = struct.Struct(">i")


class Command(NamedTuple):
    """A command line: ``params[0]`` is the command name, as in nsqd's ``params``."""

    name: bytes
    params: list[bytes]


class Body(NamedTuple):
    """The body of PUB, DPUB, IDENTIFY or AUTH."""

    data: bytes


class FinRun(NamedTuple):
    """Consecutive ``FIN <16-byte id>`` lines (``fin_runs=True``): the ids, in order."""

    ids: list[bytes]

    @property
    def name(self) -> bytes:
        """The command the run repeats, as a :class:`Command`'s."""
        return b"FIN"

    @property
    def params(self) -> list[bytes]:
        """The line without its id (each id is in :attr:`ids`)."""
        return [b"FIN"]

    @property
    def times(self) -> int:
        """How many commands the run stands for."""
        return len(self.ids)


class Pub(NamedTuple):
    """Consecutive PUBs with the same ``PUB <topic>`` line, each body whole (``pub_limit``):
    ``params`` as a Command's, the bodies in order (one at least), ``nbytes`` their
    total size (read off the buffer's positions: no pass over the bodies)."""

    params: list[bytes]
    bodies: list[bytes]
    nbytes: int = -1

    @property
    def name(self) -> bytes:
        """The command the run repeats, as a :class:`Command`'s."""
        return b"PUB"

    @property
    def times(self) -> int:
        """How many commands the run stands for."""
        return len(self.bodies)


class MPUBBody:
    """The messages of an MPUB, in order (``bodies``); ``packed``: the same as sent (each
    one's size, then its body; empty if not known), which tells at C speed whether they
    are all one size. Equal when the bodies are: ``packed`` is only another form of them."""

    __slots__ = ("bodies", "packed")
    __hash__ = None  # type: ignore[assignment]  # a list inside, as the tuple it was

    def __init__(self, bodies: list[bytes], packed: bytes = b"") -> None:
        self.bodies = bodies
        self.packed = packed

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MPUBBody) and self.bodies == other.bodies

    def __repr__(self) -> str:
        return f"MPUBBody({self.bodies!r})"


class NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


#: Returned by :meth:`CommandParser.next_event` when more bytes are needed.
NEED_DATA: Final = NeedData()

Event = Command | FinRun | Pub | Body | MPUBBody | NeedData
#: A command line, or a run of lines of one command: what one command handler takes,
#: whether it stands for one command or 512 (a run is the faster way to the same result).
CommandEvent = Command | FinRun | Pub

#: ``FIN <16-byte id>\n``: the length of one line of a FinRun.
_FIN_LINE: Final = 21
#: The most FIN lines one FinRun holds (a run is copied whole before it is checked, so
#: this also bounds the work a peer can waste with a line that breaks a run).
MAX_FIN_RUN: Final = 512
#: The most PUBs one Pub holds (what one event does is bounded, as a FinRun's).
MAX_PUB_RUN: Final = 512


def _all_plain_fins(lines: bytes) -> bool:
    """Whether ``lines`` is whole ``FIN <16 bytes>\n`` lines, one space each and no CR."""
    count = len(lines) // _FIN_LINE
    return (
        lines[20::_FIN_LINE] == b"\n" * count
        and lines[0::_FIN_LINE] == b"F" * count
        and lines[1::_FIN_LINE] == b"I" * count
        and lines[2::_FIN_LINE] == b"N" * count
        and lines[3::_FIN_LINE] == b" " * count
        and lines.count(b" ") == count
        and b"\r" not in lines
    )


# What the parser is waiting for.
_LINE, _MESSAGE, _BODY, _MPUB_LEN, _MPUB_COUNT, _MPUB_ITEMS = range(6)


class CommandParser(ReceiveBuffer):
    """Incremental parser for the client-to-server half of protocol V2.

    The ``"  V2"`` magic is not its business: the server reads it first.
    """

    def __init__(
        self, max_line_length: int = MAX_LINE_LENGTH, *, fin_runs: bool = False, pub_limit: int = 0
    ) -> None:
        super().__init__()
        self._max_line = max_line_length
        self._fin_runs = fin_runs
        #: The largest PUB body a :class:`Pub` may carry (0: PUB is a Command, as any other).
        self.pub_limit = pub_limit
        self._state = _LINE
        self._name = ""
        self._limit = 0
        self._read_limit = 0
        self._max_msg = 0
        self._size = 0
        self._count = 0
        self._consumed = 0
        self._bodies: list[bytes] = []
        #: The bytes of an MPUB's messages read so far, a piece a read (MPUBBody.packed).
        self._pieces: list[bytes] = []

    def expect_body(self, name: str, limit: int, *, message: bool) -> None:
        """Read a ``[4-byte size][data]`` body next.

        ``message=True`` is PUB/DPUB (E_BAD_MESSAGE, size checked for <= 0 first);
        ``message=False`` is IDENTIFY/AUTH (E_BAD_BODY, "too big" checked first).
        """
        self._name = name
        self._limit = limit
        self._state = _MESSAGE if message else _BODY
        self._size = -1

    def expect_mpub(
        self, max_body_size: int, max_msg_size: int, *, bounded_input: bool = False
    ) -> None:
        """Read an MPUB body next: ``[4-byte size][4-byte count]([4-byte size][data])*``.

        ``bounded_input`` says the input is already held to ``max_body_size`` (an HTTP body):
        a message that runs past it is then a short read (``E_BAD_MESSAGE``, as nsqd's HTTP
        ``/mpub``), not the stream guard's ``E_BAD_BODY``.
        """
        self._limit = max_body_size
        self._read_limit = 1 << 62 if bounded_input else max_body_size
        self._max_msg = max_msg_size
        self._state = _MPUB_LEN

    def next_event(self) -> Event:
        """The next event, or :data:`NEED_DATA`."""
        if self._state == _LINE:
            return self._next_line()
        if self._state in (_MESSAGE, _BODY):
            return self._next_body()
        return self._next_mpub()

    def eof_error(self) -> NSQError | None:
        """The error nsqd sends when the peer closes its side now, or None.

        nsqd answers a body cut short by the end of the stream with the error of
        the read that failed (``PUB failed to read message body``...), and ends
        a partial command line silently. Call it when the peer has closed and
        :meth:`next_event` has returned :data:`NEED_DATA`; the parser's state is
        left as it is.
        """
        state = self._state
        if state == _LINE:
            return None
        have = len(self._buf) - self._pos
        if state in (_MESSAGE, _BODY):
            code = "E_BAD_MESSAGE" if state == _MESSAGE else "E_BAD_BODY"
            what = "message body" if state == _MESSAGE else "body"
            if self._size < 0:
                return NSQError(code, f"{self._name} failed to read {what} size")
            return NSQError(code, f"{self._name} failed to read {what}")
        if state == _MPUB_LEN:
            return NSQError("E_BAD_BODY", "MPUB failed to read body size")
        if state == _MPUB_COUNT:
            return NSQError("E_BAD_BODY", "MPUB failed to read message count")
        if have < 4:
            return NSQError(
                "E_BAD_MESSAGE", f"MPUB failed to read message({len(self._bodies)}) body size"
            )
        return NSQError("E_BAD_MESSAGE", "MPUB failed to read message body")

    def _next_line(self) -> Command | FinRun | Pub | NeedData:
        buf = self._buf
        pos = self._pos
        idx = buf.find(b"\n", pos)
        if idx < 0:
            if pos and pos == len(buf):
                # all consumed: a connection waiting for its next command holds no bytes
                buf.clear()
                self._pos = 0
                return NEED_DATA
            if len(buf) - pos >= self._max_line:
                raise ProtocolViolation("command line too long")
            return NEED_DATA
        if idx == pos + _FIN_LINE - 1 and self._fin_runs and buf.startswith(b"FIN ", pos):
            run = self._fin_run(pos)
            if run is not None:
                return run
        if idx - pos >= self._max_line:
            raise ProtocolViolation("command line too long")
        end = idx - 1 if idx > pos and buf[idx - 1] == 13 else idx  # strip an optional \r
        params = bytes(buf[pos:end]).split(b" ")
        self._pos = idx + 1
        if params[0] == b"PUB" and len(params) == 2 and self.pub_limit:
            bodies = self._pub_run(pos, idx + 1)
            if bodies:  # each body after its size, each later one after the line again
                framing = 4 * len(bodies) + (idx + 1 - pos) * (len(bodies) - 1)
                return Pub(params, bodies, self._pos - idx - 1 - framing)
        return Command(params[0], params)

    def _pub_run(self, line: int, after: int) -> list[bytes]:
        """The whole bodies of the PUB whose line is ``buf[line:after]`` and of the PUBs
        right behind it with the same line; consumes them (none: the generic way)."""
        buf = self._buf
        have = len(buf)
        limit = self.pub_limit
        head = bytes(buf[line:after])
        bodies: list[bytes] = []
        while have - after >= 4:
            (size,) = _INT32.unpack_from(buf, after)
            end = after + 4 + size
            if size <= 0 or size > limit or end > have:
                break  # not whole, or an error: for the generic path to read and answer
            bodies.append(bytes(buf[after + 4 : end]))
            self._pos = end
            if len(bodies) == MAX_PUB_RUN or not buf.startswith(head, end):
                break
            after = end + len(head)
        return bodies

    def _fin_run(self, pos: int) -> FinRun | None:
        """The FIN lines from ``pos`` on (the first is known to be one), up to the first
        that is not plain (a space or ``\r`` in its id: it goes the generic way); None when
        the first is not."""
        buf = self._buf
        if buf.find(b" ", pos + 4, pos + 20) >= 0 or buf.find(b"\r", pos + 4, pos + 20) >= 0:
            return None
        whole = min(MAX_FIN_RUN, (len(buf) - pos) // _FIN_LINE)
        with memoryview(buf) as view:
            lines = bytes(view[pos : pos + whole * _FIN_LINE])
        if not _all_plain_fins(lines):  # keep those before the first that is not
            plain = _FIN_LINE  # the first is
            while plain < len(lines) and _all_plain_fins(lines[plain : plain + _FIN_LINE]):
                plain += _FIN_LINE
            lines = lines[:plain]
        self._pos = pos + len(lines)
        return FinRun([lines[i : i + 16] for i in range(4, len(lines), _FIN_LINE)])

    def _read_size(self) -> int | None:
        if len(self._buf) - self._pos < 4:
            return None
        (size,) = _INT32.unpack_from(self._buf, self._pos)
        self._pos += 4
        return int(size)

    def _next_body(self) -> Body | NeedData:
        if self._size < 0:
            size = self._read_size()
            if size is None:
                return NEED_DATA
            name, limit = self._name, self._limit
            if self._state == _MESSAGE:
                if size <= 0:
                    raise NSQError("E_BAD_MESSAGE", f"{name} invalid message body size {size}")
                if size > limit:
                    raise NSQError("E_BAD_MESSAGE", f"{name} message too big {size} > {limit}")
            else:
                if size > limit:
                    raise NSQError("E_BAD_BODY", f"{name} body too big {size} > {limit}")
                if size <= 0:
                    raise NSQError("E_BAD_BODY", f"{name} invalid body size {size}")
            self._size = size
        end = self._pos + self._size
        if len(self._buf) < end:
            return NEED_DATA
        data = bytes(self._buf[self._pos : end])
        self._pos = end
        self._state = _LINE
        return Body(data)

    def _next_mpub(self) -> MPUBBody | NeedData:
        if self._state == _MPUB_LEN:
            size = self._read_size()
            if size is None:
                return NEED_DATA
            if size <= 0:
                raise NSQError("E_BAD_BODY", f"MPUB invalid body size {size}")
            if size > self._limit:
                raise NSQError("E_BAD_BODY", f"MPUB body too big {size} > {self._limit}")
            self._state = _MPUB_COUNT
        if self._state == _MPUB_COUNT:
            count = self._read_size()
            if count is None:
                return NEED_DATA
            # 4 bytes for the count, 5 for the smallest message (size + 1 byte)
            if count <= 0 or count > (self._limit - 4) // 5:
                raise NSQError("E_BAD_BODY", f"MPUB invalid message count {count}")
            self._count = count
            self._consumed = 4
            self._bodies = []
            self._pieces = []
            self._state = _MPUB_ITEMS
        # nsqd reads the messages straight off the stream (the declared body size
        # is only range-checked), so parse structurally, resuming where we stopped.
        # Unlike nsqd, the bytes actually read are held to --max-body-size too: a
        # declared size is a claim, and count * --max-msg-size can be terabytes.
        # The sizes first, then one copy of the messages found and a slice per body
        # (slicing the bytearray itself would copy each body twice).
        buf = self._buf
        first = pos = self._pos
        have = len(buf)
        bodies = self._bodies
        max_msg = self._max_msg
        # where the bytes read would pass the limit: consumed + 4 + size > limit
        limit_end = first + self._read_limit - self._consumed
        unpack = _INT32.unpack_from
        starts: list[int] = []
        for i in range(len(bodies), self._count):
            if have - pos < 4:
                break
            (size,) = unpack(buf, pos)
            end = pos + 4 + size
            if size <= 0 or size > max_msg or end > limit_end or end > have:
                # the errors in nsqd's order, or not all of it yet
                if size <= 0:
                    raise NSQError("E_BAD_MESSAGE", f"MPUB invalid message({i}) body size {size}")
                if size > max_msg:
                    raise NSQError("E_BAD_MESSAGE", f"MPUB message too big {size} > {max_msg}")
                if end > limit_end:
                    total = self._consumed + end - first
                    raise NSQError("E_BAD_BODY", f"MPUB body too big {total} > {self._read_limit}")
                break
            starts.append(pos + 4 - first)
            pos = end
        if starts:
            with memoryview(buf) as view:
                found = bytes(view[first:pos])
            self._pieces.append(found)
            ends = [s - 4 for s in starts[1:]]
            ends.append(pos - first)
            bodies += [found[s:e] for s, e in zip(starts, ends, strict=True)]
        self._pos = pos
        self._consumed += pos - first
        if len(bodies) < self._count:
            return NEED_DATA
        pieces = self._pieces
        self._bodies = self._pieces = []
        self._state = _LINE
        return MPUBBody(bodies, pieces[0] if len(pieces) == 1 else b"".join(pieces))
