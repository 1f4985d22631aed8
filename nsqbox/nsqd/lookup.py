"""nsqd's side of discovery: registering with nsqlookupds (nsqd/lookup.go, lookup_peer.go).

For each ``--lookupd-tcp-address`` nsqd keeps one V1 connection. On every
(re)connect it sends IDENTIFY, then REGISTER for every topic and channel it
has; afterwards it forwards each create (REGISTER) and delete (UNREGISTER) as
it happens, and PINGs every 15 seconds. A lookupd that goes away is dialled
again at the next command or PING tick, and the full registration is rebuilt
then, so commands issued while disconnected are simply dropped.

When a topic is created at runtime nsqd asks the lookupds' HTTP ``/channels``
for the channels consumers already know and creates them (``#ephemeral`` ones
excepted) before the topic starts delivering, so no early message misses a
channel. Real nsqd blocks the publisher for that query; here the topic holds
its messages until :meth:`Topic.start` instead, which has the same effect.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec
import trio

from .. import NSQ_VERSION
from ..net.addresses import format_address, split_host_port
from ..wire.lookupd import (
    MAGIC_V1,
    ResponseReader,
    encode_identify,
    encode_ping,
    encode_register,
    encode_unregister,
)
from ..wire.names import is_ephemeral, is_valid_channel_name
from ..wire.peer_json import PeerJSONError, decode_peer_json
from .domain.channel import Channel
from .domain.nsqd import NSQD
from .domain.topic import Topic
from .lookup_peer import (
    IO_TIMEOUT,
    SESSION_ERRORS,
    LookupdRefused,
    LookupPeer,
    idle_until,
    info_decoder,
    roundtrip,
)

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("nsqbox.nsqd.lookup")

__all__ = [
    "PING_INTERVAL",
    "LookupService",
    "lookup_loop",
    "lookup_service",
    "lookupd_http_addresses",
    "set_lookupd_addresses",
]

#: nsqd's lookup ticker: heartbeat (and reconnect attempt) period.
PING_INTERVAL = 15.0


class LookupService:
    """nsqd's lookupd registration: one connection task per lookupd address.

    Run it with :meth:`run` (or :func:`lookup_loop`); change the addresses at
    runtime with :meth:`set_addresses`. :func:`~.server.serve_nsqd` makes one and hands
    it to what needs it (the HTTP API's ``/config`` hook, its :class:`~.server.NSQDAddresses`);
    while it runs it is also the node's ``lookup``, for code given only the node.
    """

    def __init__(self, nsqd: NSQD, *, ping_interval: float = PING_INTERVAL) -> None:
        self.nsqd = nsqd
        self.ping_interval = ping_interval
        self._peers: dict[str, LookupPeer] = {}
        self._changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._http: httpx.AsyncClient | None = None
        self._pending_topics: set[Topic] = set()

    # --- public ------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[LookupService] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Register with the configured lookupds until cancelled."""
        nsqd = self.nsqd
        opts = nsqd.options
        previous_hook = nsqd.on_new_topic
        nsqd.lookup = self
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nsqd.add_notify_callback(self._on_notify)
                nsqd.on_new_topic = self._on_new_topic
                self.set_addresses(opts.lookupd_tcp_addresses)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._nursery = None
            if self._http is not None:
                with trio.CancelScope(shield=True):
                    await self._http.aclose()
                self._http = None
            self._peers.clear()  # the notify callback stays installed; it finds no peers
            nsqd.on_new_topic = previous_hook
            if nsqd.lookup is self:
                nsqd.lookup = None

    def set_addresses(self, addresses: list[str]) -> None:
        """Use exactly ``addresses`` (nsqd's opts change): drop the others, dial new ones."""
        self.nsqd.options.lookupd_tcp_addresses = list(addresses)
        wanted = dict.fromkeys(addresses)
        for address, peer in list(self._peers.items()):
            if address not in wanted:
                log.info("LOOKUP(%s): removing peer", address)
                peer.removed = True
                peer.cancel_scope.cancel()
                del self._peers[address]
        if self._nursery is None:
            return
        for address in wanted:
            if address not in self._peers:
                log.info("LOOKUP(%s): adding peer", address)
                peer = LookupPeer(address)
                self._peers[address] = peer
                self._nursery.start_soon(self._run_peer, peer)
        self._signal()

    def http_addresses(self) -> list[str]:
        """The lookupds' HTTP addresses, from their IDENTIFY replies (nsqd's lookupdHTTPAddrs)."""
        return [
            format_address((p.info.broadcast_address, p.info.http_port))
            for p in self._peers.values()
            if p.info is not None and p.info.broadcast_address
        ]

    async def wait_synced(self) -> None:
        """Wait until every lookupd is connected and has acknowledged every command sent so far."""
        while not all(p.idle for p in self._peers.values()) or self._pending_topics:
            await self._changed.wait()

    # --- notifications -----------------------------------------------------------

    def _signal(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _on_notify(self, obj: Topic | Channel) -> None:
        if isinstance(obj, Channel):
            topic, channel = obj.topic_name, obj.name
        else:
            topic, channel = obj.name, ""
        command = (
            encode_unregister(topic, channel) if obj.exiting else encode_register(topic, channel)
        )
        for peer in self._peers.values():
            peer.push(command)
        self._signal()

    def _on_new_topic(self, topic: Topic) -> None:
        if self._nursery is None:
            topic.start()
            return
        self._pending_topics.add(topic)
        # The REGISTER for the topic is queued already (notify runs first): these are the
        # answers that say every lookupd that is (or is getting) connected has it.
        marks = {p: p.pushed for p in self._peers.values() if p.connected or p.connecting}
        done = trio.Event()
        bound = self.nsqd.options.http_client_request_timeout + 2 * IO_TIMEOUT

        async def announced() -> None:
            with trio.move_on_after(bound):  # nsqd's lookupd calls are bounded too
                await done.wait()

        self.nsqd.announcing[topic.name] = announced
        self._nursery.start_soon(self._announce, topic, marks, done, announced)

    async def _announce(
        self,
        topic: Topic,
        marks: dict[LookupPeer, int],
        done: trio.Event,
        announced: Callable[[], Awaitable[None]],
    ) -> None:
        """Pre-create the topic's channels, start it, and wait until the lookupds have it."""
        try:
            await self._precreate_channels(topic)
            with trio.move_on_after(2 * IO_TIMEOUT):
                while not all(
                    peer.acked >= mark or peer.removed or not (peer.connected or peer.connecting)
                    for peer, mark in marks.items()
                ):
                    await self._changed.wait()
        finally:
            done.set()
            if self.nsqd.announcing.get(topic.name) is announced:
                del self.nsqd.announcing[topic.name]

    async def _precreate_channels(self, topic: Topic) -> None:
        try:
            addresses = self.http_addresses()
            if addresses:
                names = await self._query_channels(topic.name, addresses)
                for name in names:
                    if not is_valid_channel_name(name):
                        log.warning("ignoring invalid channel name %r from nsqlookupd", name)
                    elif not topic.exiting and not is_ephemeral(name):  # ephemeral: no consumer
                        topic.get_channel(name)
            elif self.nsqd.options.lookupd_tcp_addresses:
                log.error(
                    "no available nsqlookupd to query for channels to pre-create for topic %s",
                    topic.name,
                )
        finally:
            # Also when cancelled (shutdown, or the loop stopping): a topic must not
            # stay unstarted, holding its messages, forever.
            self._pending_topics.discard(topic)
            if not topic.exiting:
                topic.start()
            self._signal()

    def _client(self) -> httpx.AsyncClient:
        """The HTTP client for lookupds' ``/channels``, made for the first new topic.

        httpx loads then, off the start-up path: that first topic's publish waits for it once.
        """
        if self._http is None:
            import httpx

            opts = self.nsqd.options
            timeout = httpx.Timeout(
                opts.http_client_request_timeout, connect=opts.http_client_connect_timeout
            )
            # lookupd speaks plain HTTP: no CA bundle to load, no proxies from the environment
            self._http = httpx.AsyncClient(timeout=timeout, verify=False, trust_env=False)
        return self._http

    async def _query_channels(self, topic: str, addresses: list[str]) -> list[str]:
        """The union of ``/channels?topic=`` over ``addresses`` (GetLookupdTopicChannels)."""
        found: set[str] = set()
        errors: list[str] = []
        import httpx

        from ..net.peer_http import fetch

        http = self._client()

        async def query(address: str) -> None:
            url = f"http://{address}/channels"
            try:
                response = await fetch(http, "GET", url, params={"topic": topic})
                if response.status_code != 200:
                    raise httpx.HTTPError(f"got response {response.status_code}")
                found.update(decode_peer_json(response.content, _channels_decoder).channels)
            except (httpx.HTTPError, httpx.InvalidURL, PeerJSONError) as exc:
                errors.append(f"{url}: {exc}")

        async with trio.open_nursery() as nursery:
            for address in addresses:
                nursery.start_soon(query, address)
        if errors:
            log.warning(
                "failed to query nsqlookupd for channels to pre-create for topic %s - %s",
                topic,
                errors,
            )
        return sorted(found)

    # --- one lookupd connection -------------------------------------------------------

    def _registrations(self) -> list[bytes]:
        """REGISTER commands for everything this nsqd has (nsqd's connectCallback)."""
        commands = []
        for topic in list(self.nsqd.topics.values()):
            if topic.exiting:
                continue
            channels = [c for c in topic.channels.values() if not c.exiting]
            if not channels:
                commands.append(encode_register(topic.name))
            commands.extend(encode_register(topic.name, c.name) for c in channels)
        return commands

    def _identify(self) -> bytes:
        nsqd = self.nsqd
        opts = nsqd.options
        return encode_identify(
            broadcast_address=opts.effective_broadcast_address(),
            hostname=nsqd.hostname,
            tcp_port=opts.broadcast_tcp_port or nsqd.tcp_port,
            http_port=opts.broadcast_http_port or nsqd.http_port,
            version=NSQ_VERSION,
        )

    async def _run_peer(self, peer: LookupPeer) -> None:
        with peer.cancel_scope:
            while not peer.removed:
                was_connected = False
                try:
                    await self._session(peer)
                except SESSION_ERRORS as exc:
                    log.error("LOOKUPD(%s): %s", peer.address, str(exc) or type(exc).__name__)
                except Exception as exc:  # a bug, or a lookupd we did not foresee: not fatal
                    log.error("LOOKUPD(%s): unexpected error - %r", peer.address, exc)
                finally:
                    was_connected = peer.connected
                    peer.connected = False
                    peer.connecting = False
                    peer.busy = False
                    self._signal()
                if was_connected:
                    # The lookupd went away (a restart, say): try again at once, so
                    # a lookupd that is already back has everything re-registered now.
                    continue
                # nsqd dials again at its next PING tick or command, whichever comes first.
                with trio.move_on_after(self.ping_interval):
                    await peer.wake.wait()
                peer.wake = trio.Event()

    async def _session(self, peer: LookupPeer) -> None:
        peer.connecting = True
        host, port = split_host_port(peer.address)
        log.info("LOOKUP connecting to %s", peer.address)
        with trio.fail_after(IO_TIMEOUT):
            stream = await trio.open_tcp_stream(host, port)
        async with stream:
            reader = ResponseReader(self.nsqd.options.max_body_size)
            # Everything queued so far is covered by the registrations below.
            covered = peer.pushed
            peer.queue.clear()
            peer.busy = True
            commands = self._registrations()
            reply = await roundtrip(stream, reader, MAGIC_V1 + self._identify())
            if reply.startswith(b"E_"):
                raise LookupdRefused(f"lookupd returned {reply.decode(errors='replace')}")
            try:
                peer.info = decode_peer_json(reply, info_decoder)
            except PeerJSONError:
                raise LookupdRefused(f"parsing response - {reply[:256]!r}") from None
            log.info("LOOKUPD(%s): peer info %s", peer.address, peer.info)
            for command in commands:
                await self._command(peer, stream, reader, command)
            peer.acked = covered
            peer.connected = True
            peer.connecting = False
            next_ping = trio.current_time() + self.ping_interval
            while True:
                peer.busy = False
                self._signal()
                if not peer.queue:
                    peer.wake = trio.Event()
                    if await idle_until(peer, stream, next_ping):
                        # lookupd never speaks first: readable means it hung up.
                        raise trio.BrokenResourceError("lookupd closed the connection")
                peer.busy = True
                if peer.queue:
                    seq, command = peer.queue.popleft()
                    await self._command(peer, stream, reader, command)
                    peer.acked = seq
                if trio.current_time() >= next_ping:
                    log.debug("LOOKUPD(%s): sending heartbeat", peer.address)
                    await self._command(peer, stream, reader, encode_ping())
                    next_ping = trio.current_time() + self.ping_interval

    async def _command(
        self, peer: LookupPeer, stream: trio.SocketStream, reader: ResponseReader, command: bytes
    ) -> None:
        log.info("LOOKUPD(%s): %s", peer.address, command.rstrip(b"\n").decode(errors="replace"))
        reply = await roundtrip(stream, reader, command)
        if reply != b"OK":
            # Every V1 error is fatal: lookupd hangs up, and the next command reconnects.
            log.error(
                "LOOKUPD(%s): %s - %s",
                peer.address,
                command.rstrip(),
                reply.decode(errors="replace"),
            )


class _Channels(msgspec.Struct):
    channels: list[str] = msgspec.field(default_factory=list)


_channels_decoder = msgspec.json.Decoder(_Channels)


async def lookup_loop(
    nsqd: NSQD, *, task_status: trio.TaskStatus[LookupService] = trio.TASK_STATUS_IGNORED
) -> None:
    """Register ``nsqd`` with its ``--lookupd-tcp-address`` lookupds until cancelled.

    Reports the :class:`LookupService` through ``task_status``; while it runs,
    :func:`lookup_service` and :func:`set_lookupd_addresses` reach it through the node.
    """
    await LookupService(nsqd).run(task_status=task_status)


def set_lookupd_addresses(nsqd: NSQD, addresses: list[str]) -> None:
    """PUT /config/nsqlookupd_tcp_addresses: store the new list and apply it if the loop runs."""
    service = lookup_service(nsqd)
    if service is None:
        nsqd.options.lookupd_tcp_addresses = list(addresses)
    else:
        service.set_addresses(addresses)


def lookup_service(nsqd: NSQD) -> LookupService | None:
    """The lookup service running for ``nsqd`` (its ``lookup``), None when none runs."""
    service = nsqd.lookup
    return service if isinstance(service, LookupService) else None


def lookupd_http_addresses(nsqd: NSQD) -> list[str]:
    """The HTTP addresses the running lookup loop learned from its lookupds (empty if none)."""
    service = lookup_service(nsqd)
    return service.http_addresses() if service is not None else []
