"""The journal's entries: what its ring holds, one per event of a batch of messages.

Structs the garbage collector does not track (as :class:`~.message.Message`): they refer
to strings, numbers, messages and tuples of them, never to a list, and nothing refers back,
so they are in no cycle; recording one never counts towards a collection, and the ring,
however long, costs a collection nothing. :mod:`.journal` records them and
:mod:`.journal_views` reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

if TYPE_CHECKING:
    from .message import Message

__all__ = ["Entry", "Published", "Run", "Step", "ids_run", "run_of"]

#: An id's tick (13 hex digits, as :class:`~.message.GUIDFactory` makes them), then its
#: sequence in the tick (3 hex digits).
_HEAD = 13
_ID = 16


class Published(msgspec.Struct, gc=False):
    """A publish, as the ring holds it: ``key`` is the topic's ``(name, channels)``, the
    channels that took the messages straight into memory (None: the topic held them);
    ``refs`` one message (a PUB), a :class:`Run` (an MPUB) or, for an MPUB that is not
    one, a list.

    Untracked by the garbage collector: it refers to strings, numbers, messages (not
    tracked either) and at most a list, and nothing refers back, so it is in no cycle.
    """

    key: tuple[str, tuple[str, ...] | None]
    refs: Any
    defer: float
    nbytes: int
    #: A PUB's message sent on at once by the first channel of ``key`` (the one given the
    #: message itself, not a copy): its lease, set on this entry instead of a :class:`Step`.
    lease: Any = None


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


def run_of(msgs: list[Message], bodies: list[bytes], nbytes: int) -> Run | list[Message]:
    """What a publish's entry keeps of an MPUB's ``msgs`` (``bodies``, ``nbytes`` in all):
    a :class:`Run` when it can say the same, else the list. Two C passes over the sizes."""
    first, last = msgs[0], msgs[-1]
    each = len(bodies[0])
    if (
        nbytes == each * len(bodies)
        and max(map(len, bodies)) == each  # none longer, and the sum: none shorter
        and first.data[:_HEAD] == last.data[:_HEAD]
        and int(last.data[_HEAD:_ID], 16) - int(first.data[_HEAD:_ID], 16) == len(msgs) - 1
    ):
        return Run(first, len(msgs), each)
    return msgs
