"""Protocol V2 over a trio stream: one ClientV2 per TCP connection.

Each connection runs two tasks: a reader that parses commands and executes them
synchronously (many per received chunk), and a writer that sends everything
buffered since its last send in one ``send_all`` and emits heartbeats. Messages
a channel delivers to this client are appended to the same output buffer, so a
burst of deliveries costs one wake-up and one write, not one per message.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .. import NSQ_VERSION
from ..wire.errors import NSQError, ProtocolViolation, go_quote, invalid
from ..wire.frames import CLOSE_WAIT, HEARTBEAT, OK, FrameType, encode_frame
from ..wire.identify import IdentifyResponse, decode_identify, encode_identify_response
from ..wire.message import MESSAGE_FRAME_HEADER, MSG_ID_LENGTH
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from ..wire.parser import NEED_DATA, Body, Command, CommandParser
from .channel import ChannelError
from .options import TLS_NOT_REQUIRED
from .topic import TopicError

if TYPE_CHECKING:
    from .channel import Channel
    from .message import Message
    from .nsqd import NSQD

logger = logging.getLogger("nsqbox.nsqd")

# Client states as nsqd numbers them (they show in /stats).
STATE_INIT = 0
STATE_SUBSCRIBED = 3
STATE_CLOSING = 4

RECEIVE_SIZE = 256 * 1024
DEFAULT_OUTPUT_BUFFER_SIZE = 16 * 1024
_MAX_UINT64 = (1 << 64) - 1

Handler = Callable[[list[bytes]], "bytes | None"]
Continuation = Callable[[Any], "bytes | None"]


def _base10(raw: bytes) -> int | None:
    """nsqd's ByteToBase10: digits only (empty is 0), wrapping like a uint64."""
    if raw and not raw.isdigit():
        return None
    if not raw.isascii():
        return None
    return int(raw or b"0") & _MAX_UINT64


def _int64(value: int) -> int:
    """Reinterpret a uint64 as Go's int64 (two's complement)."""
    value &= _MAX_UINT64
    return value - (1 << 64) if value >= 1 << 63 else value


def _message_id(raw: bytes) -> bytes:
    if len(raw) != MSG_ID_LENGTH:
        raise invalid("invalid message ID")
    return raw


class ClientV2:
    """One protocol V2 connection: its state, its counters, and its command handlers."""

    def __init__(self, nsqd: NSQD, stream: trio.abc.Stream, remote: tuple[str, int]) -> None:
        opts = nsqd.options
        self.nsqd = nsqd
        self.stream = stream
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
        self.tls_info: Any = None
        self.auth_state: Any = None
        self.pub_counts: dict[str, int] = {}
        self.channel: Channel | None = None
        self.in_ring = False
        self.heartbeat_interval = opts.client_timeout / 2
        self.msg_timeout = opts.msg_timeout
        self.output_buffer_size = DEFAULT_OUTPUT_BUFFER_SIZE
        self.output_buffer_timeout = opts.output_buffer_timeout
        self.parser = CommandParser()
        self._out = bytearray()
        self._wake = trio.Event()
        self._pending: Continuation | None = None
        self._refill = False
        self._tls_gate = opts.tls_required != TLS_NOT_REQUIRED
        self._closing = False
        self._cancel = trio.CancelScope()
        self._now = 0.0
        self._next_heartbeat = 0.0
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

    # -- what a channel calls ------------------------------------------------
    def can_take(self) -> bool:
        """Ready for another message: in flight below RDY (CLS and close set RDY to 0)."""
        return self.in_flight_count < self.ready_count

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
        self._closing = True
        self._cancel.cancel()

    # -- connection tasks ------------------------------------------------------
    async def run(self, initial: bytes) -> None:
        """Serve the connection until it ends; ``initial`` is what followed the magic."""
        nsqd = self.nsqd
        nsqd.clients[self.id] = self
        self._next_heartbeat = nsqd.now() + self.heartbeat_interval
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    try:
                        await self._reader(initial)
                    finally:
                        self._closing = True
                        self._wake.set()
        finally:
            nsqd.clients.pop(self.id, None)
            if self.channel is not None:
                self.channel.remove_client(self)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)

    async def _reader(self, initial: bytes) -> None:
        stream = self.stream
        if initial and not self._feed(initial):
            return
        while not self._closing:
            hb = self.heartbeat_interval
            with trio.move_on_after(hb * 2 if hb > 0 else math.inf) as scope:
                try:
                    data = await stream.receive_some(RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
            if scope.cancelled_caught:
                logger.info("PROTOCOL(V2): [%s] read timeout, closing", self)
                return
            if not data or not self._feed(data):
                return

    def _feed(self, data: bytes | bytearray) -> bool:
        """Parse and execute; False when the connection must close."""
        self.parser.receive_data(data)
        out = self._out
        was_empty = not out
        self._now = self.nsqd.now()
        try:
            self._process()
            if self._refill:
                self._refill = False
                if self.channel is not None:
                    self.channel.client_ready(self, self._now)
        except NSQError as err:
            logger.error("[%s] - %s", self, err)
            out += encode_frame(FrameType.ERROR, err.frame_body())
            self._wake.set()
            return False
        except ProtocolViolation as err:
            logger.error("[%s] - %s", self, err)
            return False
        if was_empty and out:
            self._wake.set()
        return True

    def _process(self) -> None:
        parser = self.parser
        out = self._out
        while not self._closing:
            event = parser.next_event()
            if event is NEED_DATA:
                return
            try:
                if type(event) is Command:
                    response = self._exec(event)
                else:
                    pending = self._pending
                    self._pending = None
                    assert pending is not None, "a body without a command"
                    response = pending(event)
            except NSQError as err:
                if err.fatal:
                    raise
                out += encode_frame(FrameType.ERROR, err.frame_body())
                continue
            if response is not None:
                out += encode_frame(FrameType.RESPONSE, response)

    def _exec(self, cmd: Command) -> bytes | None:
        name = cmd.name
        if name == b"IDENTIFY":
            return self._identify(cmd.params)
        handler = self._handlers.get(name)
        if self._tls_gate and not self.tls:
            raise invalid(
                f"cannot {name.decode('utf-8', 'replace')} in current state (TLS required)"
            )
        if handler is None:
            raise invalid(f"invalid command {name.decode('utf-8', 'replace')}")
        return handler(cmd.params)

    async def _writer(self) -> None:
        stream = self.stream
        nsqd = self.nsqd
        while True:
            if not self._out:
                if self._closing:
                    return
                hb = self.heartbeat_interval
                with trio.move_on_at(self._next_heartbeat if hb > 0 else math.inf):
                    await self._wake.wait()
                self._wake = trio.Event()
                hb = self.heartbeat_interval  # IDENTIFY may have changed it meanwhile
                if hb > 0 and nsqd.now() >= self._next_heartbeat:
                    self._out += encode_frame(FrameType.RESPONSE, HEARTBEAT)
                    self._next_heartbeat += hb
                if not self._out:
                    continue
            data = self._out
            self._out = bytearray()
            hb = self.heartbeat_interval
            with trio.move_on_after(hb if hb > 0 else math.inf) as scope:
                try:
                    await stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close()
                    return
            if scope.cancelled_caught:
                logger.error("[%s] write timeout, closing", self)
                self.close()
                return

    # -- commands --------------------------------------------------------------
    def _identify(self, params: list[bytes]) -> bytes | None:
        if self.state != STATE_INIT:
            raise invalid("cannot IDENTIFY in current state")
        self.parser.expect_body("IDENTIFY", self.nsqd.options.max_body_size, message=False)
        self._pending = self._identify_body
        return None

    def _identify_body(self, body: Body) -> bytes | None:
        try:
            data = decode_identify(body.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise NSQError("E_BAD_BODY", "IDENTIFY failed to decode JSON body") from None
        opts = self.nsqd.options
        self.client_id = data.client_id
        self.hostname = data.hostname
        self.user_agent = data.user_agent
        try:
            self._apply_identify(
                data.heartbeat_interval,
                data.output_buffer_size,
                data.output_buffer_timeout,
                data.sample_rate,
                data.msg_timeout,
            )
        except ValueError as err:
            raise NSQError("E_BAD_BODY", f"IDENTIFY {err}") from None
        if not data.feature_negotiation:
            return OK
        deflate = opts.deflate and data.deflate and _COMPRESSION.deflate
        level = data.deflate_level if deflate and data.deflate_level > 0 else 6
        level = min(level, opts.max_deflate_level)
        snappy = opts.snappy and data.snappy and _COMPRESSION.snappy
        if deflate and snappy:
            raise NSQError("E_IDENTIFY_FAILED", "cannot enable both deflate and snappy compression")
        response = IdentifyResponse(
            max_rdy_count=opts.max_rdy_count,
            version=NSQ_VERSION,
            max_msg_timeout=round(opts.max_msg_timeout * 1000),
            msg_timeout=round(self.msg_timeout * 1000),
            tls_v1=False,
            deflate=deflate,
            deflate_level=level,
            max_deflate_level=opts.max_deflate_level,
            snappy=snappy,
            sample_rate=self.sample_rate,
            auth_required=bool(opts.auth_http_addresses),
            output_buffer_size=self.output_buffer_size,
            output_buffer_timeout=round(self.output_buffer_timeout * 1000),
        )
        return encode_identify_response(response)

    def _apply_identify(
        self, heartbeat: int, buf_size: int, buf_timeout: int, sample_rate: int, msg_timeout: int
    ) -> None:
        opts = self.nsqd.options
        if heartbeat == -1:
            self.heartbeat_interval = 0.0
        elif heartbeat == 0:
            pass
        elif 1000 <= heartbeat <= round(opts.max_heartbeat_interval * 1000):
            self.heartbeat_interval = heartbeat / 1000
        else:
            raise ValueError(f"heartbeat interval ({heartbeat}) is invalid")
        # nsqd restarts the heartbeat ticker when IDENTIFY arrives
        self._next_heartbeat = self._now + self.heartbeat_interval
        self._wake.set()

        if buf_timeout == -1:
            self.output_buffer_timeout = 0.0
        elif buf_timeout == 0:
            pass
        elif (
            round(opts.min_output_buffer_timeout * 1000)
            <= buf_timeout
            <= round(opts.max_output_buffer_timeout * 1000)
        ):
            self.output_buffer_timeout = buf_timeout / 1000
        else:
            raise ValueError(f"output buffer timeout ({buf_timeout}) is invalid")
        if buf_size == -1:
            self.output_buffer_size = 1
            self.output_buffer_timeout = 0.0
        elif buf_size == 0:
            pass
        elif 64 <= buf_size <= opts.max_output_buffer_size:
            self.output_buffer_size = buf_size
        else:
            raise ValueError(f"output buffer size ({buf_size}) is invalid")

        if not 0 <= sample_rate <= 99:
            raise ValueError(f"sample rate ({sample_rate}) is invalid")
        self.sample_rate = sample_rate

        if msg_timeout == 0:
            pass
        elif 1000 <= msg_timeout <= round(opts.max_msg_timeout * 1000):
            self.msg_timeout = msg_timeout / 1000
        else:
            raise ValueError(f"msg timeout ({msg_timeout}) is invalid")

    def _auth(self, params: list[bytes]) -> bytes | None:
        if self.state != STATE_INIT:
            raise invalid("cannot AUTH in current state")
        if len(params) != 1:
            raise invalid("AUTH invalid number of parameters")
        self.parser.expect_body("AUTH", self.nsqd.options.max_body_size, message=False)
        self._pending = self._auth_body
        return None

    def _auth_body(self, body: Body) -> bytes | None:
        if self.auth_state is not None:
            raise invalid("AUTH already set")
        if not self.nsqd.options.auth_http_addresses:
            raise NSQError("E_AUTH_DISABLED", "AUTH disabled")
        raise NSQError("E_AUTH_FAILED", "AUTH failed")

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
                raise invalid(f"RDY could not parse count {params[1].decode('latin-1')}")
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
                "E_FIN_FAILED", f"FIN {msg_id.decode('latin-1')} failed {err}", fatal=False
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
            raise invalid(f"REQ could not parse timeout {params[2].decode('latin-1')}")
        timeout_ns = _int64(parsed * 1_000_000)
        max_ns = round(self.nsqd.options.max_req_timeout * 1e9)
        timeout_ns = min(max(timeout_ns, 0), max_ns)
        try:
            channel.requeue_message(self.id, msg_id, timeout_ns / 1e9, self._now)
        except ChannelError as err:
            raise NSQError(
                "E_REQ_FAILED", f"REQ {msg_id.decode('latin-1')} failed {err}", fatal=False
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
                "E_TOUCH_FAILED", f"TOUCH {msg_id.decode('latin-1')} failed {err}", fatal=False
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
            raise invalid(f"DPUB could not parse timeout {params[2].decode('latin-1')}")
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
        # nsqd creates the topic before it reads the body
        self.nsqd.get_topic(topic_name)
        opts = self.nsqd.options
        self.parser.expect_mpub(opts.max_body_size, opts.max_msg_size)
        self._pending = lambda body: self._publish("MPUB", topic_name, body.bodies, 0.0)
        return None

    def _publish(self, cmd: str, topic_name: str, bodies: list[bytes], delay: float) -> bytes:
        topic = self.nsqd.get_topic(topic_name)
        try:
            topic.put_messages(bodies, delay)
        except TopicError as err:
            raise NSQError(f"E_{cmd}_FAILED", f"{cmd} failed {err}") from None
        self.pub_counts[topic_name] = self.pub_counts.get(topic_name, 0) + len(bodies)
        return OK


class _Compression:
    """Which compression upgrades this build can perform (the transport layer turns them on)."""

    snappy = False
    deflate = False


_COMPRESSION = _Compression()
