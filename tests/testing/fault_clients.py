"""Clients the fault and clock tests watch: a gnsq consumer (gevent), a trio-mode consumer.

Each starts its client on a box's nsqd (channel ``work``), hands it to the test and closes
it afterwards, with every wait bounded by :data:`~.conftest.TIMEOUT`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import trio

from nsqbox.client import Config
from nsqbox.client.consumer import open_consumer
from nsqbox.testing import NSQBox, ThreadBox
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.trio_box import TrioNSQBox, open_trio_box
from nsqbox.testing.waiting import poll

from .conftest import TIMEOUT

T = TypeVar("T")


def gevent_wait(check: Callable[[], T], what: str = "") -> T:
    """Wait (under gevent) until ``check()`` is true (``what`` names it); its value."""
    import gevent

    def done() -> tuple[bool, T]:
        value = check()
        return bool(value), value

    def timed_out(value: T) -> str:
        return f"waited {TIMEOUT}s for {what or 'the condition'}; last {value!r}"

    return poll(done, TIMEOUT, timed_out, gevent.sleep)


def client_ids(box: ThreadBox) -> set[int]:
    """The ids of the clients connected to the box's first nsqd."""
    return set(box.call(lambda: list(box.ops.nsqds[0].clients)))


@contextmanager
def gnsq_consumer(
    handle: NSQBox,
    topic: str,
    handler: Callable[[Any, Any], None] | None = None,
    *,
    on_giving_up: Callable[[Any, Any], None] | None = None,
    **options: Any,
) -> Iterator[list[bytes]]:
    """A gnsq consumer of ``topic``/``work``, started and subscribed; closed afterwards.

    Yields the bodies the default handler appends (empty with a ``handler`` of the test's).
    ``on_giving_up`` is connected to its signal (weakly: the caller keeps it alive).
    Needs the ``gevent_hub`` fixture.
    """
    import gevent
    import gnsq

    got: list[bytes] = []
    consumer = gnsq.Consumer(
        topic,
        "work",
        handle.nsqd_tcp_address,
        message_handler=handler or (lambda _consumer, message: got.append(message.body)),
        **options,
    )
    if on_giving_up is not None:
        consumer.on_giving_up.connect(on_giving_up)
    try:
        consumer.start(block=False)
        handle.wait_for(topic, "work", clients=1, sleep=gevent.sleep)
        yield got
    finally:
        consumer.close()
        consumer.join(timeout=TIMEOUT)


@asynccontextmanager
async def trio_consumer(
    tmp_path: Path, **config: Any
) -> AsyncIterator[tuple[TrioNSQBox, list[bytes]]]:
    """A trio-mode box (no nsqlookupd) and a nsqbox consumer of ``orders``/``work`` on it.

    The consumer reconnects after 0.05 s (``config`` adds or overrides options). Yields
    the box and the bodies the consumer got; the box is closed afterwards.
    """
    options = {"reconnect_delay": 0.05, "max_reconnect_delay": 0.05, **config}
    async with trio.open_nursery() as nursery:
        box = await open_trio_box(nursery, ClusterSpec(lookupd=0), str(tmp_path))
        got: list[bytes] = []
        async with open_consumer(
            "orders",
            "work",
            lambda m: got.append(m.body),
            nsqd_tcp_addresses=[box.nsqd_tcp_address],
            config=Config(**options),
        ):
            yield box, got
        await box.aclose()
