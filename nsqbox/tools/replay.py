"""``nsqbox replay FILE --topic T``: publish a recording's messages again (issue #34).

::

    nsqbox replay orders.jsonl.gz --topic orders-copy              # with the recorded spacing
    nsqbox replay orders.jsonl.gz --topic orders --speed 10x       # ten times as fast
    nsqbox replay orders.jsonl.gz --topic orders --speed max       # as fast as nsqd takes them
    nsqbox replay orders.jsonl.gz --topic orders --channel billing # into one channel (nsqbox)

FILE is a snapshot (docs/state.md): a recording of ``nsqbox record``, or any snapshot. It is
read whole and checked first, so a damaged or truncated file is refused with the line it
failed on and nothing is published. Then its message lines are published, in the file's order,
to ``--topic`` through the nsqd at ``--nsqd-http-address`` (``/mpub?binary=true``; a message
with ``delay_ms`` by itself, ``/pub?defer=``, with that delay). The first message goes at once,
each other one when its ``timestamp`` is as far from the first's as in the recording, divided
by ``--speed``; messages due together go in one MPUB (at most :data:`BATCH_MESSAGES` messages
or :data:`BATCH_BYTES` bytes). ``--speed max`` sends batches one after the other.

``--channel C`` publishes into that one channel of the topic and no other, through nsqbox's
``POST /nsqbox/channel/mpub`` (the topic and channel are created if need be). Real
nsqd has no such route (it answers ``404``: a topic gives every message to all its channels),
and replay says so before publishing anything.
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, TextIO

import httpx

from ..go.flags import FlagSet
from ..snapshot.files import SnapshotReader, check_snapshot, open_for_reading
from ..snapshot.format import MessageLine, SnapshotError, message_body
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .common import DEFAULT_NSQD_HTTP, Fatal, ParsedArgs, run_tool

__all__ = ["BATCH_BYTES", "BATCH_MESSAGES", "main", "parse_speed", "replay_flag_set"]

#: The most messages, and body bytes, one MPUB carries.
BATCH_MESSAGES: Final = 1000
BATCH_BYTES: Final = 512 * 1024
#: The fastest a recording's spacing can be replayed (``--speed``), and the slowest.
MAX_SPEED: Final = 1_000_000.0
MIN_SPEED: Final = 0.001
_UINT32: Final = struct.Struct(">I")


@dataclass(slots=True)
class ReplayOptions:
    """What ``nsqbox replay`` was asked to do."""

    path: str
    topic: str
    channel: str
    #: How much faster than recorded; None: as fast as possible.
    speed: float | None
    nsqd_http: str
    timeout: float


def parse_speed(text: str) -> float | None:
    """``--speed``: ``max`` (None), or a factor such as ``10x``, ``0.5x`` or ``2``."""
    if text == "max":
        return None
    try:
        speed = float(text.removesuffix("x"))
    except ValueError:
        raise Fatal(f"--speed must be max or a factor such as 10x, not {text!r}") from None
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise Fatal(f"--speed must be between {MIN_SPEED:g}x and {MAX_SPEED:g}x, not {text!r}")
    return speed


def replay_flag_set() -> FlagSet:
    """``nsqbox replay``'s flags."""
    flags = FlagSet("nsqbox replay")
    flags.add_string("topic", "", "the topic to publish to (required)")
    flags.add_string("channel", "", "publish into this channel of the topic only (nsqbox only)")
    flags.add_string("speed", "1x", "the recorded spacing's speed-up (10x), or max")
    flags.add_string("nsqd-http-address", DEFAULT_NSQD_HTTP, "the nsqd's HTTP address")
    flags.add_duration("http-client-request-timeout", 30.0, "timeout for HTTP request")
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> ReplayOptions:
    match args.positional:
        case [path]:
            pass
        case []:
            raise Fatal("FILE required: nsqbox replay FILE --topic T")
        case [_, extra, *_]:
            raise Fatal(f"unexpected argument {extra!r}")
    topic = str(flags["topic"].value.value)
    if not topic:
        raise Fatal("--topic required")
    if not is_valid_topic_name(topic):
        raise Fatal(f"invalid topic name {topic!r}")
    channel = str(flags["channel"].value.value)
    if channel and not is_valid_channel_name(channel):
        raise Fatal(f"invalid channel name {channel!r}")
    http = str(flags["nsqd-http-address"].value.value)
    return ReplayOptions(
        path=path,
        topic=topic,
        channel=channel,
        speed=parse_speed(str(flags["speed"].value.value)),
        nsqd_http=http if "://" in http else f"http://{http}",
        timeout=float(flags["http-client-request-timeout"].value.value),
    )


def _messages(path: str) -> Iterator[MessageLine]:
    with open_for_reading(path) as stream:
        for record in SnapshotReader(stream):
            if type(record) is MessageLine:
                yield record


class _Publisher:
    """Sends batches to the topic, or to one channel of it."""

    def __init__(self, client: httpx.Client, options: ReplayOptions) -> None:
        self.client = client
        self.options = options
        self.sent = 0

    def send(self, bodies: list[bytes], defer_ms: int = 0) -> None:
        if not bodies:
            return
        options = self.options
        params: dict[str, str | int] = {"topic": options.topic}
        if options.channel:
            url = f"{options.nsqd_http}/nsqbox/channel/mpub"
            params["channel"] = options.channel
        elif defer_ms:
            url = f"{options.nsqd_http}/pub"
        else:
            url = f"{options.nsqd_http}/mpub"
            params["binary"] = "true"
        if defer_ms:
            params["defer"] = defer_ms
        if url.endswith("/pub"):
            content = bodies[0]
        else:
            parts = [_UINT32.pack(len(bodies))]
            for body in bodies:
                parts += (_UINT32.pack(len(body)), body)
            content = b"".join(parts)
        try:
            response = self.client.post(url, params=params, content=content)
        except httpx.HTTPError as exc:
            raise Fatal(f"cannot reach nsqd at {options.nsqd_http}: {exc}") from None
        if response.status_code == 404 and options.channel:
            raise Fatal(
                f"--channel needs nsqbox: {options.nsqd_http} has no /nsqbox/channel/mpub "
                "(real nsqd publishes to the whole topic only); nothing more was published"
            )
        if response.status_code != 200:
            raise Fatal(
                f"publishing failed after {self.sent} messages: {url} answered "
                f"{response.status_code} {response.text.strip()}"
            )
        self.sent += len(bodies)


def replay(client: httpx.Client, options: ReplayOptions) -> int:
    """Publish the (checked) file's messages as ``options`` say; how many were published."""
    publisher = _Publisher(client, options)
    try:  # the connection made before the clock starts: the first message is not late
        client.get(f"{options.nsqd_http}/ping")
    except httpx.HTTPError as exc:
        raise Fatal(f"cannot reach nsqd at {options.nsqd_http}: {exc}") from None
    batch: list[bytes] = []
    size = 0
    first: int | None = None
    start = time.monotonic()
    for record in _messages(options.path):
        if options.speed is not None:
            if first is None:
                first = record.timestamp
            due = start + max(0, record.timestamp - first) / 1e9 / options.speed
            wait = due - time.monotonic()
            if wait > 0:
                publisher.send(batch)
                batch, size = [], 0
                time.sleep(wait)
        body = message_body(record)
        if record.delay_ms:
            publisher.send(batch)
            batch, size = [], 0
            publisher.send([body], record.delay_ms)
            continue
        if batch and (len(batch) >= BATCH_MESSAGES or size + len(body) > BATCH_BYTES):
            publisher.send(batch)
            batch, size = [], 0
        batch.append(body)
        size += len(body)
    publisher.send(batch)
    return publisher.sent


def run(options: ReplayOptions, out: TextIO | None = None) -> int:
    """Check the file, then replay it; print what was published."""
    out = out or sys.stdout
    try:
        summary = check_snapshot(options.path)
    except SnapshotError as exc:
        raise Fatal(f"{options.path} refused, nothing published: {exc}") from None
    except OSError as exc:
        raise Fatal(f"cannot read {options.path}: {exc}") from None
    with httpx.Client(timeout=options.timeout, trust_env=False) as client:
        sent = replay(client, options)
    where = f"{options.topic}/{options.channel}" if options.channel else options.topic
    out.write(f"replayed {sent} of {summary.messages} messages to {where}\n")
    return 0


def main(argv: list[str]) -> int:
    """``nsqbox replay FILE --topic T``; the exit status."""
    flags = replay_flag_set()
    return run_tool(flags, argv, lambda args: run(_options(flags, args)))
