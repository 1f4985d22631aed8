"""The journal's entries: what its ring holds, one per event of a batch of messages (and
the records it keeps beside them: who a client was, a message in trouble, one given up).

Structs the garbage collector does not track (as :class:`~.message.Message`): they refer
to strings, numbers, messages, tuples of them and lists of messages (a batch, a run of
PUBs), and nothing refers back, so they are in no cycle; recording one never counts
towards a collection, and the ring, however long, costs a collection little (a list per
batch or run at most). :mod:`.journal` records them and
:mod:`.journal_views` reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

if TYPE_CHECKING:
    from .message import Message

__all__ = [
    "Entry",
    "GivenUp",
    "Published",
    "Run",
    "Step",
    "Trouble",
    "Who",
    "http_agent",
    "ids_run",
    "run_of",
]

#: An id's tick (13 hex digits, as :class:`~.message.GUIDFactory` makes them), then its
#: sequence in the tick (3 hex digits).
_HEAD = 13
_ID = 16


class Published(msgspec.Struct, gc=False):
    """A publish, as the ring holds it: ``key`` is the topic's ``(name, channels)``, the
    channels that took the messages straight into memory (None: the topic held them);
    ``refs`` a :class:`Run` (an MPUB) or a list: an MPUB's that is not a run, or the
    messages of a run of PUBs (``pubs``) one connection made in one turn, one entry for
    them all. A message the first channel of ``key`` sent on at once is not recorded
    again: the message itself says so (its attempts and lease, see :mod:`.journal_views`).

    Untracked by the garbage collector: it refers to strings, numbers, messages (not
    tracked either) and at most a list, and nothing refers back, so it is in no cycle.
    """

    key: tuple[str, tuple[str, ...] | None]
    refs: Any
    defer: float
    nbytes: int
    #: Each message of ``refs`` (a list) was a PUB (or DPUB) of its own.
    pubs: bool = False


class Step(msgspec.Struct, gc=False):
    """Any other entry: :class:`Entry`'s fields from ``kind`` on (untracked, as
    :class:`Published`; what it refers to never refers back)."""

    kind: int
    now: float
    topic: str
    channel: str
    refs: Any
    a: Any
    b: Any
    c: Any
    nbytes: int


class Entry(NamedTuple):
    """One step of a batch of messages, as :mod:`.journal_views` reads it.

    The ring holds the same fields from ``kind`` on as a :class:`Step` (what recording
    builds); ``first`` is the number of its first event: the entry's number times 2**32.
    ``refs`` is a list of messages, one message, or (``finished``) a list of ids; ``a``,
    ``b`` and ``c`` depend on the kind.
    """

    first: int
    kind: int
    #: When, on the node's monotonic clock (seconds); None for a publish, whose messages
    #: carry their broker wall time.
    now: float | None
    topic: str
    channel: str
    refs: Any
    a: Any
    b: Any
    c: Any
    nbytes: int
    #: A publish of a run of PUBs: each message its own PUB.
    pubs: bool = False


class Run(msgspec.Struct, gc=False):
    """An MPUB's messages as a publish's entry keeps them: the first, how many, and each
    one's size, for a batch whose ids follow each other in one tick and whose bodies are
    all ``size`` bytes (nearly every batch; :func:`run_of` keeps the list of any other).
    The ring then holds one message of the batch, not a list of them all."""

    first: Message
    count: int
    size: int

    def ids(self) -> list[bytes]:
        """The batch's message ids, in order."""
        data = self.first.data
        head, seq = data[:_HEAD], int(data[_HEAD:_ID], 16)
        return [head + b"%03x" % (seq + i) for i in range(self.count)]


def ids_run(msgs: list[Message]) -> Run | None:
    """``msgs`` as a :class:`Run` (``size`` -1: not kept) when their ids are ``len(msgs)``
    numbers of one tick from the first's to the last's, as a batch's (or part of one) are;
    else None. Constant work."""
    first, last = msgs[0], msgs[-1]
    if (
        first.data[:_HEAD] == last.data[:_HEAD]
        and int(last.data[_HEAD:_ID], 16) - int(first.data[_HEAD:_ID], 16) == len(msgs) - 1
    ):
        return Run(first, len(msgs), -1)
    return None


def run_of(
    msgs: list[Message], bodies: list[bytes], nbytes: int, packed: bytes = b"", lined: bool = False
) -> Run | list[Message]:
    """What a publish's entry keeps of an MPUB's ``msgs`` (``bodies``, ``nbytes`` in all):
    a :class:`Run` when it can say the same, else the list. ``packed``, if not empty, is
    the bodies as sent, each after its 4-byte size: their sizes are read there, four
    strided copies of a byte a message (C loops a few instructions a message), instead of
    a pass over ``bodies`` (a call and a comparison a message). ``lined``: ``packed`` is
    the bodies joined by newlines instead (a text /mpub's), its newlines read the same way.

    ``msgs`` are what one :meth:`~.message.GUIDFactory.messages` call made of ``bodies``
    (as a topic's publish makes them): their ids follow each other, in one tick while the
    tick lasts, then in the next (whose head differs). So the first's and the last's heads
    alike say they are ``len(msgs)`` numbers of one tick, without reading the numbers
    (two hex parses cost more than the rest of this together)."""
    count = len(bodies)
    each = len(bodies[0])
    if nbytes != each * count:  # not the sum of ``count`` sizes all the first's
        return msgs
    if packed:
        if lined:  # a newline after every ``each`` bytes (the sum gave the body's length)
            if packed[each :: each + 1] != b"\n" * (count - 1):
                return msgs
        else:  # every size the first's, byte by byte
            step = 4 + each
            if not (
                packed[3::step] == packed[3:4] * count
                and packed[2::step] == packed[2:3] * count
                and packed[1::step] == packed[1:2] * count
                and packed[::step] == packed[:1] * count
            ):
                return msgs
    elif max(map(len, bodies)) != each:  # none longer than the first (the sum: none shorter)
        return msgs
    first = msgs[0]
    if msgs[-1].data.startswith(first.data[:_HEAD]):
        return Run(first, count, each)
    return msgs


#: The longest a client's field is remembered (IDENTIFY may say more), as taps cut them.
MAX_WHO_FIELD: Final = 256


class Who(NamedTuple):
    """A TCP client as the journal remembers it."""

    remote_address: str
    user_agent: str
    hostname: str
    client_id: str

    @classmethod
    def of(cls, client: Any) -> Who:
        """Who ``client`` (a TCP connection) is, each field cut to :data:`MAX_WHO_FIELD`."""
        fields = ("remote_address", "user_agent", "hostname", "client_id")
        return cls(*(str(getattr(client, f, ""))[:MAX_WHO_FIELD] for f in fields))


def http_agent(headers: tuple[tuple[bytes, bytes], ...]) -> str:
    """An HTTP request's User-Agent, cut as a client's fields are."""
    agent = next((v for k, v in headers if k.lower() == b"user-agent"), b"")
    return agent[:MAX_WHO_FIELD].decode("utf-8", "replace")


class Trouble:
    """A message whose delivery went wrong, not yet finished or dropped."""

    __slots__ = (
        "data",
        "held_longest",
        "last_client",
        "requeues",
        "since",
        "timeouts",
        "timestamp",
    )

    def __init__(self, data: bytes, timestamp: int, since: int) -> None:
        self.data = data
        self.timestamp = timestamp
        self.since = since  #: broker wall ns of its first failure
        self.requeues = 0
        self.timeouts = 0
        self.last_client = 0
        self.held_longest = 0.0  #: seconds, the longest a client held it before a failure


class GivenUp(NamedTuple):
    """A message finished after earlier deliveries of it failed."""

    time: int
    topic: str
    channel: str
    data: bytes
    timestamp: int
    attempts: int
    client: int
    requeues: int
    timeouts: int
