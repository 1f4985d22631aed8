"""``nsqbox record TOPIC --to FILE``: keep every message published to a topic (issue #34).

::

    nsqbox record orders --to orders.jsonl.gz            # until Ctrl-C or SIGTERM
    nsqbox record orders --to orders.jsonl --count 100   # the next 100 publishes

The file is a snapshot (docs/state.md) of one node and one topic: a header, the topic's line,
a message line per publish in the order nsqd took them (its id, and its ``timestamp``: the
broker time it was published at; a DPUB's ``delay_ms``), and the end line. The messages are
the topic's own (no ``channel``), and through nsqbox's tap each says who published it
(``publisher``: a TCP client's ``client_id``, ``hostname``, ``user_agent`` and
``remote_address``, or ``"protocol": "http"`` with the request's peer), so ``nsqbox up --load``
or ``nsqbox snapshot load`` seeds a box with them, and ``nsqbox replay`` publishes them again
with their spacing. Lines are written as they come (through ``FILE.part``, renamed once the
end line is written): a long recording is never held in memory.

Against nsqbox it reads the topic through the nsqd's tap (``/nsqbox/tap/...``, at
``--nsqd-http-address``): every publish, even one no channel would see yet, and a DPUB at once
with its delay. The tap holds what was not read yet; ``record`` reads it every
``--poll-interval`` and starts a fresh tap every :data:`ROTATE` messages (the new one opened
before the old one is closed, the overlap dropped by id), so the nsqd holds little. Against
real nsqd (the tap answers ``404``) it subscribes an ephemeral channel at
``--nsqd-tcp-address`` instead: it sees what a new channel sees (a topic with no channel gives
it what it holds; a DPUB arrives when its delay is over, recorded without it), and records
no publishers: nsqd does not keep them with the message.
"""

from __future__ import annotations

import base64
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from ..go.flags import FlagSet
from ..snapshot.files import SnapshotWriter, open_for_writing
from ..snapshot.format import Header, Publisher
from ..wire.names import is_valid_topic_name
from .common import (
    DEFAULT_NSQD_HTTP,
    DEFAULT_NSQD_TCP,
    STOP_SIGNALS,
    Fatal,
    ParsedArgs,
    run_tool,
    run_trio,
)

__all__ = ["ROTATE", "main", "record_flag_set"]

#: Messages one tap gathers before ``record`` replaces it with a fresh one.
ROTATE = 10_000


@dataclass(slots=True)
class RecordOptions:
    """What ``nsqbox record`` was asked to do."""

    topic: str
    path: str
    count: int
    nsqd_http: str
    nsqd_tcp: str
    poll_interval: float
    timeout: float


def record_flag_set() -> FlagSet:
    """``nsqbox record``'s flags."""
    flags = FlagSet("nsqbox record")
    flags.add_string("topic", "", "the topic to record (or the first argument)")
    flags.add_string("to", "", "the file to write (a snapshot; .gz: gzip)")
    flags.add_int("count", 0, "stop after this many messages (0: at SIGINT or SIGTERM)")
    flags.add_string("nsqd-http-address", DEFAULT_NSQD_HTTP, "the nsqd's HTTP address (the tap)")
    flags.add_string(
        "nsqd-tcp-address", DEFAULT_NSQD_TCP, "the nsqd's TCP address (real nsqd: a channel)"
    )
    flags.add_duration("poll-interval", 0.1, "how often to read the tap")
    flags.add_duration("http-client-request-timeout", 30.0, "timeout for HTTP request")
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> RecordOptions:
    positional = list(args.positional)
    topic = str(flags["topic"].value.value)
    if not topic:
        if not positional:
            raise Fatal("--topic required")
        topic = positional.pop(0)
    if positional:
        raise Fatal(f"unexpected argument {positional[0]!r}")
    if not is_valid_topic_name(topic):
        raise Fatal(f"invalid topic name {topic!r}")
    path = str(flags["to"].value.value)
    if not path:
        raise Fatal("--to FILE required")
    count = int(flags["count"].value.value)
    if count < 0:
        raise Fatal("--count must not be negative")
    poll = float(flags["poll-interval"].value.value)
    if not 0.001 <= poll <= 60:
        raise Fatal("--poll-interval must be between 1ms and 1m")
    http = str(flags["nsqd-http-address"].value.value)
    return RecordOptions(
        topic=topic,
        path=path,
        count=count,
        nsqd_http=http if "://" in http else f"http://{http}",
        nsqd_tcp=str(flags["nsqd-tcp-address"].value.value),
        poll_interval=poll,
        timeout=float(flags["http-client-request-timeout"].value.value),
    )


class Recording:
    """The file being written, and whether ``--count`` is reached."""

    def __init__(self, writer: SnapshotWriter, options: RecordOptions) -> None:
        import trio

        self.writer = writer
        self.options = options
        self.recorded = 0
        #: ``--count`` is reached: what comes after is not recorded.
        self.full = False
        #: Set when the count is reached or a signal came: stop reading (what a tap still
        #: holds of what was published before is recorded yet).
        self.done = trio.Event()

    def add(
        self,
        msg_id: bytes,
        timestamp: int,
        delay_ms: int,
        body: bytes,
        publisher: Publisher | None = None,
    ) -> None:
        """One publish, unless the count is reached."""
        if self.full:
            return
        self.writer.message(
            0, self.options.topic, None, msg_id, timestamp, 0, body, delay_ms, publisher=publisher
        )
        self.recorded += 1
        if self.options.count and self.recorded >= self.options.count:
            self.full = True
            self.done.set()


def _publisher(doc: object) -> Publisher | None:
    """A tap message's ``publisher`` (None when absent, or not one this format holds)."""
    if not isinstance(doc, dict):
        return None
    try:
        return msgspec.convert(doc, Publisher)
    except msgspec.ValidationError:
        return None


def _say(text: str) -> None:
    sys.stderr.write(f"nsqbox record: {text}\n")
    sys.stderr.flush()


async def _call(client: httpx.AsyncClient, method: str, url: str, **params: Any) -> Any:
    try:
        response = await client.request(method, url, params=params)
    except httpx.HTTPError as exc:
        raise Fatal(f"cannot reach nsqd: {exc}") from None
    if response.status_code != 200:
        raise Fatal(f"{url} answered {response.status_code} {response.text.strip()}")
    return response.json()


class _TapReader:
    """Reads a tap into the recording, replacing it every ROTATE messages."""

    def __init__(self, client: httpx.AsyncClient, options: RecordOptions, rec: Recording):
        self.client = client
        self.base = f"{options.nsqd_http}/nsqbox/tap"
        self.rec = rec
        self.tap_id = ""
        self.next = 0
        self.skip: set[str] = set()
        self.warned = False

    async def open(self) -> str:
        doc = await _call(self.client, "POST", f"{self.base}/open", topic=self.rec.options.topic)
        return str(doc["id"])

    def take(self, doc: dict[str, Any]) -> set[str]:
        """Record a tap document's messages; the ids it held."""
        ids = set()
        for m in doc["messages"]:
            msg_id = str(m["id"])
            ids.add(msg_id)
            if self.skip:
                if msg_id in self.skip:
                    continue  # recorded from the tap before this one
                self.skip = set()
            body = base64.b64decode(m["body"])
            publisher = _publisher(m.get("publisher"))
            self.rec.add(msg_id.encode(), int(m["timestamp"]), int(m["defer_ms"]), body, publisher)
        self.next = int(doc["next"])
        if (doc.get("overflow") or doc.get("lost")) and not self.warned:
            self.warned = True
            _say("WARNING: the tap overflowed or lost messages: the recording lacks some")
        return ids

    async def poll(self) -> None:
        """Read what the tap gathered; replace the tap once it holds ROTATE messages."""
        doc = await _call(
            self.client, "GET", f"{self.base}/read", id=self.tap_id, **{"from": self.next}
        )
        self.take(doc)
        if self.next >= ROTATE and not self.rec.done.is_set():
            fresh = await self.open()
            await self.close()
            self.tap_id, self.next = fresh, 0

    async def close(self) -> None:
        """Close the tap, recording what it still held."""
        doc = await _call(
            self.client, "POST", f"{self.base}/close", id=self.tap_id, **{"from": self.next}
        )
        self.skip = self.take(doc)


async def _record_tap(client: httpx.AsyncClient, options: RecordOptions, rec: Recording) -> bool:
    """Record through the tap until done; False when the nsqd has no tap (real nsqd)."""
    import trio

    reader = _TapReader(client, options, rec)
    try:
        response = await client.post(f"{reader.base}/open", params={"topic": options.topic})
    except httpx.HTTPError as exc:
        raise Fatal(f"cannot reach nsqd at {options.nsqd_http}: {exc}") from None
    if response.status_code == 404:
        return False
    if response.status_code != 200:
        raise Fatal(f"the tap answered {response.status_code} {response.text.strip()}")
    reader.tap_id = str(response.json()["id"])
    _say(f"recording topic {options.topic} through nsqbox's tap")
    try:
        while not rec.done.is_set():
            await reader.poll()
            with trio.move_on_after(options.poll_interval):
                await rec.done.wait()
    finally:
        with trio.CancelScope(shield=True):
            await reader.close()
    return True


async def _record_channel(options: RecordOptions, rec: Recording) -> None:
    """Record through an ephemeral channel (real nsqd): without DPUB delays or publishers."""
    from ..client import Config, Message, open_consumer

    def handle(message: Message) -> None:
        if rec.full:
            message.requeue(0, backoff=False)
            return
        rec.add(message.id, message.timestamp, 0, message.body)

    channel = f"record{random.randrange(999999):06d}#ephemeral"
    config = Config(user_agent="nsqbox-record", max_in_flight=200, close_timeout=2.0)
    async with open_consumer(
        options.topic, channel, handle, nsqd_tcp_addresses=[options.nsqd_tcp], config=config
    ):
        _say(f"recording topic {options.topic} through channel {channel} (no tap: real nsqd)")
        await rec.done.wait()


async def _record(options: RecordOptions) -> None:
    import trio

    header = Header(nsqbox_snapshot=1, nodes=1, saved_at_ns=time.time_ns())
    with open_for_writing(options.path) as stream:
        writer = SnapshotWriter(stream, header)
        writer.topic(0, options.topic, False)
        rec = Recording(writer, options)
        with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async with trio.open_nursery() as nursery:

                async def stop_on_signal() -> None:
                    async for _ in signals:
                        rec.done.set()

                nursery.start_soon(stop_on_signal)
                async with httpx.AsyncClient(timeout=options.timeout, trust_env=False) as client:
                    if not await _record_tap(client, options, rec):
                        await _record_channel(options, rec)
                nursery.cancel_scope.cancel()
        writer.finish()
    print(f"recorded {rec.recorded} messages of topic {options.topic} to {options.path}")


def main(argv: list[str]) -> int:
    """``nsqbox record TOPIC --to FILE``; the exit status."""
    flags = record_flag_set()
    return run_tool(flags, argv, lambda args: run_trio(_record, _options(flags, args)))
