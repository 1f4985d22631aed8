"""Protocol V2's commands: one ClientV2 per TCP connection (nsqd/protocol_v2.go).

:class:`ClientV2` holds a client's state and counters and executes its
commands with nsqd's rules and error texts. How bytes move (the reader and
writer tasks, heartbeats, commands that must await) is
:class:`~nsqbox.nsqd.connection.Connection`'s; IDENTIFY's negotiation and the
TLS/compression upgrades live in :mod:`~nsqbox.nsqd.negotiate`; AUTH's
bookkeeping in :mod:`~nsqbox.nsqd.auth`.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

from ..wire.errors import NSQError, go_quote, invalid
from ..wire.frames import CLOSE_WAIT, OK, FrameType, encode_frame
from ..wire.message import MESSAGE_FRAME_HEADER, MSG_ID_LENGTH
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from ..wire.parser import Body, Command
from . import negotiate
from .auth import ConnectionAuth
from .channel import ChannelError
from .connection import Connection, Suspend
from .options import TLS_NOT_REQUIRED
from .tls import peer_common_name
from .topic import TopicError

if TYPE_CHECKING:
    from .auth import AuthClient, AuthState
    from .channel import Channel
    from .message import Message
    from .nsqd import NSQD

logger = logging.getLogger("nsqbox.nsqd")

# Client states as nsqd numbers them (they show in /stats).
STATE_INIT = 0
STATE_SUBSCRIBED = 3
STATE_CLOSING = 4

__all__ = ["ClientV2"]

DEFAULT_OUTPUT_BUFFER_SIZE = 16 * 1024
_MAX_UINT64 = (1 << 64) - 1

Handler = Callable[[list[bytes]], "bytes | None"]
Publisher = Callable[[str, str, list[bytes], float], "bytes | None"]


def _base10(raw: bytes) -> int | None:
    """nsqd's ByteToBase10: digits only (empty is 0), wrapping like a uint64.

    Folded in chunks: CPython's int() refuses strings of more than 4,300 digits.
    """
    if raw and not (raw.isascii() and raw.isdigit()):
        return None
    value = 0
    for i in range(0, len(raw), 1000):
        chunk = raw[i : i + 1000]
        value = (value * 10 ** len(chunk) + int(chunk)) & _MAX_UINT64
    return value


def _int64(value: int) -> int:
    """Reinterpret a uint64 as Go's int64 (two's complement)."""
    value &= _MAX_UINT64
    return value - (1 << 64) if value >= 1 << 63 else value


def _message_id(raw: bytes) -> bytes:
    if len(raw) != MSG_ID_LENGTH:
        raise invalid("invalid message ID")
    return raw


class ClientV2(Connection):
    """One protocol V2 connection: its state, its counters, and its command handlers."""

    def __init__(
        self,
        nsqd: NSQD,
        stream: trio.abc.Stream,
        remote: tuple[str, int],
        *,
        tls_context: ssl.SSLContext | None = None,
        auth: AuthClient | None = None,
    ) -> None:
        super().__init__(nsqd, stream)
        opts = nsqd.options
        #: Offered to clients that ask for ``tls_v1`` (None: TLS not configured).
        self.tls_context = tls_context
        self.id = nsqd.next_client_id()
        host = remote[0]
        self.remote_address = f"[{host}]:{remote[1]}" if ":" in host else f"{host}:{remote[1]}"
        self.client_id = host
        self.hostname = host
        self.user_agent = ""
        self.state = STATE_INIT
        self.ready_count = 0
        self.in_flight_count = 0
        self.message_count = 0
        self.finish_count = 0
        self.requeue_count = 0
        self.connect_time = time.time()
        self.sample_rate = 0
        self.tls = False
        self.snappy = False
        self.deflate = False
        #: The TLS layer (a trio.SSLStream: cipher(), version(), getpeercert()...) once upgraded.
        self.tls_info: trio.SSLStream[trio.abc.Stream] | None = None
        # nsqd's IsAuthEnabled: AUTH, and permission checks on SUB and the publish commands
        self._authz = (
            ConnectionAuth(auth, remote_ip=host, peer=self) if opts.auth_http_addresses else None
        )
        self.pub_counts: dict[str, int] = {}
        self.channel: Channel | None = None
        self.in_ring = False
        self.msg_timeout = opts.msg_timeout
        self.output_buffer_size = DEFAULT_OUTPUT_BUFFER_SIZE
        self.output_buffer_timeout = opts.output_buffer_timeout
        # PUB and DPUB publish through this; with auth it checks permissions first
        self._publish: Publisher = (
            self._publish_unchecked if self._authz is None else self._publish_checked
        )
        self._tls_gate = opts.tls_required != TLS_NOT_REQUIRED
        self._handlers: dict[bytes, Handler] = {
            b"FIN": self._fin,
            b"RDY": self._rdy,
            b"REQ": self._req,
            b"PUB": self._pub,
            b"MPUB": self._mpub,
            b"DPUB": self._dpub,
            b"NOP": self._nop,
            b"TOUCH": self._touch,
            b"SUB": self._sub,
            b"CLS": self._cls,
            b"AUTH": self._auth,
        }

    def __repr__(self) -> str:
        return f"ClientV2({self.remote_address})"

    @property
    def auth_state(self) -> AuthState | None:
        """The auth server's answer for this client (``identity``, ``authorizations``...)."""
        return self._authz.state if self._authz is not None else None

    # -- what a channel calls ------------------------------------------------
    def can_take(self) -> bool:
        """Ready for another message: in flight below RDY (CLS and close set RDY to 0),
        and the output buffer not full (a consumer that does not read gets no more)."""
        return (
            self.in_flight_count < self.ready_count
            and len(self._out) + self._sending < self.out_limit
        )

    def out_room(self) -> int:
        """Bytes the output buffer may still take before deliveries pause."""
        return self.out_limit - len(self._out) - self._sending

    def send_message(self, msg: Message) -> None:
        """Buffer a message frame for the writer (the channel did the in-flight bookkeeping)."""
        out = self._out
        if not out:
            self._wake.set()
        data = msg.data
        out += MESSAGE_FRAME_HEADER.pack(len(data) + 14, 2, msg.timestamp, msg.attempts)
        out += data
        self.in_flight_count += 1
        self.message_count += 1

    def send_messages(self, msgs: list[Message]) -> None:
        """Buffer several message frames at once."""
        out = self._out
        if not out and msgs:
            self._wake.set()
        pack = MESSAGE_FRAME_HEADER.pack
        for msg in msgs:
            data = msg.data
            out += pack(len(data) + 14, 2, msg.timestamp, msg.attempts)
            out += data
        self.in_flight_count += len(msgs)
        self.message_count += len(msgs)

    def timed_out_message(self) -> None:
        """One of this client's messages timed out."""
        self.in_flight_count -= 1

    def empty(self) -> None:
        """The channel was emptied: nothing of ours is in flight any more."""
        self.in_flight_count = 0

    def close(self) -> None:
        """Disconnect (the channel or topic is being deleted, or the server stops)."""
        self.ready_count = 0
        super().close()

    # -- the connection ---------------------------------------------------------
    async def run(self, initial: bytes) -> None:
        """Serve the connection until it ends; ``initial`` is what followed the magic."""
        self.nsqd.clients[self.id] = self
        await self.serve(initial)

    def _stop_deliveries(self) -> None:
        # the reader ended (EOF, fatal error): nothing more for us, before the writer flushes
        self.ready_count = 0

    def _disconnected(self) -> None:
        self.nsqd.clients.pop(self.id, None)
        if self.channel is not None:
            self.channel.remove_client(self)

    def _ready_for_more(self) -> None:
        # one pull per received chunk of FINs, not one per FIN
        if self.channel is not None:
            self.channel.client_ready(self, self._now)

    def _exec(self, cmd: Command) -> bytes | None:
        name = cmd.name
        if name == b"IDENTIFY":
            return self._identify(cmd.params)
        handler = self._handlers.get(name)
        if self._tls_gate and not self.tls:
            raise invalid(f"cannot {_raw_text(name)} in current state (TLS required)")
        if handler is None:
            raise invalid(f"invalid command {_raw_text(name)}")
        return handler(cmd.params)

    # -- commands --------------------------------------------------------------
    def _identify(self, params: list[bytes]) -> bytes | None:
        if self.state != STATE_INIT:
            raise invalid("cannot IDENTIFY in current state")
        self.parser.expect_body("IDENTIFY", self.nsqd.options.max_body_size, message=False)
        self._pending = self._identify_body
        return None

    def _identify_body(self, body: Body) -> bytes | None:
        response, upgrades = negotiate.identify(self, body.data)
        if not upgrades:
            return response
        # the reply goes out in the clear, then the upgrades happen with the writer held
        self._out += encode_frame(FrameType.RESPONSE, response)
        raise Suspend(partial(self._upgrade, upgrades))

    async def _upgrade(self, upgrades: negotiate.Upgrades) -> None:
        # what the client sent behind IDENTIFY belongs to the first new layer
        initial = self.parser.take_buffered()
        await self.hold_writer()
        try:
            await negotiate.upgrade_transport(self, upgrades, initial)
        finally:
            self.release_writer()

    def _auth(self, params: list[bytes]) -> bytes | None:
        if self.state != STATE_INIT:
            raise invalid("cannot AUTH in current state")
        if len(params) != 1:
            raise invalid("AUTH invalid number of parameters")
        self.parser.expect_body("AUTH", self.nsqd.options.max_body_size, message=False)
        self._pending = self._auth_body
        return None

    def _auth_body(self, body: Body) -> bytes | None:
        authz = self._authz
        if authz is not None and authz.has_authorizations():
            raise invalid("AUTH already set")
        if authz is None:
            raise NSQError("E_AUTH_DISABLED", "AUTH disabled")
        authenticate = partial(
            authz.authenticate, bytes(body.data), tls=self.tls, common_name=self._common_name()
        )
        raise Suspend(authenticate)

    def _common_name(self) -> str:
        """The client certificate's subject CN, which the auth server is told."""
        return peer_common_name(self.tls_info) if self.tls_info is not None else ""

    def _check_auth(
        self, cmd: str, topic: str, channel: str, then: Callable[[], bytes | None]
    ) -> bytes | None:
        """nsqd's CheckAuth, then ``then()``; suspends to ask again when the answer expired."""
        assert self._authz is not None
        if self._authz.check(cmd, topic, channel, self._now):
            return then()
        raise Suspend(partial(self._recheck_auth, cmd, topic, channel, then))

    async def _recheck_auth(
        self, cmd: str, topic: str, channel: str, then: Callable[[], bytes | None]
    ) -> bytes | None:
        assert self._authz is not None
        await self._authz.refresh(
            cmd, topic, channel, tls=self.tls, common_name=self._common_name()
        )
        self._now = self.nsqd.now()
        return then()

    def _sub(self, params: list[bytes]) -> bytes | None:
        if self.state != STATE_INIT:
            raise invalid("cannot SUB in current state")
        if self.heartbeat_interval <= 0:
            raise invalid("cannot SUB with heartbeats disabled")
        if len(params) < 3:
            raise invalid("SUB insufficient number of parameters")
        topic_name = params[1].decode("latin-1")
        if not is_valid_topic_name(topic_name):
            raise NSQError("E_BAD_TOPIC", f"SUB topic name {go_quote(params[1])} is not valid")
        channel_name = params[2].decode("latin-1")
        if not is_valid_channel_name(channel_name):
            raise NSQError("E_BAD_CHANNEL", f"SUB channel name {go_quote(params[2])} is not valid")
        if self._authz is not None:
            subscribe = partial(self._subscribe, topic_name, channel_name)
            return self._check_auth("SUB", topic_name, channel_name, subscribe)
        return self._subscribe(topic_name, channel_name)

    def _subscribe(self, topic_name: str, channel_name: str) -> bytes:
        topic = self.nsqd.get_topic(topic_name)
        channel = topic.get_channel(channel_name)
        try:
            channel.add_client(self)
        except ChannelError as err:
            raise NSQError("E_SUB_FAILED", f"SUB failed {err}") from None
        self.state = STATE_SUBSCRIBED
        self.channel = channel
        return OK

    def _rdy(self, params: list[bytes]) -> bytes | None:
        if self.state == STATE_CLOSING:
            return None  # nsqd ignores RDY after CLS
        if self.state != STATE_SUBSCRIBED:
            raise invalid("cannot RDY in current state")
        count = 1
        if len(params) > 1:
            parsed = _base10(params[1])
            if parsed is None:
                raise invalid(f"RDY could not parse count {_raw_text(params[1])}")
            count = _int64(parsed)
        max_rdy = self.nsqd.options.max_rdy_count
        if count < 0 or count > max_rdy:
            raise invalid(f"RDY count {count} out of range 0-{max_rdy}")
        self.ready_count = count
        assert self.channel is not None
        self.channel.client_ready(self, self._now)
        return None

    def _subscribed_channel(self, cmd: str) -> Channel:
        if self.state not in (STATE_SUBSCRIBED, STATE_CLOSING) or self.channel is None:
            raise invalid(f"cannot {cmd} in current state")
        return self.channel

    def _fin(self, params: list[bytes]) -> bytes | None:
        channel = self.channel
        if self.state < STATE_SUBSCRIBED or channel is None:
            raise invalid("cannot FIN in current state")
        if len(params) < 2:
            raise invalid("FIN insufficient number of params")
        msg_id = params[1]
        if len(msg_id) != MSG_ID_LENGTH:
            raise invalid("invalid message ID")
        try:
            channel.finish_message(self.id, msg_id)
        except ChannelError as err:
            raise NSQError(
                "E_FIN_FAILED", f"FIN {_raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        self.finish_count += 1
        self.in_flight_count -= 1
        self._refill = True  # one pull per received chunk, not one per FIN
        return None

    def _req(self, params: list[bytes]) -> bytes | None:
        channel = self._subscribed_channel("REQ")
        if len(params) < 3:
            raise invalid("REQ insufficient number of params")
        msg_id = _message_id(params[1])
        parsed = _base10(params[2])
        if parsed is None:
            raise invalid(f"REQ could not parse timeout {_raw_text(params[2])}")
        timeout_ns = _int64(parsed * 1_000_000)
        max_ns = round(self.nsqd.options.max_req_timeout * 1e9)
        timeout_ns = min(max(timeout_ns, 0), max_ns)
        try:
            channel.requeue_message(self.id, msg_id, timeout_ns / 1e9, self._now)
        except ChannelError as err:
            raise NSQError(
                "E_REQ_FAILED", f"REQ {_raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        self.requeue_count += 1
        self.in_flight_count -= 1
        channel.client_ready(self, self._now)
        return None

    def _touch(self, params: list[bytes]) -> bytes | None:
        channel = self._subscribed_channel("TOUCH")
        if len(params) < 2:
            raise invalid("TOUCH insufficient number of params")
        msg_id = _message_id(params[1])
        try:
            channel.touch_message(self.id, msg_id, self.msg_timeout, self._now)
        except ChannelError as err:
            raise NSQError(
                "E_TOUCH_FAILED", f"TOUCH {_raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        return None

    def _cls(self, params: list[bytes]) -> bytes | None:
        if self.state != STATE_SUBSCRIBED:
            raise invalid("cannot CLS in current state")
        self.ready_count = 0
        self.state = STATE_CLOSING
        return CLOSE_WAIT

    def _nop(self, params: list[bytes]) -> bytes | None:
        return None

    # -- publishing --------------------------------------------------------------
    def _topic_name(self, cmd: str, params: list[bytes], *, mpub: bool = False) -> str:
        name = params[1].decode("latin-1")
        if not is_valid_topic_name(name):
            # nsqd's MPUB repeats the code inside the description; clients see it that way
            prefix = "E_BAD_TOPIC " if mpub else ""
            raise NSQError(
                "E_BAD_TOPIC", f"{prefix}{cmd} topic name {go_quote(params[1])} is not valid"
            )
        return name

    def _pub(self, params: list[bytes]) -> bytes | None:
        if len(params) < 2:
            raise invalid("PUB insufficient number of parameters")
        topic_name = self._topic_name("PUB", params)
        self.parser.expect_body("PUB", self.nsqd.options.max_msg_size, message=True)
        self._pending = lambda body: self._publish("PUB", topic_name, [body.data], 0.0)
        return None

    def _dpub(self, params: list[bytes]) -> bytes | None:
        if len(params) < 3:
            raise invalid("DPUB insufficient number of parameters")
        topic_name = self._topic_name("DPUB", params)
        parsed = _base10(params[2])
        if parsed is None:
            raise invalid(f"DPUB could not parse timeout {_raw_text(params[2])}")
        timeout_ns = _int64(parsed * 1_000_000)
        max_req = self.nsqd.options.max_req_timeout
        if timeout_ns < 0 or timeout_ns > round(max_req * 1e9):
            raise invalid(f"DPUB timeout {parsed} out of range 0-{round(max_req * 1000)}")
        self.parser.expect_body("DPUB", self.nsqd.options.max_msg_size, message=True)
        delay = timeout_ns / 1e9
        self._pending = lambda body: self._publish("DPUB", topic_name, [body.data], delay)
        return None

    def _mpub(self, params: list[bytes]) -> bytes | None:
        if len(params) < 2:
            raise invalid("MPUB insufficient number of parameters")
        topic_name = self._topic_name("MPUB", params, mpub=True)
        if self._authz is not None:  # MPUB checks before it reads the body
            return self._check_auth("MPUB", topic_name, "", partial(self._mpub_body, topic_name))
        return self._mpub_body(topic_name)

    def _mpub_body(self, topic_name: str) -> bytes | None:
        # nsqd creates the topic before it reads the body
        self.nsqd.get_topic(topic_name)
        opts = self.nsqd.options
        self.parser.expect_mpub(opts.max_body_size, opts.max_msg_size)
        self._pending = lambda body: self._publish_unchecked("MPUB", topic_name, body.bodies, 0.0)
        return None

    def _publish_checked(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float
    ) -> bytes:
        """PUB and DPUB with auth: nsqd checks after reading the body."""
        publish = partial(self._publish_unchecked, cmd, topic_name, bodies, delay)
        return self._check_auth(cmd, topic_name, "", publish)  # type: ignore[return-value]

    def _publish_unchecked(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float
    ) -> bytes:
        topic = self.nsqd.get_topic(topic_name)
        try:
            topic.put_messages(bodies, delay)
        except TopicError as err:
            raise NSQError(f"E_{cmd}_FAILED", f"{cmd} failed {err}") from None
        self.pub_counts[topic_name] = self.pub_counts.get(topic_name, 0) + len(bodies)
        announcing = self.nsqd.announcing
        if announcing and topic_name in announcing:
            # a new topic: answer once the lookupds know it, as nsqd's GetTopic does
            raise Suspend(partial(_answer_after, announcing[topic_name]))
        return OK


async def _answer_after(announced: Callable[[], Awaitable[None]]) -> bytes:
    await announced()
    return OK


def _raw_text(name: bytes) -> str:
    """A peer's bytes as text that encodes back to the same bytes (nsqd echoes them raw)."""
    return name.decode("utf-8", "surrogateescape")
