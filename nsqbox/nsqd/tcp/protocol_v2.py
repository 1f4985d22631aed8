"""Protocol V2's commands: one ClientV2 per TCP connection (nsqd/protocol_v2.go).

:class:`ClientV2` executes a client's commands with nsqd's rules and error
texts; which command each state accepts is one table (:data:`STATE_COMMANDS`,
built by :mod:`~nsqbox.nsqd.tcp.command_table`), and parameters are read as nsqd reads
them (:mod:`~nsqbox.nsqd.tcp.command_params`).
Its state, settings and counters, and what channels call to deliver, are
:class:`~nsqbox.nsqd.tcp.client_state.ClientState`'s. How bytes move (the reader
and writer tasks, heartbeats, commands that must await) is the
:class:`~nsqbox.nsqd.tcp.connection.Connection` it holds; IDENTIFY's negotiation
and the TLS/compression upgrades live in :mod:`~nsqbox.nsqd.tcp.negotiate`; AUTH's
bookkeeping in :mod:`~nsqbox.nsqd.tcp.auth`. Each layer calls only the ones below it.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import trio

from ...wire.errors import NSQError, go_quote, invalid
from ...wire.frames import CLOSE_WAIT, OK, FrameType
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ...wire.parser import Body, CommandEvent, CommandParser, FinRun, MPUBBody, Pub
from ..domain.channel import ChannelError
from ..domain.options import TLS_NOT_REQUIRED
from ..domain.topic import TopicError
from . import negotiate
from .client_state import STATE_CLOSING, STATE_INIT, STATE_SUBSCRIBED, ClientState
from .command_params import base10, fin_failed, int64, message_id, raw_text
from .command_table import IGNORE, REFUSE, RUN, CommandTable, build_tables
from .connection import Connection, Suspend
from .tls import peer_common_name

if TYPE_CHECKING:
    from ..domain.channel import Channel
    from ..domain.nsqd import NSQD
    from .auth import AuthClient

logger = logging.getLogger("nsqbox.nsqd")

__all__ = ["STATE_COMMANDS", "ClientV2"]

#: A command's handler: one command line, or a run of lines of that command.
Handler = Callable[["ClientV2", CommandEvent], "bytes | None"]
#: The handler of the body a command asked for.
Continuation = Callable[[Any], "bytes | None"]
#: Publishes ``bodies`` (PUB, DPUB: one message and one ``OK`` each).
Publisher = Callable[[str, str, list[bytes], float], None]


class ClientV2(ClientState):
    """One protocol V2 connection's commands (the :class:`~nsqbox.nsqd.tcp.connection.Session`)."""

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
        #: Ours: FIN runs and whole PUBs (runs) on, and told which body to read next.
        self.parser = CommandParser(fin_runs=True, pub_limit=opts.max_msg_size)
        self.conn = Connection(
            stream,
            self,
            clock=nsqd.now,
            client_timeout=opts.client_timeout,
            max_output_buffer_size=opts.max_output_buffer_size,
            parser=self.parser,
        )
        #: Offered to clients that ask for ``tls_v1`` (None: TLS not configured).
        self.tls_context = tls_context
        # nsqd's IsAuthEnabled: AUTH, and permission checks on SUB and the publish commands
        if opts.auth_http_addresses:
            from .auth import ConnectionAuth  # only with auth: keeps it off the start-up path

            self._authz = ConnectionAuth(auth, remote_ip=remote[0], peer=self)
        # PUB and DPUB publish through this; with auth it checks permissions first
        self._publish: Publisher = (
            self._publish_each if self._authz is None else self._publish_checked
        )
        self._pending: Continuation | None = None
        #: A FIN was executed this turn: pull from the channel once the turn ends.
        self._refill = False
        self._table: CommandTable[Handler] = STATE_COMMANDS[STATE_INIT]
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

    def on_command(self, cmd: CommandEvent) -> bytes | None:
        """Execute a command line, or a run of lines of one command, as this state's
        table says: one handler per command either way."""
        handler = self._table.handlers.get(cmd.name)
        if handler is None:
            raise invalid(self._table.unknown.format(raw_text(cmd.name)))
        return handler(self, cmd)

    def on_body(self, body: Body | MPUBBody) -> bytes | None:
        """Hand a body to the command that asked for it."""
        pending = self._pending
        self._pending = None
        assert pending is not None, "a body without a command"
        return pending(body)

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
    def _identify(self, cmd: CommandEvent) -> bytes | None:
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
        negotiate.log_upgrades(self, upgrades)
        try:
            transport = await negotiate.upgrade_transport(conn.transport, upgrades, initial)
            conn.use(transport)
            await negotiate.confirm_upgrades(transport)
        finally:
            if self.tls:
                self._table = STATE_COMMANDS[self.state]  # TLS required: now satisfied
            conn.release_writer()

    def _auth(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
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

    def _sub(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
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

    def _rdy(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        count = 1
        if len(params) > 1:
            parsed = base10(params[1])
            if parsed is None:
                raise invalid(f"RDY could not parse count {raw_text(params[1])}")
            count = int64(parsed)
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

    def _fin(self, cmd: CommandEvent) -> bytes | None:
        if isinstance(cmd, FinRun):
            ids = cmd.ids  # lines the parser found to be plain FINs: checked
        else:
            params = cmd.params
            if len(params) < 2:
                raise invalid("FIN insufficient number of params")
            ids = [message_id(params[1])]
        channel = self._subscribed_channel()
        failed = channel.finish_messages(self.id, ids)  # one pass, however many
        done = len(ids) - len(failed)
        if done:
            self.finished(done)
            self._refill = True  # one pull per received chunk, not one per FIN
        for msg_id, why in failed:  # in order: the FINs that took have no answer
            self.conn.write(FrameType.ERROR, fin_failed(msg_id, why).frame_body())
        return None

    def _req(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        channel = self._subscribed_channel()
        if len(params) < 3:
            raise invalid("REQ insufficient number of params")
        msg_id = message_id(params[1])
        parsed = base10(params[2])
        if parsed is None:
            raise invalid(f"REQ could not parse timeout {raw_text(params[2])}")
        timeout_ns = int64(parsed * 1_000_000)
        max_ns = round(self.nsqd.options.max_req_timeout * 1e9)
        timeout_ns = min(max(timeout_ns, 0), max_ns)
        now = self.conn.now
        try:
            channel.requeue_message(self.id, msg_id, timeout_ns / 1e9, now)
        except ChannelError as err:
            raise NSQError(
                "E_REQ_FAILED", f"REQ {raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        self.requeued()
        channel.client_ready(self, now)
        return None

    def _touch(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        channel = self._subscribed_channel()
        if len(params) < 2:
            raise invalid("TOUCH insufficient number of params")
        msg_id = message_id(params[1])
        try:
            channel.touch_message(self.id, msg_id, self.msg_timeout, self.conn.now)
        except ChannelError as err:
            raise NSQError(
                "E_TOUCH_FAILED", f"TOUCH {raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        return None

    def _cls(self, cmd: CommandEvent) -> bytes | None:
        self.ready_count = 0
        self._enter(STATE_CLOSING)
        return CLOSE_WAIT

    def _nop(self, cmd: CommandEvent) -> bytes | None:
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

    def _pub(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        if len(params) < 2:
            raise invalid("PUB insufficient number of parameters")
        topic_name = self._topic_name("PUB", params)
        if isinstance(cmd, Pub):  # the bodies came whole behind their lines
            self._publish("PUB", topic_name, cmd.bodies, 0.0)
            return None
        self.parser.expect_body("PUB", self.nsqd.options.max_msg_size, message=True)
        self._pending = lambda body: self._publish("PUB", topic_name, [body.data], 0.0)
        return None

    def _dpub(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        if len(params) < 3:
            raise invalid("DPUB insufficient number of parameters")
        topic_name = self._topic_name("DPUB", params)
        parsed = base10(params[2])
        if parsed is None:
            raise invalid(f"DPUB could not parse timeout {raw_text(params[2])}")
        timeout_ns = int64(parsed * 1_000_000)
        max_req = self.nsqd.options.max_req_timeout
        if timeout_ns < 0 or timeout_ns > round(max_req * 1e9):
            raise invalid(f"DPUB timeout {parsed} out of range 0-{round(max_req * 1000)}")
        self.parser.expect_body("DPUB", self.nsqd.options.max_msg_size, message=True)
        delay = timeout_ns / 1e9
        self._pending = lambda body: self._publish("DPUB", topic_name, [body.data], delay)
        return None

    def _mpub(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
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
        self._pending = lambda body: self._publish_batch(topic_name, body.bodies)
        return None

    def _publish_checked(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float
    ) -> None:
        """PUB and DPUB with auth: nsqd checks after reading the body (PUBs in a run ask
        the same question at the same time: one check answers for all)."""
        publish = partial(self._publish_each, cmd, topic_name, bodies, delay)
        self._check_auth(cmd, topic_name, "", publish)

    def _publish_each(self, cmd: str, topic_name: str, bodies: list[bytes], delay: float) -> None:
        """PUB and DPUB: each body one message and one ``OK`` (a run of PUBs: those before
        a failure are answered, then its error)."""
        topic = self.nsqd.get_topic(topic_name)
        now = self.conn.now
        done = 0
        if (journal := self.nsqd.journal) is not None:
            journal.publisher(self)  # who publishes, for the journal
        try:
            for body in bodies:
                topic.put_messages([body], delay, now)
                done += 1
        except TopicError as err:
            self.conn.respond_ok(done)
            raise NSQError(f"E_{cmd}_FAILED", f"{cmd} failed {err}") from None
        finally:
            if done:
                self.pub_counts[topic_name] = self.pub_counts.get(topic_name, 0) + done
        self._answer(topic_name, done)

    def _publish_batch(self, topic_name: str, bodies: list[bytes]) -> None:
        """MPUB: the bodies as one batch, one ``OK``."""
        topic = self.nsqd.get_topic(topic_name)
        if (journal := self.nsqd.journal) is not None:
            journal.publisher(self)  # who publishes, for the journal
        try:
            topic.put_messages(bodies, 0.0, self.conn.now)
        except TopicError as err:
            raise NSQError("E_MPUB_FAILED", f"MPUB failed {err}") from None
        self.pub_counts[topic_name] = self.pub_counts.get(topic_name, 0) + len(bodies)
        self._answer(topic_name, 1)

    def _answer(self, topic_name: str, oks: int) -> None:
        """Answer ``OK`` ``oks`` times; for a new topic once the lookupds know it, as
        nsqd's GetTopic does."""
        announcing = self.nsqd.announcing
        if announcing and topic_name in announcing:
            raise Suspend(partial(self._answer_after, announcing[topic_name], oks))
        self.conn.respond_ok(oks)

    async def _answer_after(self, announced: Callable[[], Awaitable[None]], oks: int) -> None:
        await announced()
        self.conn.respond_ok(oks)


def _refuse(name: str, why: str = "") -> Handler:
    def refuse(client: ClientV2, cmd: CommandEvent) -> bytes | None:
        raise invalid(f"cannot {name} in current state{why}")

    return refuse


def _ignore(client: ClientV2, cmd: CommandEvent) -> bytes | None:
    return None


_STATES: Final = (STATE_INIT, STATE_SUBSCRIBED, STATE_CLOSING)
#: nsqd's per-state checks, all in one place: what each command does in each state.
#: The handlers check only their parameters.
_RULES: Final[dict[bytes, tuple[Handler, tuple[str, str, str]]]] = {
    #                       INIT     SUBSCRIBED CLOSING
    b"IDENTIFY": (ClientV2._identify, (RUN, REFUSE, REFUSE)),
    b"AUTH": (ClientV2._auth, (RUN, REFUSE, REFUSE)),
    b"SUB": (ClientV2._sub, (RUN, REFUSE, REFUSE)),
    b"RDY": (ClientV2._rdy, (REFUSE, RUN, IGNORE)),  # nsqd ignores RDY after CLS
    b"FIN": (ClientV2._fin, (REFUSE, RUN, RUN)),
    b"REQ": (ClientV2._req, (REFUSE, RUN, RUN)),
    b"TOUCH": (ClientV2._touch, (REFUSE, RUN, RUN)),
    b"CLS": (ClientV2._cls, (REFUSE, RUN, REFUSE)),
    b"PUB": (ClientV2._pub, (RUN, RUN, RUN)),
    b"MPUB": (ClientV2._mpub, (RUN, RUN, RUN)),
    b"DPUB": (ClientV2._dpub, (RUN, RUN, RUN)),
    b"NOP": (ClientV2._nop, (RUN, RUN, RUN)),
}


#: Each state's commands, built from the rules once.
STATE_COMMANDS: Final = build_tables(
    _RULES, _STATES, refuse=_refuse, ignore=_ignore, unknown="invalid command {}"
)
#: Before TLS when the server requires it: IDENTIFY, and a refusal for anything else.
TLS_REQUIRED_COMMANDS: Final = CommandTable[Handler](
    {b"IDENTIFY": ClientV2._identify}, "cannot {} in current state (TLS required)"
)
