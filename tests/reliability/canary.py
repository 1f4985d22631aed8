"""A canary: a producer and a consumer that keep using an nsqd while it is being abused.

It runs on its own trio loop in a thread, so it works beside synchronous
hypothesis tests and beside a server in another thread or process. The producer
publishes numbered messages one at a time (each waits for its ``OK``); the
consumer FINs every message it gets. :meth:`Canary.stop` stops publishing, waits
for the consumer to have every message, and returns the counts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import TracebackType

import trio

from nsqbox.wire import commands
from tests.helpers import RawConn
from tests.reliability.strategies import CANARY

#: Longest the consumer may wait for a message still owed to it.
DRAIN_TIMEOUT = 30.0
#: The body of the producer's last message.
_LAST = b"last"


@dataclass
class CanaryReport:
    """What the canary saw."""

    sent: int = 0
    received: set[int] = field(default_factory=set)
    duplicates: int = 0
    #: Longest wait between two deliveries, seconds (a figure, never asserted).
    max_gap: float = 0.0

    @property
    def missing(self) -> list[int]:
        return sorted(set(range(self.sent)) - self.received)


class Canary:
    """Start with ``with Canary(address) as canary:``; ``canary.stop()`` checks and reports."""

    def __init__(self, address: tuple[str, int], *, pace: float = 0.005) -> None:
        self.address = address
        self.pace = pace
        self.report = CanaryReport()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> Canary:
        self._thread = threading.Thread(target=self._run, name="canary", daemon=True)
        self._thread.start()
        if not self._ready.wait(DRAIN_TIMEOUT):
            raise TimeoutError("the canary did not start")
        self._raise()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._signal_stop()
            self._thread.join(DRAIN_TIMEOUT * 2)

    def stop(self) -> CanaryReport:
        """Stop publishing, let the consumer catch up; raise what went wrong, if anything."""
        self._signal_stop()
        assert self._thread is not None
        self._thread.join(DRAIN_TIMEOUT * 2)
        assert not self._thread.is_alive(), "the canary did not finish"
        self._raise()
        return self.report

    def _signal_stop(self) -> None:
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass

    def _raise(self) -> None:
        if self._error is not None:
            raise AssertionError(f"the canary failed: {self._error!r}") from self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        consumer = await RawConn.open(self.address)
        producer = await RawConn.open(self.address)
        consumer.timeout = producer.timeout = DRAIN_TIMEOUT
        try:
            await consumer.sub(CANARY, CANARY, rdy=100)
            self._ready.set()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._consume, consumer)
                await self._produce(producer)
                await producer.pub(CANARY, _LAST)
        finally:
            await consumer.aclose()
            await producer.aclose()

    async def _produce(self, producer: RawConn) -> None:
        assert self._stop is not None
        report = self.report
        while not self._stop.is_set():
            await producer.pub(CANARY, b"%d" % report.sent)
            report.sent += 1
            with trio.move_on_after(self.pace):
                await self._stop.wait()

    async def _consume(self, consumer: RawConn) -> None:
        report = self.report
        last = trio.current_time()
        done = False
        while not (done and len(report.received) >= report.sent):
            msg = await consumer.message()
            now = trio.current_time()
            report.max_gap = max(report.max_gap, now - last)
            last = now
            await consumer.send(commands.fin(msg.id))
            if msg.body == _LAST:
                done = True
                continue
            number = int(msg.body)
            if number in report.received:
                report.duplicates += 1
            report.received.add(number)
