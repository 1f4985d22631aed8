"""nsqbox's replay route: publish messages into one channel of a topic only (issue #34).

Not part of NSQ: real nsqd publishes to a topic, and a topic gives every message to every
channel. ``nsqbox replay FILE --channel C`` replays a recording into one consumer's channel
without the topic's other channels seeing it, through this route:

- ``POST /nsqbox/channel/mpub?topic=T&channel=C[&defer=MS]``: the body is a binary MPUB
  (``[4-byte count]([4-byte size][body])*``, as ``/mpub?binary=true``). The topic is
  created as ``/pub`` creates it, the channel as ``/channel/create`` does; each message gets
  a new id and the node's broker time, and goes to that channel only (with ``defer``,
  deferred there for ``MS`` milliseconds, at most ``--max-req-timeout`` as ``/pub?defer=``).
  The topic's own counters (``message_count``) do not count them; the channel's do. Answers
  ``200`` with no body, as ``/channel/create``.

Bounded as ``/mpub``: the body by ``--max-body-size`` (``413 BODY_TOO_BIG``), each message by
``--max-msg-size`` (``413 MSG_TOO_BIG``). Like every ``/nsqbox/`` route it is guarded by the
Host allowlist and the same-origin check, and off (``404``, as real nsqd answers) under
``--auth-http-address``: it publishes without the authorization ``PUB`` would need.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ...go.syntax import StrconvError, parse_int
from ...http import HTTPError, Request, Router
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..domain.channel import ChannelError
from .mpub_body import read_binary_mpub

if TYPE_CHECKING:
    from ..domain.nsqd import NSQD

__all__ = ["add_replay_routes"]

_UINT32: Final = struct.Struct(">I")


def _arg(request: Request, name: str, error: str) -> str:
    values = request.args().get(name)
    if not values or not values[0]:
        raise HTTPError(400, error)
    return values[0]


def _defer(request: Request, max_req_timeout: float) -> float:
    """``defer`` in seconds (0: none); ``400 INVALID_DEFER`` as ``/pub?defer=``."""
    raw = (request.args().get("defer") or [""])[0]
    if not raw:
        return 0.0
    try:
        ms = parse_int(raw, 10)
    except StrconvError:
        raise HTTPError(400, "INVALID_DEFER") from None
    if ms < 0 or ms / 1000 > max_req_timeout:
        raise HTTPError(400, "INVALID_DEFER")
    return ms / 1000


def add_replay_routes(router: Router, nsqd: NSQD) -> None:
    """Add ``POST /nsqbox/channel/mpub`` (module doc) to ``nsqd``'s HTTP router."""

    async def channel_mpub(request: Request) -> None:
        topic_name = _arg(request, "topic", "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic_name):
            raise HTTPError(400, "INVALID_TOPIC")
        channel_name = _arg(request, "channel", "MISSING_ARG_CHANNEL")
        if not is_valid_channel_name(channel_name):
            raise HTTPError(400, "INVALID_CHANNEL")
        opts = nsqd.options
        defer = _defer(request, opts.max_req_timeout)
        bodies = read_binary_mpub(request.body, opts.max_msg_size, opts.max_body_size)
        if nsqd.exiting:
            raise HTTPError(503, "EXITING")
        topic = nsqd.get_topic(topic_name)
        channel = topic.get_channel(channel_name)
        if topic.exiting or channel.exiting:
            raise HTTPError(503, "EXITING")
        if not bodies:
            return
        node = topic.node
        msgs = topic.id_factory.messages(bodies, node.wall_ns())
        now = node.now()
        try:
            if defer:
                for msg in msgs:
                    channel.put_deferred(msg, defer, now)
            else:
                channel.put_batch(msgs, now)
        except ChannelError:
            raise HTTPError(503, "EXITING") from None

    router.add(
        "POST",
        "/nsqbox/channel/mpub",
        channel_mpub,
        too_large=HTTPError(413, "BODY_TOO_BIG"),
        nsqbox_only=True,
    )
