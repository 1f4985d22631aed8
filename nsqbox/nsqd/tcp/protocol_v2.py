"""Protocol V2's commands: one ProtocolV2 per TCP connection (nsqd/protocol_v2.go).

:class:`ProtocolV2` executes a client's commands with nsqd's rules and error
texts; which command each state accepts is one table (:data:`STATE_COMMANDS`,
built by :mod:`~nsqbox.nsqd.tcp.command_table`), and parameters are read as nsqd reads
them (:mod:`~nsqbox.nsqd.tcp.command_params`). It is what a client's commands do, not
the client: the :class:`~nsqbox.nsqd.tcp.client_state.ClientState` (state, settings,
counters, what channels deliver to) holds it beside the
:class:`~nsqbox.nsqd.tcp.connection.Connection` that moves the bytes and calls it as its
session; :func:`new_client` makes the three. IDENTIFY's negotiation and the upgrades live
in :mod:`~nsqbox.nsqd.tcp.negotiate`; AUTH's bookkeeping in :mod:`~nsqbox.nsqd.tcp.auth`.
"""

from __future__ import annotations

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
from .connection import Suspend
from .tls import peer_common_name

if TYPE_CHECKING:
    from ..domain.channel import Channel
    from ..domain.nsqd import NSQD
    from .auth import AuthClient

__all__ = ["STATE_COMMANDS", "ProtocolV2", "new_client"]

#: A command's handler: one command line, or a run of lines of that command.
Handler = Callable[["ProtocolV2", CommandEvent], "bytes | None"]
#: The handler of the body a command asked for.
Continuation = Callable[[Any], "bytes | None"]
#: Publishes ``bodies`` (PUB, DPUB: one message and one ``OK`` each), their size (or -1).
Publisher = Callable[[str, str, list[bytes], float, int], None]


def new_client(
    nsqd: NSQD,
    stream: trio.abc.Stream,
    remote: tuple[str, int],
    *,
    tls_context: ssl.SSLContext | None = None,
    auth: AuthClient | None = None,
) -> ClientState:
    """A new protocol V2 connection's client, holding its connection and its commands."""
    commands = partial(ProtocolV2, tls_context=tls_context)
    return ClientState(nsqd, stream, remote, commands=commands, auth=auth)


class ProtocolV2:
    """One client's commands (the :class:`~nsqbox.nsqd.tcp.session.Session` its connection
    calls). ``client`` holds it, and its connection (``client.conn``, opened once this is
    made); ``tls_context`` is offered to clients that ask for ``tls_v1``."""

    __slots__ = (
        "_authz",
        "_pending",
        "_publish",
        "_refill",
        "_table",
        "client",
        "nsqd",
        "parser",
        "tls_context",
    )

    def __init__(self, client: ClientState, *, tls_context: ssl.SSLContext | None = None) -> None:
        #: Whose commands these are: every state and counter they change is the client's.
        self.client = client
        self.nsqd = nsqd = client.nsqd
        opts = nsqd.options
        #: Ours: FIN runs and whole PUBs (runs) on, and told which body to read next.
        self.parser = CommandParser(fin_runs=True, pub_limit=opts.max_msg_size)
        #: Offered to clients that ask for ``tls_v1`` (None: TLS not configured).
        self.tls_context = tls_context
        self._authz = client.authz
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

    def __repr__(self) -> str:
        return repr(self.client)  # the connection's log lines name the client

    def _enter(self, state: int) -> None:
        self.client.state = state
        self._table = STATE_COMMANDS[state]

    # -- what the connection calls -----------------------------------------------
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
            client = self.client
            if client.channel is not None:
                client.channel.client_ready(client, client.conn.now)

    def drained(self) -> None:
        """Deliveries paused on a full output buffer may resume."""
        client = self.client
        if client.channel is not None:
            client.channel.client_ready(client, client.conn.now)

    def reader_ended(self) -> None:
        """Nothing more for the client (EOF, fatal error), before the writer flushes."""
        self.client.ready_count = 0

    def disconnected(self) -> None:
        """The client leaves the server's client list and its channel."""
        client = self.client
        self.nsqd.clients.pop(client.id, None)
        if client.channel is not None:
            client.channel.remove_client(client)

    # -- commands --------------------------------------------------------------
    def _identify(self, cmd: CommandEvent) -> bytes | None:
        self.parser.expect_body("IDENTIFY", self.nsqd.options.max_body_size, message=False)
        self._pending = self._identify_body
        return None

    def _identify_body(self, body: Body) -> bytes | None:
        client = self.client
        settings, response, upgrades = negotiate.identify(
            body.data, self.nsqd.options, client.settings(), self.tls_context
        )
        client.apply(settings)
        if not upgrades:
            return response
        # the reply goes out in the clear, then the upgrades happen with the writer held
        client.conn.write(FrameType.RESPONSE, response)
        raise Suspend(partial(self._upgrade, upgrades))

    async def _upgrade(self, upgrades: negotiate.Upgrades) -> None:
        # what the client sent behind IDENTIFY belongs to the first new layer
        initial = self.parser.take_buffered()
        client = self.client
        conn = client.conn
        await conn.hold_writer()
        negotiate.log_upgrades(client, upgrades)
        try:
            transport = await negotiate.upgrade_transport(conn.transport, upgrades, initial)
            conn.use(transport)
            await negotiate.confirm_upgrades(transport)
        finally:
            if client.tls:
                self._table = STATE_COMMANDS[client.state]  # TLS required: now satisfied
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
            authz.authenticate,
            bytes(body.data),
            tls=self.client.tls,
            common_name=self._common_name(),
        )
        raise Suspend(authenticate)

    def _common_name(self) -> str:
        """The client certificate's subject CN, which the auth server is told."""
        tls_info = self.client.tls_info
        return peer_common_name(tls_info) if tls_info is not None else ""

    def _check_auth(
        self, cmd: str, topic: str, channel: str, then: Callable[[], bytes | None]
    ) -> bytes | None:
        """nsqd's CheckAuth, then ``then()``; suspends to ask again when the answer expired."""
        assert self._authz is not None
        if self._authz.check(cmd, topic, channel, self.client.conn.now):
            return then()
        raise Suspend(partial(self._recheck_auth, cmd, topic, channel, then))

    async def _recheck_auth(
        self, cmd: str, topic: str, channel: str, then: Callable[[], bytes | None]
    ) -> bytes | None:
        assert self._authz is not None
        await self._authz.refresh(
            cmd, topic, channel, tls=self.client.tls, common_name=self._common_name()
        )
        self.client.conn.refresh_now()
        return then()

    def _sub(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        if self.client.conn.heartbeat_interval <= 0:
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
            channel.add_client(self.client)
        except ChannelError as err:
            raise NSQError("E_SUB_FAILED", f"SUB failed {err}") from None
        self.client.channel = channel
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
        client = self.client
        client.ready_count = count
        assert client.channel is not None
        client.channel.client_ready(client, client.conn.now)
        return None

    def _subscribed_channel(self) -> Channel:
        # the table lets channel commands through only once subscribed
        channel = self.client.channel
        assert channel is not None
        return channel

    def _fin(self, cmd: CommandEvent) -> bytes | None:
        if isinstance(cmd, FinRun):
            ids = cmd.ids  # lines the parser found to be plain FINs: checked
        else:
            params = cmd.params
            if len(params) < 2:
                raise invalid("FIN insufficient number of params")
            ids = [message_id(params[1])]
        client = self.client
        channel = self._subscribed_channel()
        # one pass, however many; the channel's in-flight book counts them out
        failed = channel.finish_messages(client, ids, client.conn.now)
        done = len(ids) - len(failed)
        if done:
            client.finish_count += done
            self._refill = True  # one pull per received chunk, not one per FIN
        for msg_id, why in failed:  # in order: the FINs that took have no answer
            client.conn.write(FrameType.ERROR, fin_failed(msg_id, why).frame_body())
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
        client = self.client
        now = client.conn.now
        try:
            channel.requeue_message(client, msg_id, timeout_ns / 1e9, now)
        except ChannelError as err:
            raise NSQError(
                "E_REQ_FAILED", f"REQ {raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        client.requeue_count += 1
        channel.client_ready(client, now)
        return None

    def _touch(self, cmd: CommandEvent) -> bytes | None:
        params = cmd.params
        channel = self._subscribed_channel()
        if len(params) < 2:
            raise invalid("TOUCH insufficient number of params")
        msg_id = message_id(params[1])
        client = self.client
        try:
            channel.touch_message(client, msg_id, client.msg_timeout, client.conn.now)
        except ChannelError as err:
            raise NSQError(
                "E_TOUCH_FAILED", f"TOUCH {raw_text(msg_id)} failed {err}", fatal=False
            ) from None
        return None

    def _cls(self, cmd: CommandEvent) -> bytes | None:
        self.client.ready_count = 0
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
            self._publish("PUB", topic_name, cmd.bodies, 0.0, cmd.nbytes)
            return None
        self.parser.expect_body("PUB", self.nsqd.options.max_msg_size, message=True)
        self._pending = lambda body: self._publish("PUB", topic_name, [body.data], 0.0, -1)
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
        self._pending = lambda body: self._publish("DPUB", topic_name, [body.data], delay, -1)
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
        self._pending = lambda body: self._publish_batch(topic_name, body.bodies, body.packed)
        return None

    def _publish_checked(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float, nbytes: int
    ) -> None:
        """PUB and DPUB with auth, checked after the body as nsqd does (once for a run)."""
        publish = partial(self._publish_each, cmd, topic_name, bodies, delay, nbytes)
        self._check_auth(cmd, topic_name, "", publish)

    def _publish_each(
        self, cmd: str, topic_name: str, bodies: list[bytes], delay: float, nbytes: int
    ) -> None:
        """PUB and DPUB: each body one message and one ``OK`` (a run of PUBs: those before
        a failure are answered, then its error; ``nbytes``: their size, or -1)."""
        topic, client = self.nsqd.get_topic(topic_name), self.client
        if (journal := self.nsqd.journal) is not None and journal.source != client.id:
            journal.publisher(client)  # who publishes, for the journal (a call if it changed)
        done = 0
        try:
            done = topic.put_each(bodies, delay, client.conn.now, client, nbytes)
        except TopicError as err:
            done = err.done
            client.conn.respond_ok(done)
            raise NSQError(f"E_{cmd}_FAILED", f"{cmd} failed {err}") from None
        finally:
            if done:
                pub_counts = client.pub_counts
                pub_counts[topic_name] = pub_counts.get(topic_name, 0) + done
        self._answer(topic_name, done)

    def _publish_batch(self, topic_name: str, bodies: list[bytes], packed: bytes) -> None:
        """MPUB: the bodies as one batch, one ``OK`` (``packed``: as the parser's
        :class:`~nsqbox.wire.parser.MPUBBody` has them)."""
        topic = self.nsqd.get_topic(topic_name)
        client = self.client
        if (journal := self.nsqd.journal) is not None:
            journal.publisher(client)  # who publishes, for the journal
        try:
            topic.put_messages(bodies, 0.0, client.conn.now, client, packed=packed)
        except TopicError as err:
            raise NSQError("E_MPUB_FAILED", f"MPUB failed {err}") from None
        pub_counts = client.pub_counts
        pub_counts[topic_name] = pub_counts.get(topic_name, 0) + len(bodies)
        self._answer(topic_name, 1)

    def _answer(self, topic_name: str, oks: int) -> None:
        """Answer ``OK`` ``oks`` times; for a new topic once the lookupds know it, as
        nsqd's GetTopic does."""
        announcing = self.nsqd.announcing
        if announcing and topic_name in announcing:
            raise Suspend(partial(self._answer_after, announcing[topic_name], oks))
        self.client.conn.respond_ok(oks)

    async def _answer_after(self, announced: Callable[[], Awaitable[None]], oks: int) -> None:
        await announced()
        self.client.conn.respond_ok(oks)


def _refuse(name: str, why: str = "") -> Handler:
    def refuse(commands: ProtocolV2, cmd: CommandEvent) -> bytes | None:
        raise invalid(f"cannot {name} in current state{why}")

    return refuse


def _ignore(commands: ProtocolV2, cmd: CommandEvent) -> bytes | None:
    return None


_STATES: Final = (STATE_INIT, STATE_SUBSCRIBED, STATE_CLOSING)
#: nsqd's per-state checks, all in one place: what each command does in each state.
#: The handlers check only their parameters.
_RULES: Final[dict[bytes, tuple[Handler, tuple[str, str, str]]]] = {
    #                       INIT     SUBSCRIBED CLOSING
    b"IDENTIFY": (ProtocolV2._identify, (RUN, REFUSE, REFUSE)),
    b"AUTH": (ProtocolV2._auth, (RUN, REFUSE, REFUSE)),
    b"SUB": (ProtocolV2._sub, (RUN, REFUSE, REFUSE)),
    b"RDY": (ProtocolV2._rdy, (REFUSE, RUN, IGNORE)),  # nsqd ignores RDY after CLS
    b"FIN": (ProtocolV2._fin, (REFUSE, RUN, RUN)),
    b"REQ": (ProtocolV2._req, (REFUSE, RUN, RUN)),
    b"TOUCH": (ProtocolV2._touch, (REFUSE, RUN, RUN)),
    b"CLS": (ProtocolV2._cls, (REFUSE, RUN, REFUSE)),
    b"PUB": (ProtocolV2._pub, (RUN, RUN, RUN)),
    b"MPUB": (ProtocolV2._mpub, (RUN, RUN, RUN)),
    b"DPUB": (ProtocolV2._dpub, (RUN, RUN, RUN)),
    b"NOP": (ProtocolV2._nop, (RUN, RUN, RUN)),
}


#: Each state's commands, built from the rules once.
STATE_COMMANDS: Final = build_tables(
    _RULES, _STATES, refuse=_refuse, ignore=_ignore, unknown="invalid command {}"
)
#: Before TLS when the server requires it: IDENTIFY, and a refusal for anything else.
TLS_REQUIRED_COMMANDS: Final = CommandTable[Handler](
    {b"IDENTIFY": ProtocolV2._identify}, "cannot {} in current state (TLS required)"
)
