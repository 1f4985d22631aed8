"""Shared fixtures for the third-party client compatibility tests.

Each client (pynsq on tornado, gnsq on gevent, ansq on asyncio) runs its own
event loop in the test's thread; the nsqd under test is a real nsqbox nsqd
served from a background thread (:class:`nsqbox.testing.ThreadedNSQD`).
Server state is only read through ``box.call`` (on the server's own thread).

The tests here are synchronous: pytest-trio's ``trio_mode`` leaves them alone.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.testing import ThreadedNSQD

#: Upper bound for every wait in these tests (the scenarios take well under a second
#: on an idle machine; the bound only matters when something is broken).
TIMEOUT = 20.0
#: Poll interval while waiting for server state to settle.
POLL = 0.01

#: Workload shape: at least 1,000 messages over PUB, MPUB and DPUB.
N_PUB = 400
MPUB_BATCHES = 5
MPUB_BATCH = 120
N_DPUB = 200


def compat_options(**overrides: object) -> NSQDOptions:
    """nsqd options for a throwaway server on 127.0.0.1, port 0."""
    opts = NSQDOptions(
        tcp_address="127.0.0.1:0",
        http_address="127.0.0.1:0",
        node_id=7,
        # a message a client lost track of comes back well inside TIMEOUT
        msg_timeout=10.0,
    )
    for key, value in overrides.items():
        setattr(opts, key, value)
    return opts


StartNSQD = Callable[..., ThreadedNSQD]


@pytest.fixture
def start_threaded_nsqd() -> Iterator[StartNSQD]:
    """A factory: ``box = start_threaded_nsqd(max_msg_size=1024)``; all stopped at teardown."""
    boxes: list[ThreadedNSQD] = []

    def start(**overrides: object) -> ThreadedNSQD:
        box = ThreadedNSQD(compat_options(**overrides))
        box.start()
        boxes.append(box)
        return box

    yield start
    for box in reversed(boxes):
        box.stop()


@pytest.fixture
def threaded_nsqd(start_threaded_nsqd: StartNSQD) -> ThreadedNSQD:
    """One nsqd with the compat defaults, running in a background thread."""
    return start_threaded_nsqd()


# -- server state ------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelState:
    """A snapshot of one channel (and its topic), read on the server's thread."""

    topic_depth: int
    topic_message_count: int
    depth: int
    in_flight: int
    deferred: int
    message_count: int
    requeue_count: int
    timeout_count: int


class ServerProbe:
    """Reads one topic/channel's state from a :class:`ThreadedNSQD`."""

    def __init__(self, box: ThreadedNSQD) -> None:
        self.box = box

    def channel(self, topic: str, channel: str) -> ChannelState | None:
        """The channel's state, or None while the topic or channel does not exist."""

        def read(nsqd: NSQD) -> ChannelState | None:
            t = nsqd.topics.get(topic)
            c = t.channels.get(channel) if t is not None else None
            if t is None or c is None:
                return None
            return ChannelState(
                topic_depth=t.depth(),
                topic_message_count=t.message_count,
                depth=c.depth(),
                in_flight=c.in_flight_count(),
                deferred=c.deferred_count(),
                message_count=c.message_count,
                requeue_count=c.requeue_count,
                timeout_count=c.timeout_count,
            )

        return self.box.call(read)

    def channel_exists(self, topic: str, channel: str) -> bool:
        return self.channel(topic, channel) is not None

    def drained(self, topic: str, channel: str) -> bool:
        """True once nothing is left on the topic or in the channel (waiting, in flight or
        deferred)."""
        state = self.channel(topic, channel)
        return (
            state is not None
            and state.topic_depth == 0
            and state.depth == 0
            and state.in_flight == 0
            and state.deferred == 0
        )


@pytest.fixture
def probe(threaded_nsqd: ThreadedNSQD) -> ServerProbe:
    """Reads the state of ``threaded_nsqd``."""
    return ServerProbe(threaded_nsqd)


def wait_until(
    condition: Callable[[], bool],
    what: str,
    *,
    timeout: float = TIMEOUT,
    sleep: Callable[[float], object] = time.sleep,
) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds.

    ``sleep`` lets a cooperative loop keep running while we wait (``gevent.sleep``).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        sleep(POLL)


@pytest.fixture
def wait() -> Callable[..., None]:
    """:func:`wait_until`, as a fixture (test modules do not import conftest)."""
    return wait_until


# -- the workload ------------------------------------------------------------------


def _body(prefix: str, i: int) -> bytes:
    """A distinct body ending in the decimal digits of ``i``.

    Some bodies carry bytes that a careless codec would mangle (NUL, newline, 0xff,
    non-UTF-8) and a few are larger than one read chunk.
    """
    head = prefix.encode()
    if i % 50 == 3:
        head += b"\x00\n\xff\xfe binary \r\n"
    if i % 100 == 11:
        head += b"x" * 20_000
    return b"%s-%05d" % (head, i)


@dataclass
class Workload:
    """What to publish, how to handle it and what to expect back.

    Every body whose last byte is ``7`` is requeued on its first attempt; the rest are
    finished. A body counts as received when it is finished.
    """

    pub: list[bytes]
    mpub: list[list[bytes]]
    dpub: list[tuple[bytes, int]]  # (body, delay in ms)
    received: Counter[bytes] = field(default_factory=Counter)
    requeued_attempts: list[int] = field(default_factory=list)
    finished_requeued_attempts: list[int] = field(default_factory=list)
    first_attempts: int = 0

    @property
    def sent(self) -> Counter[bytes]:
        bodies: Counter[bytes] = Counter(self.pub)
        for batch in self.mpub:
            bodies.update(batch)
        bodies.update(body for body, _ in self.dpub)
        return bodies

    @property
    def total(self) -> int:
        return self.sent.total()

    @property
    def expected_requeues(self) -> int:
        return sum(n for body, n in self.sent.items() if self.wants_requeue(body, 1))

    @staticmethod
    def wants_requeue(body: bytes, attempts: int) -> bool:
        """Requeue every body ending in 7 on its first attempt."""
        return attempts == 1 and body.endswith(b"7")

    def handle(self, body: bytes, attempts: int) -> bool:
        """Record one delivery; True to finish it, False to requeue it."""
        if attempts == 1:
            self.first_attempts += 1
        if self.wants_requeue(body, attempts):
            self.requeued_attempts.append(attempts)
            return False
        if body.endswith(b"7"):
            self.finished_requeued_attempts.append(attempts)
        self.received[body] += 1
        return True

    @property
    def done(self) -> bool:
        return self.received.total() >= self.total

    def check(self) -> None:
        """The assertions every client test shares."""
        assert self.received == self.sent, "bodies received != bodies sent"
        assert self.total >= 1000
        expected = self.expected_requeues
        assert expected > 0
        assert len(self.requeued_attempts) == expected
        assert len(self.finished_requeued_attempts) == expected
        # each requeued message came back with attempts >= 2
        assert all(a >= 2 for a in self.finished_requeued_attempts)


@pytest.fixture
def workload() -> Workload:
    """1,200 messages: 400 PUB, 5 MPUB x 120, 200 DPUB (0-90 ms), 10 percent requeued once.

    A few bodies repeat across the publish commands, so the comparison is of multisets.
    """
    pub = [_body("pub", i) for i in range(N_PUB)]
    mpub = [[_body(f"mpub{b}", i) for i in range(MPUB_BATCH)] for b in range(MPUB_BATCHES)]
    dpub = [(_body("dpub", i), (i % 10) * 10) for i in range(N_DPUB)]
    # duplicates: the same body published twice (via MPUB and again via DPUB)
    for k in range(5):
        dpub[k * 3] = (mpub[0][k], 20)
    return Workload(pub=pub, mpub=mpub, dpub=dpub)
