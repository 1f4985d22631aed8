"""Protocol V2's commands: one ClientV2 per TCP connection (nsqd/protocol_v2.go).

:class:`ClientV2` executes a client's commands with nsqd's rules and error
texts; which command each state accepts is one table (:data:`STATE_COMMANDS`).
Its state, settings and counters, and what channels call to deliver, are
:class:`~nsqbox.nsqd.client_state.ClientState`'s. How bytes move (the reader
and writer tasks, heartbeats, commands that must await) is the
:class:`~nsqbox.nsqd.connection.Connection` it holds; IDENTIFY's negotiation
and the TLS/compression upgrades live in :mod:`~nsqbox.nsqd.negotiate`; AUTH's
bookkeeping in :mod:`~nsqbox.nsqd.auth`. Each layer calls only the ones below it.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import trio

from ..wire.errors import NSQError, go_quote, invalid
from ..wire.frames import CLOSE_WAIT, OK, FrameType
from ..wire.message import MSG_ID_LENGTH
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from ..wire.parser import Body, Command, MPUBBody
from . import negotiate
from .channel import ChannelError
from .client_state import STATE_CLOSING, STATE_INIT, STATE_SUBSCRIBED, ClientState
from .connection import Connection, Suspend
from .options import TLS_NOT_REQUIRED
from .tls import peer_common_name
from .topic import TopicError

if TYPE_CHECKING:
    from .auth import AuthClient
    from .channel import Channel
    from .nsqd import NSQD

logger = logging.getLogger("nsqbox.nsqd")

__all__ = ["STATE_COMMANDS", "ClientV2"]

_MAX_UINT64 = (1 << 64) - 1

#: A command line's handler.
Handler = Callable[["ClientV2", list[bytes]], "bytes | None"]
#: The handler of the body a command asked for.
Continuation = Callable[[Any], "bytes | None"]
#: Publishes ``bodies`` (one PUB each when the last argument says so) and answers OK.
Publisher = Callable[[str, str, list[bytes], float, bool], None]


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


class ClientV2(ClientState):
    """One protocol V2 connection's commands (the :class:`~nsqbox.nsqd.connection.Session`)."""

    def __init__(
        self,
        nsqd: NSQD,
        stream: trio.abc.Stream,
        remote: tuple[str, int],
        *,
        tls_context: ssl.SSLContext | None = None,
        auth: AuthClient | None = None,
    ) -> None:
        super().__init__(nsqd, remote)
        opts = nsqd.options
        self.conn = Connection(
            stream,
            self,
            clock=nsqd.now,
            client_timeout=opts.client_timeout,
            max_output_buffer_size=opts.max_output_buffer_size,
        )
        self.parser = self.conn.parser
        self.parser.pub_limit = opts.max_msg_size
        #: Offered to clients that ask for ``tls_v1`` (None: TLS not configured).
        self.tls_context = tls_context
        # nsqd's IsAuthEnabled: AUTH, and permission checks on SUB and the publish commands
        if opts.auth_http_addresses:
            from .auth import ConnectionAuth  # only with auth: keeps it off the start-up path

            self._authz = ConnectionAuth(auth, remote_ip=remote[0], peer=self)
        # PUB and DPUB publish through this; with auth it checks permissions first
        self._publish: Publisher = (
            self._publish_unchecked if self._authz is None else self._publish_checked
        )
        self._pending: Continuation | None = None
        #: A FIN was executed this turn: pull from the channel once the turn ends.
        self._refill = False
        self._table: CommandTable = STATE_COMMANDS[STATE_INIT]
        if opts.tls_required != TLS_NOT_REQUIRED:
            self._table = TLS_REQUIRED_COMMANDS

    def _enter(self, state: int) -> None:
        self.state = state
        self._table = STATE_COMMANDS[state]

    # -- the connection ---------------------------------------------------------
    async def run(self, initial: bytes) -> None:
        """Serve the connection until it ends; ``initial`` is what followed the magic."""
        self.nsqd.clients[self.id] = self
        await self.conn.serve(initial)

    def on_command(self, cmd: Command) -> bytes | None:
        """Execute one command line, as this state's table says."""
        handler = self._table.handlers.get(cmd.name)
        if handler is None:
            raise invalid(self._table.unknown.format(_raw_text(cmd.name)))
        return handler(self, cmd.params)

    def on_body(self, body: Body | MPUBBody) -> bytes | None:
        """Hand a body to the command that asked for it."""
        pending = self._pending
        self._pending = None
        assert pending is not None, "a body without a command"
        return pending(body)

    def on_fins(self, ids: list[bytes]) -> list[NSQError]:
        """A run of ``FIN <id>`` lines: one pass over the channel's in-flight messages."""
        if self._table.handlers.get(b"FIN") is not ClientV2._fin:
            # refused in this state: as that many lines (the first refusal is fatal)
            for msg_id in ids:
                self.on_command(Command(b"FIN", [b"FIN", msg_id]))
            return []
        channel = self.channel
        assert channel is not None  # the table lets FIN through only once subscribed
        failed = channel.finish_messages(self.id, ids)
        done = len(ids) - len(failed)
        if done:
            self.finish_count += done
            self.in_flight_count -= done
            self._refill = True  # one pull per received chunk, not one per FIN
        return [_fin_failed(msg_id, why) for msg_id, why in failed]

    def on_pub(self, params: list[bytes], bodies: list[bytes]) -> None:
        """PUBs with the same line, bodies whole: the steps of :meth:`_pub` and its
        continuation, for each."""
        if self._table.handlers.get(b"PUB") is not ClientV2._pub:
            self.on_command(Command(b"PUB", params))  # a refusal: it raises
        self._publish("PUB", self._topic_name("PUB", params), bodies, 0.0, True)

    def after_turn(self) -> None:
        """One pull per received chunk of FINs, not one per FIN."""
        if self._refill:
            self._refill = False
            if self.channel is not None:
                self.channel.client_ready(self, self.conn.now)

    def drained(self) -> None:
        """Deliveries paused on a full output buffer may resume."""
        if self.channel is not None:
            self.channel.client_ready(self, self.conn.now)

    def reader_ended(self) -> None:
        """Nothing more for us (EOF, fatal error), before the writer flushes."""
        self.ready_count = 0

    def disconnected(self) -> None:
        """Leave the server's client list and the channel."""
        self.nsqd.clients.pop(self.id, None)
        if self.channel is not None:
            self.channel.remove_client(self)

    # -- commands --------------------------------------------------------------
    def _identify(self, params: list[bytes]) -> bytes | None:
        self.parser.expect_body("IDENTIFY", self.nsqd.options.max_body_size, message=False)
        self._pending = self._identify_body
        return None

    def _identify_body(self, body: Body) -> bytes | None:
        settings, response, upgrades = negotiate.identify(
            body.data, self.nsqd.options, self.settings(), self.tls_context
        )
        self.apply(settings)
        if not upgrades:
            return response
        # the reply goes out in the clear, then the upgrades happen with the writer held
        self.conn.write(FrameType.RESPONSE, response)
        raise Suspend(partial(self._upgrade, upgrades))

    async def _upgrade(self, upgrades: negotiate.Upgrades) -> None:
        # what the client sent behind IDENTIFY belongs to the first new layer
        initial = self.parser.take_buffered()
        conn = self.conn
        await conn.hold_writer()
        try:
            await negotiate.upgrade_transport(conn, upgrades, initial)
        finally:
            if self.tls:
                self._table = STATE_COMMANDS[self.state]  # TLS required: now satisfied
            conn.release_writer()

    def _auth(self, params: list[bytes]) -> bytes | None:
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
        if self._authz.check(cmd, topic, channel, self.conn.now):
            return then()
        raise Suspend(partial(self._recheck_auth, cmd, topic, channel, then))

    async def _recheck_auth(
        self, cmd: str, topic: str, channel: str, then: Callable[[], bytes | None]
    ) -> bytes | None:
        assert self._authz is not None
        await self._authz.refresh(
            cmd, topic, channel, tls=self.tls, common_name=self._common_name()
        )
        self.conn.refresh_now()
        return then()

    def _sub(self, params: list[bytes]) -> bytes | None:
        if self.conn.heartbeat_interval <= 0:
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
        self.channel = channel
        self._enter(STATE_SUBSCRIBED)
        return OK

    def _rdy(self, params: list[bytes]) -> bytes | None:
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
        self.channel.client_ready(self, self.conn.now)
        return None

    def _subscribed_channel(self) -> Channel:
        # the table lets channel commands through only once subscribed
        assert self.channel is not None
        return self.channel

    def _fin(self, params: list[bytes]) -> bytes | None:
        channel = self.channel
        assert channel is not None  # the table lets FIN through only once subscribed
        if len(params) < 2:
            raise invalid("FIN insufficient number of params")
        msg_id = params[1]
        if len(msg_id) != MSG_ID_LENGTH:
            raise invalid("invalid message ID")
        for failed_id, why in channel.finish_messages(self.id, [msg_id]):
            raise _fin_failed(failed_id, why)
        self.finish_count += 1
        self.in_flight_count -= 1
        self._refill = True  # one pull per received chunk, not one per FIN
        return None

    def _req(self, params: list[bytes]) -> bytes | None:
        channel = self._subscribed_channel()
        if len(params) < 3:
            raise invalid("REQ insufficient number of params")
        msg_id = _message_id(params[1])
        parsed = _base10(params[2])
        if parsed is None:
            raise invalid(f"REQ could not parse timeout {_raw_text(params[2])}")
        timeout_ns = _int64(parsed * 1_000_000)
        max_ns = round(self.nsqd.options.max_req_timeout * 1e9)
        timeout_ns = min(max(timeout_ns, 0), max_ns)
        now = self.conn.now
        try:
            channel.requeue_message(self.id, msg_id, timeout_ns / 1e9, now)
        except ChannelError as err:
            raise NSQError(
                "E_REQ_FAILED", f"REQ {_raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        self.requeue_count += 1
        self.in_flight_count -= 1
        channel.client_ready(self, now)
        return None

    def _touch(self, params: list[bytes]) -> bytes | None:
        channel = self._subscribed_channel()
        if len(params) < 2:
            raise invalid("TOUCH insufficient number of params")
        msg_id = _message_id(params[1])
        try:
            channel.touch_message(self.id, msg_id, self.msg_timeout, self.conn.now)
        except ChannelError as err:
            raise NSQError(
                "E_TOUCH_FAILED", f"TOUCH {_raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        return None

    def _cls(self, params: list[bytes]) -> bytes | None:
        self.ready_count = 0
        self._enter(STATE_CLOSING)
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
        self._pending = lambda body: self._publish("PUB", topic_name, [body.data], 0.0, False)
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
        self._pending = lambda body: self._publish("DPUB", topic_name, [body.data], delay, False)
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
        self._pending = lambda body: self._publish_unchecked(
            "MPUB", topic_name, body.bodies, 0.0, False
        )
        return None

    def _publish_checked(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float, each: bool
    ) -> None:
        """PUB and DPUB with auth: nsqd checks after reading the body (PUBs in a run ask
        the same question at the same time: one check answers for all)."""
        publish = partial(self._publish_unchecked, cmd, topic_name, bodies, delay, each)
        self._check_auth(cmd, topic_name, "", publish)

    def _publish_unchecked(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float, each: bool
    ) -> None:
        """Publish ``bodies`` as one batch (one answer), or with ``each`` as one PUB per
        body (an answer each: those before a failure are answered, then its error)."""
        topic = self.nsqd.get_topic(topic_name)
        now = self.conn.now
        done = 0
        try:
            if each:
                for body in bodies:
                    topic.put_messages([body], delay, now)
                    done += 1
            else:
                topic.put_messages(bodies, delay, now)
                done = 1
        except TopicError as err:
            self.conn.respond_ok(done)
            raise NSQError(f"E_{cmd}_FAILED", f"{cmd} failed {err}") from None
        finally:
            if done:
                count = done if each else len(bodies)
                self.pub_counts[topic_name] = self.pub_counts.get(topic_name, 0) + count
        announcing = self.nsqd.announcing
        if announcing and topic_name in announcing:
            # a new topic: answer once the lookupds know it, as nsqd's GetTopic does
            raise Suspend(partial(self._answer_after, announcing[topic_name], done))
        self.conn.respond_ok(done)

    async def _answer_after(self, announced: Callable[[], Awaitable[None]], oks: int) -> None:
        await announced()
        self.conn.respond_ok(oks)


def _fin_failed(msg_id: bytes, why: str) -> NSQError:
    return NSQError("E_FIN_FAILED", f"FIN {_raw_text(msg_id)} failed {why}", fatal=False)


def _raw_text(name: bytes) -> str:
    """A peer's bytes as text that encodes back to the same bytes (nsqd echoes them raw)."""
    return name.decode("utf-8", "surrogateescape")


class CommandTable:
    """What one state does with a command line: its handler, or the refusal for it."""

    __slots__ = ("handlers", "unknown")

    def __init__(self, handlers: dict[bytes, Handler], unknown: str) -> None:
        #: Every command the state answers, refusals included.
        self.handlers = handlers
        #: The error text for any other command (``{}``: its name, raw).
        self.unknown = unknown


def _refuse(name: str, why: str = "") -> Handler:
    def refuse(client: ClientV2, params: list[bytes]) -> bytes | None:
        raise invalid(f"cannot {name} in current state{why}")

    return refuse


def _ignore(client: ClientV2, params: list[bytes]) -> bytes | None:
    return None


_RUN, _REFUSE, _IGNORE = "run", "refuse", "ignore"
_STATES: Final = (STATE_INIT, STATE_SUBSCRIBED, STATE_CLOSING)
#: nsqd's per-state checks, all in one place: what each command does in each state.
#: The handlers check only their parameters.
_RULES: Final[dict[bytes, tuple[Handler, tuple[str, str, str]]]] = {
    #                       INIT     SUBSCRIBED CLOSING
    b"IDENTIFY": (ClientV2._identify, (_RUN, _REFUSE, _REFUSE)),
    b"AUTH": (ClientV2._auth, (_RUN, _REFUSE, _REFUSE)),
    b"SUB": (ClientV2._sub, (_RUN, _REFUSE, _REFUSE)),
    b"RDY": (ClientV2._rdy, (_REFUSE, _RUN, _IGNORE)),  # nsqd ignores RDY after CLS
    b"FIN": (ClientV2._fin, (_REFUSE, _RUN, _RUN)),
    b"REQ": (ClientV2._req, (_REFUSE, _RUN, _RUN)),
    b"TOUCH": (ClientV2._touch, (_REFUSE, _RUN, _RUN)),
    b"CLS": (ClientV2._cls, (_REFUSE, _RUN, _REFUSE)),
    b"PUB": (ClientV2._pub, (_RUN, _RUN, _RUN)),
    b"MPUB": (ClientV2._mpub, (_RUN, _RUN, _RUN)),
    b"DPUB": (ClientV2._dpub, (_RUN, _RUN, _RUN)),
    b"NOP": (ClientV2._nop, (_RUN, _RUN, _RUN)),
}


def _table(state: int) -> CommandTable:
    column = _STATES.index(state)
    handlers: dict[bytes, Handler] = {}
    for name, (handler, rules) in _RULES.items():
        rule = rules[column]
        if rule == _RUN:
            handlers[name] = handler
        elif rule == _IGNORE:
            handlers[name] = _ignore
        else:
            handlers[name] = _refuse(name.decode())
    return CommandTable(handlers, "invalid command {}")


#: Each state's commands, built from the rules once.
STATE_COMMANDS: Final = {state: _table(state) for state in _STATES}
#: Before TLS when the server requires it: IDENTIFY, and a refusal for anything else.
TLS_REQUIRED_COMMANDS: Final = CommandTable(
    {b"IDENTIFY": ClientV2._identify}, "cannot {} in current state (TLS required)"
)
