"""A protocol V2 client as the rest of nsqd sees it: its state, settings and counters.

:class:`ClientState` is what channels deliver to (their ``Consumer``), what
``/stats`` reports (``StatsClient``) and what ``nsqd.clients`` holds. It is one
object that holds two others, and is neither: its
:class:`~nsqbox.nsqd.tcp.connection.Connection` (how bytes move: it writes through
its public methods) and its commands (a :class:`~nsqbox.nsqd.tcp.session.Commands`,
nsqd's being :class:`~nsqbox.nsqd.tcp.protocol_v2.ProtocolV2`: what each command
does, and the session the connection calls). :class:`ClientSettings` are what
IDENTIFY may change (:func:`nsqbox.nsqd.tcp.negotiate.identify` computes them,
:meth:`ClientState.apply` takes them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from ..domain.topic import publisher_fields
from .connection import Connection

if TYPE_CHECKING:
    import trio

    from ..domain.channel import Channel
    from ..domain.message import Message
    from ..domain.nsqd import NSQD
    from .auth import AuthClient, AuthState, ConnectionAuth
    from .session import Commands

__all__ = [
    "DEFAULT_OUTPUT_BUFFER_SIZE",
    "STATE_CLOSING",
    "STATE_INIT",
    "STATE_SUBSCRIBED",
    "ClientSettings",
    "ClientState",
]

# Client states as nsqd numbers them (they show in /stats).
STATE_INIT = 0
STATE_SUBSCRIBED = 3
STATE_CLOSING = 4

DEFAULT_OUTPUT_BUFFER_SIZE = 16 * 1024


class ClientSettings(msgspec.Struct, frozen=True):
    """What a client may set with IDENTIFY (times in seconds), as nsqd's clientV2 keeps them."""

    client_id: str
    hostname: str
    user_agent: str
    heartbeat_interval: float
    output_buffer_size: int
    output_buffer_timeout: float
    sample_rate: int
    msg_timeout: float


class ClientState:
    """One client's state and counters, and what a channel calls to deliver to it.

    ``commands`` makes the client's commands (called once, with the client: nsqd's
    :class:`~nsqbox.nsqd.tcp.protocol_v2.ProtocolV2`); the client then opens its
    :attr:`conn` on ``stream``, calling them. ``auth`` is the node's auth client (with
    ``--auth-http-address``).

    ``in_flight_count`` is written by the channel only (see
    :class:`~nsqbox.nsqd.domain.channel.Consumer`): the channel's in-flight queue is
    the one book, this its tally of the client's messages.
    """

    def __init__(
        self,
        nsqd: NSQD,
        stream: trio.abc.Stream,
        remote: tuple[str, int],
        *,
        commands: Callable[[ClientState], Commands],
        auth: AuthClient | None = None,
    ) -> None:
        opts = nsqd.options
        self.nsqd = nsqd
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
        self.msg_timeout = opts.msg_timeout
        self.output_buffer_size = DEFAULT_OUTPUT_BUFFER_SIZE
        self.output_buffer_timeout = opts.output_buffer_timeout
        self.pub_counts: dict[str, int] = {}
        self.channel: Channel | None = None
        self.in_ring = False
        #: nsqd's IsAuthEnabled: AUTH, and permission checks on SUB and the publish commands.
        self.authz: ConnectionAuth | None = None
        if opts.auth_http_addresses:
            from .auth import ConnectionAuth  # only with auth: keeps it off the start-up path

            self.authz = ConnectionAuth(auth, remote_ip=host, peer=self)
        #: What the commands do: protocol V2's handlers, the session :attr:`conn` calls.
        self.commands = commands(self)
        #: How bytes move: the reader and writer tasks, heartbeats, the output buffer.
        self.conn = Connection(
            stream,
            self.commands,
            clock=nsqd.now,
            client_timeout=opts.client_timeout,
            max_output_buffer_size=opts.max_output_buffer_size,
            parser=self.commands.parser,
        )

    def __repr__(self) -> str:
        return f"ClientV2({self.remote_address})"  # how log lines name the client

    async def run(self, initial: bytes) -> None:
        """Serve the connection until it ends; ``initial`` is what followed the magic."""
        self.nsqd.clients[self.id] = self
        await self.conn.serve(initial)

    @property
    def auth_state(self) -> AuthState | None:
        """The auth server's answer for this client (``identity``, ``authorizations``...)."""
        return self.authz.state if self.authz is not None else None

    # the transport's layers are the connection's facts; stats read them through these
    @property
    def tls_info(self) -> trio.SSLStream[trio.abc.Stream] | None:
        """The TLS layer once upgraded (cipher(), version(), getpeercert()...)."""
        return self.conn.transport.tls

    @property
    def tls(self) -> bool:
        """The connection was upgraded to TLS."""
        return self.conn.transport.tls is not None

    @property
    def snappy(self) -> bool:
        """The connection was upgraded to snappy."""
        return self.conn.transport.snappy

    @property
    def deflate(self) -> bool:
        """The connection was upgraded to deflate."""
        return self.conn.transport.deflate

    def settings(self) -> ClientSettings:
        """The current settings (what IDENTIFY starts from)."""
        return ClientSettings(
            client_id=self.client_id,
            hostname=self.hostname,
            user_agent=self.user_agent,
            heartbeat_interval=self.conn.heartbeat_interval,
            output_buffer_size=self.output_buffer_size,
            output_buffer_timeout=self.output_buffer_timeout,
            sample_rate=self.sample_rate,
            msg_timeout=self.msg_timeout,
        )

    def apply(self, settings: ClientSettings) -> None:
        """Take IDENTIFY's settings; the heartbeat ticker restarts, as nsqd's does."""
        self.client_id = settings.client_id
        self.hostname = settings.hostname
        self.user_agent = settings.user_agent
        self.output_buffer_size = settings.output_buffer_size
        self.output_buffer_timeout = settings.output_buffer_timeout
        self.sample_rate = settings.sample_rate
        self.msg_timeout = settings.msg_timeout
        self.conn.heartbeat_interval = settings.heartbeat_interval
        self.conn.restart_heartbeat()

    def publisher_fields(self) -> dict[str, str]:
        """This client as a tap records its publishes (IDENTIFY's names, its address)."""
        return publisher_fields(
            "tcp",
            client_id=self.client_id,
            hostname=self.hostname,
            user_agent=self.user_agent,
            remote_address=self.remote_address,
        )

    # -- what a channel calls ------------------------------------------------
    def can_take(self) -> bool:
        """Ready for another message: in flight below RDY (CLS and close set RDY to 0),
        and the output buffer not full (a consumer that does not read gets no more)."""
        return self.in_flight_count < self.ready_count and self.conn.out_room() > 0

    def out_room(self) -> int:
        """Bytes the output buffer may still take before deliveries pause."""
        return self.conn.out_room()

    def send_message(self, msg: Message) -> None:
        """Buffer a message frame for the writer (the channel counted it in flight)."""
        self.conn.write_message(msg)
        self.message_count += 1

    def send_messages(self, msgs: list[Message]) -> None:
        """Buffer several message frames at once (the channel counted them in flight)."""
        self.conn.write_messages(msgs)
        self.message_count += len(msgs)

    def close(self) -> None:
        """Disconnect (the channel or topic is being deleted, or the server stops)."""
        self.ready_count = 0
        self.conn.close()
