"""The test handle's waits over HTTP: wait for counts, consume N (issue #36).

Not part of nsqadmin. A test in any language asks the admin service what the Python
handle's ``wait_for`` and ``consume`` do, over one address (see
docs/testing-other-languages.md):

=======  ==========================================  ==========================================
method   route                                       answer
=======  ==========================================  ==========================================
GET      /api/wait/:topic[/:channel]?depth=&...      once the topic (channel) exists with every
                                                     count given, summed over the nsqds (or
                                                     ``node=``): its counts; ``408
                                                     WAIT_TIMEOUT: last seen ...`` at ``timeout``
POST     /api/consume/:topic/:channel?n=&timeout=    SUB on ``node`` (default 0), take exactly
                                                     ``n`` messages (FIN each), CLS:
                                                     ``{messages: [{id, body, attempts,
                                                     timestamp}]}`` (body in base64);
                                                     ``n=0`` only subscribes (the channel
                                                     exists from then on)
=======  ==========================================  ==========================================

Counts: ``depth``, ``message_count`` (topic and channel); ``in_flight``, ``deferred``,
``requeue_count``, ``timeout_count``, ``clients`` (channel only: on a topic, 400
``INVALID_<COUNT>``). ``timeout`` is seconds or a
Go duration, 10 s by default, at most 60 s (a wait is bounded: ``400 INVALID_TIMEOUT``
beyond). A consume's ``timeout`` is the wait for messages only, from SUB's OK on:
connecting and subscribing have :data:`SUBSCRIBE_TIMEOUT` (10 s) of their own, so a
consume with a tiny ``timeout`` creates the channel however busy the machine is.
Errors: ``400 INVALID_<COUNT>``, ``INVALID_N`` (0 to 2,500), ``INVALID_TOPIC``,
``INVALID_CHANNEL``; ``403 FORBIDDEN`` (``--admin-user``, to consume); ``404
NODE_NOT_FOUND``; ``408 WAIT_TIMEOUT: ...``; ``502 UPSTREAM_ERROR: ...`` (also a SUB
not acknowledged within :data:`SUBSCRIBE_TIMEOUT`).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

import msgspec
import trio

from ...broker.clock import parse_span
from ...go.syntax import parse_count
from ...http.messages import HTTPError, Request
from ...http.router import Router
from ...wire import commands
from ...wire.documents import (
    CHANNEL_COUNTS,
    TOPIC_COUNTS,
    ChannelStats,
    StatsDocument,
    TopicStats,
)
from ...wire.frames import CLOSE_WAIT, HEARTBEAT, OK, FrameReader, FrameType
from ...wire.message import DecodedMessage, decode_message
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ...wire.peer_json import PeerJSONError, decode_peer_json
from ..box_nodes import BoxNodes
from ..clusterinfo import UpstreamError

__all__ = ["MAX_CONSUME", "MAX_WAIT", "SUBSCRIBE_TIMEOUT", "add_wait_routes"]

log = logging.getLogger("nsqbox.admin")

Doc = dict[str, Any]
#: The longest a wait or a consume may be asked to take, in seconds.
MAX_WAIT = 60.0
DEFAULT_WAIT = 10.0
#: How long a consume may take to connect and subscribe, apart from its ``timeout``.
SUBSCRIBE_TIMEOUT = 10.0
#: The most messages one consume takes (nsqd's default --max-rdy-count).
MAX_CONSUME = 2500
#: How often a wait reads the nsqds' /stats.
_POLL = 0.02
_stats_decoder = msgspec.json.Decoder(StatsDocument)


def _timeout(request: Request) -> float:
    raw = request.arg("timeout")
    if not raw:
        return DEFAULT_WAIT
    try:
        seconds = parse_span(raw)
    except ValueError:
        raise HTTPError(400, "INVALID_TIMEOUT") from None
    if seconds > MAX_WAIT:
        raise HTTPError(400, "INVALID_TIMEOUT")
    return seconds


def _names(request: Request) -> tuple[str, str | None]:
    topic = request.params["topic"]
    channel = request.params.get("channel")
    if not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_TOPIC")
    if channel is not None and not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_CHANNEL")
    return topic, channel


def _wanted(request: Request, names: tuple[str, ...]) -> dict[str, int]:
    for name in CHANNEL_COUNTS:
        if name not in names and request.arg(name) is not None:
            raise HTTPError(400, f"INVALID_{name.upper()}")  # a channel's count, on a topic
    wanted: dict[str, int] = {}
    for name in names:
        raw = request.arg(name)
        if raw is None or raw == "":
            continue
        try:
            wanted[name] = parse_count(raw)
        except ValueError:
            raise HTTPError(400, f"INVALID_{name.upper()}") from None
    return wanted


def _channel_counts(channel: ChannelStats) -> dict[str, int]:
    return {
        "depth": channel.depth,
        "in_flight": channel.in_flight_count,
        "deferred": channel.deferred_count,
        "message_count": channel.message_count,
        "requeue_count": channel.requeue_count,
        "timeout_count": channel.timeout_count,
        "clients": channel.client_count,
    }


def _counts(topics: list[TopicStats], topic: str, channel: str | None) -> dict[str, int] | None:
    """One node's counts of ``topic`` (its ``channel``); None when it has none."""
    for row in topics:
        if row.topic_name != topic:
            continue
        if channel is None:
            return {"depth": row.depth, "message_count": row.message_count}
        for ch in row.channels:
            if ch.channel_name == channel:
                return _channel_counts(ch)
    return None


class _Waiter:
    """Sums the counts of a topic (or channel) over some nsqds."""

    def __init__(self, nodes: BoxNodes, addresses: list[str], topic: str, channel: str | None):
        self.nodes = nodes
        self.addresses = addresses
        self.topic = topic
        self.channel = channel
        self.params = {"format": "json", "topic": topic, "include_clients": "false"}
        if channel is not None:
            self.params["channel"] = channel

    async def counts(self) -> dict[str, int] | None:
        """The counts summed over the nsqds that answer; None when none has it."""
        total: dict[str, int] | None = None
        for address in self.addresses:
            try:
                body = await self.nodes.faults.info.get(address, "/stats", self.params)
                doc = decode_peer_json(body, _stats_decoder)
            except (UpstreamError, PeerJSONError):
                continue  # a node that is down (a crash, a restart): the running ones count
            found = _counts(doc.topics or [], self.topic, self.channel)
            if found is not None:
                total = found if total is None else {k: total[k] + v for k, v in found.items()}
        return total

    def what(self) -> str:
        if self.channel is None:
            return f"topic {self.topic!r}"
        return f"channel {self.channel!r} of topic {self.topic!r}"


async def wait_for_counts(
    nodes: BoxNodes, request: Request, topic: str, channel: str | None
) -> Doc:
    """The ``/api/wait`` answer: poll until the counts match or the timeout is up."""
    wanted = _wanted(request, TOPIC_COUNTS if channel is None else CHANNEL_COUNTS)
    limit = _timeout(request)
    waiter = _Waiter(nodes, await nodes.chosen(request), topic, channel)
    seen: dict[str, int] | None = None
    with trio.move_on_after(limit):
        while True:
            seen = await waiter.counts()
            if seen is not None and all(seen[k] == v for k, v in wanted.items()):
                return {"topic": topic, "channel": channel, **seen}
            await trio.sleep(_POLL)
    last = "nothing (it does not exist)"
    if seen is not None:
        last = ", ".join(f"{k}={v}" for k, v in seen.items())
    want = ", ".join(f"{k}={v}" for k, v in wanted.items()) or "exist"
    raise HTTPError(
        408, f"WAIT_TIMEOUT: {waiter.what()} did not have {want} in {limit:g}s; last seen {last}"
    )


class _NSQDLink:
    """One consumer connection to nsqd: commands out, frames in, heartbeats answered."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = FrameReader(max_frame_size=64 * 1024 * 1024)

    async def next_frame(self) -> tuple[int, bytes]:
        """The next frame other than a heartbeat (answered with NOP)."""
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                if frame == (FrameType.RESPONSE, HEARTBEAT):
                    await self.stream.send_all(commands.nop())
                    continue
                return frame
            data = await self.stream.receive_some(65536)
            if not data:
                raise HTTPError(502, "UPSTREAM_ERROR: nsqd closed the connection")
            self.reader.receive_data(data)

    async def command(self, data: bytes) -> None:
        """Send a command and read its answer; 502 unless it is OK."""
        await self.stream.send_all(data)
        kind, answer = await self.next_frame()
        if kind == FrameType.ERROR or answer != OK:
            raise HTTPError(502, f"UPSTREAM_ERROR: nsqd answered {answer[:200]!r}")


def _message_doc(m: DecodedMessage) -> Doc:
    return {
        "id": m.id.decode("ascii", "replace"),
        "body": base64.b64encode(m.body).decode("ascii"),
        "attempts": m.attempts,
        "timestamp": m.timestamp,
    }


def _not_subscribed() -> HTTPError:
    return HTTPError(502, f"UPSTREAM_ERROR: nsqd did not acknowledge SUB in {SUBSCRIBE_TIMEOUT:g}s")


async def consume(
    address: tuple[str, int], topic: str, channel: str, n: int, limit: float
) -> list[Doc]:
    """SUB, take exactly ``n`` messages, FIN them, CLS: what the Python handle's
    ``consume`` does. Connecting, IDENTIFY and SUB have :data:`SUBSCRIBE_TIMEOUT` (502
    beyond); ``limit`` counts only the wait for messages, from SUB's OK on (408 beyond:
    what arrived is finished all the same), so ``n=0`` or a tiny ``limit`` still creates
    the channel. Held unfinished until all ``n`` arrived (RDY bounds messages in flight,
    not a budget), then RDY 0 before the FINs, so no message beyond them is taken."""
    subscribed_by = trio.current_time() + SUBSCRIBE_TIMEOUT
    with trio.move_on_at(subscribed_by) as connecting:
        stream = await trio.open_tcp_stream(*address)
    if connecting.cancelled_caught:
        raise _not_subscribed()
    got: list[DecodedMessage] = []
    async with stream:
        link = _NSQDLink(stream)
        identity = {"client_id": "nsqbox-admin", "user_agent": "nsqbox-admin-consume"}
        with trio.move_on_at(subscribed_by) as subscribing:
            await link.command(commands.MAGIC_V2 + commands.identify(identity))
            await link.command(commands.sub(topic, channel))
        if subscribing.cancelled_caught:
            raise _not_subscribed()
        try:
            with trio.move_on_after(limit) as waiting:  # the wait starts at SUB's OK
                if n:
                    await stream.send_all(commands.rdy(n))
                while len(got) < n:
                    kind, data = await link.next_frame()
                    if kind == FrameType.ERROR:
                        raise HTTPError(502, f"UPSTREAM_ERROR: nsqd answered {data[:200]!r}")
                    if kind == FrameType.MESSAGE:
                        got.append(decode_message(data))
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2.0):
                fins = b"".join(commands.fin(m.id) for m in got)
                await stream.send_all(commands.rdy(0) + fins + commands.cls())
                while (await link.next_frame()) != (FrameType.RESPONSE, CLOSE_WAIT):
                    pass
    if waiting.cancelled_caught:
        raise HTTPError(
            408,
            f"WAIT_TIMEOUT: {len(got)} of {n} message(s) of channel {channel!r} of topic "
            f"{topic!r} arrived in {limit:g}s (finished)",
        )
    return [_message_doc(m) for m in got]


def add_wait_routes(router: Router, nodes: BoxNodes, authorize: Callable[[Request], None]) -> None:
    """Add ``/api/wait`` and ``/api/consume`` to the admin ``router``; ``authorize``
    raises 403 for a consume the request may not make (it takes messages)."""

    async def wait(request: Request) -> Doc:
        topic, channel = _names(request)
        return await wait_for_counts(nodes, request, topic, channel)

    async def take(request: Request) -> Doc:
        topic, channel = _names(request)
        assert channel is not None  # the route has it
        raw = request.arg("n") or "1"
        try:
            n = parse_count(raw, most=MAX_CONSUME)
        except ValueError:
            raise HTTPError(400, "INVALID_N") from None
        limit = _timeout(request)
        authorize(request)
        addresses = await nodes.chosen(request) if request.arg("node") else await nodes.nsqds()
        if not addresses:
            raise HTTPError(404, "NODE_NOT_FOUND")
        address = await nodes.tcp_address(addresses[0])
        return {"messages": await consume(address, topic, channel, n, limit)}

    # nsqbox's own: off (404) with the box's --auth-http-address, as the nodes' routes are.
    router.add("GET", "/api/wait/:topic", wait, nsqbox_only=True)
    router.add("GET", "/api/wait/:topic/:channel", wait, nsqbox_only=True)
    router.add("POST", "/api/consume/:topic/:channel", take, nsqbox_only=True)
