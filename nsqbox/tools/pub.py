"""``nsqbox pub TOPIC [MESSAGE ...]``: publish messages, like NSQ's ``to_nsq``.

Each MESSAGE argument is one message. Without any, messages are read from stdin, split on
``--delimiter`` (a newline by default); empty ones are skipped, as ``to_nsq`` does. Every message
goes to every ``--nsqd-tcp-address`` (default ``127.0.0.1:4150``). Stdin is published in batches
(MPUB) unless ``--rate`` throttles it to one PUB every ``1/rate`` seconds.

``--defer DURATION`` (a Go duration: ``30s``, ``1h``) publishes each message with DPUB, so nsqd
holds it that long before delivering it (the TCP form of ``/pub?defer=``, in milliseconds). nsqd
bounds it as it bounds ``/pub?defer=``: at most its ``--max-req-timeout`` (1h by default), which
it enforces with ``E_INVALID``; a negative duration is refused here.

Exit status 0 once every message is acknowledged; 1 (after a ``log.Fatal``-style line on stderr)
when an nsqd cannot be reached or refuses a message.
"""

from __future__ import annotations

import io
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import cast

from .. import __version__
from ..go.flags import FlagSet
from .common import DEFAULT_NSQD_TCP, Fatal, ParsedArgs, run_tool, run_trio

__all__ = ["main", "pub_flag_set"]

#: Bytes read from stdin at a time, and the most bytes put in one MPUB.
READ_SIZE = 64 * 1024
BATCH_BYTES = 512 * 1024

USER_AGENT = f"nsqbox-pub/{__version__}"


@dataclass(frozen=True, slots=True)
class PubOptions:
    """What ``nsqbox pub`` was asked to do."""

    topic: str
    addresses: list[str]
    messages: list[bytes] | None  # None: read stdin
    delimiter: bytes
    rate: int
    defer: float = 0.0  # seconds; 0: publish at once (PUB/MPUB), else DPUB each message


USAGE = """\
usage: nsqbox pub [--topic] TOPIC [MESSAGE ...] [flags]
  each MESSAGE is one message; without any, each line of stdin (or --delimiter) is one
"""


def pub_flag_set() -> FlagSet:
    """``nsqbox pub``'s flags (``to_nsq``'s, plus a positional topic and messages)."""
    flags = FlagSet("nsqbox pub")
    flags.add_string("topic", "", "NSQ topic to publish to (or the first argument)")
    flags.add_string("delimiter", "\n", "character to split input from stdin")
    flags.add_string_array(
        "nsqd-tcp-address",
        f"destination nsqd TCP address (may be given multiple times; default {DEFAULT_NSQD_TCP})",
    )
    flags.add_int("rate", 0, "throttle messages to n/second; 0 to disable")
    flags.add_duration(
        "defer",
        0.0,
        "deliver each message after this long (DPUB; e.g. 30s, 1h; at most nsqd's "
        "--max-req-timeout)",
    )
    flags.add_bool("version", False, "print version string")
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> PubOptions:
    positional = list(args.positional)
    topic = flags["topic"].value.value
    if not topic:
        if not positional:
            raise Fatal("--topic required")
        topic = positional.pop(0)
    delimiter = flags["delimiter"].value.value.encode()
    if len(delimiter) != 1:
        raise Fatal("--delimiter must be a single byte")
    rate = flags["rate"].value.value
    messages = [m.encode() for m in positional] if positional else None
    if messages is not None and not all(messages):
        raise Fatal("a message must not be empty")
    addresses = flags["nsqd-tcp-address"].value.value or [DEFAULT_NSQD_TCP]
    defer = flags["defer"].value.value
    if defer < 0:
        raise Fatal(f"--defer must not be negative, not {flags['defer'].value.string()}")
    return PubOptions(topic, addresses, messages, delimiter, rate, defer)


async def _stdin_batches(delimiter: bytes, max_batch: int) -> AsyncIterator[list[bytes]]:
    """Messages from stdin, in batches of whole messages (at most ``max_batch`` each)."""
    import trio

    read1 = cast(io.BufferedReader, sys.stdin.buffer).read1
    pending = b""
    while True:
        # In a thread we may abandon: a read blocked on a terminal must not hold up Ctrl-C.
        chunk = await trio.to_thread.run_sync(read1, READ_SIZE, abandon_on_cancel=True)
        if not chunk:
            break
        parts = (pending + chunk).split(delimiter)
        pending = parts.pop()
        batch: list[bytes] = []
        size = 0
        for part in parts:
            if not part:
                continue
            batch.append(part)
            size += len(part)
            if size >= BATCH_BYTES or len(batch) >= max_batch:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch
    if pending:
        yield [pending]


async def _publish(options: PubOptions) -> None:
    import trio

    from ..client import ClientError, Config, NSQError, open_producer
    from ..client.conn import CONNECT_ERRORS

    config = Config(user_agent=USER_AGENT)
    async with AsyncExitStack() as stack:
        producers = []
        for address in options.addresses:
            try:
                producers.append(
                    await stack.enter_async_context(open_producer(address, config=config))
                )
            except (*CONNECT_ERRORS, ClientError, NSQError) as exc:
                raise Fatal(f"failed to connect to nsqd {address} - {exc}") from None

        async def send(bodies: list[bytes]) -> None:
            for address, producer in zip(options.addresses, producers, strict=True):
                try:
                    if options.defer:
                        for body in bodies:  # DPUB carries one message: no deferred MPUB
                            await producer.dpub(options.topic, body, options.defer)
                    elif len(bodies) == 1:
                        await producer.pub(options.topic, bodies[0])
                    else:
                        await producer.mpub(options.topic, bodies)
                except (*CONNECT_ERRORS, ClientError, NSQError, ValueError) as exc:
                    raise Fatal(f"failed to publish to {address} - {exc}") from None

        if options.messages is not None:
            batches: AsyncIterator[list[bytes]] = _list_batches(
                options.messages, 1 if options.rate > 0 else len(options.messages)
            )
        else:
            batches = _stdin_batches(options.delimiter, 1 if options.rate > 0 else 10_000)
        interval = 1.0 / options.rate if options.rate > 0 else 0.0
        next_send = trio.current_time()
        async for batch in batches:
            if interval:
                await trio.sleep_until(next_send)
                next_send = max(next_send + interval, trio.current_time() - 1.0)
            await send(batch)


async def _list_batches(messages: list[bytes], size: int) -> AsyncIterator[list[bytes]]:
    for start in range(0, len(messages), size):
        yield messages[start : start + size]


def main(argv: list[str]) -> int:
    """``nsqbox pub TOPIC [MESSAGE ...]``; returns the exit status."""
    flags = pub_flag_set()
    return run_tool(
        flags,
        argv,
        lambda args: run_trio(_publish, _options(flags, args)),
        synopsis=USAGE,
        version="nsqbox pub",
    )
