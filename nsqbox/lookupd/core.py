"""The nsqlookupd domain: what its TCP and HTTP faces do to the registration DB.

:class:`NSQLookupd` holds the options, the :class:`RegistrationDB` and a clock,
and implements each operation once (nsqlookupd/lookup_protocol_v1.go and
nsqlookupd/http.go), so :mod:`.protocol_v1` and :mod:`.http_api` only translate
bytes and requests. No I/O here; the clock is injected (the server passes
``trio.current_time``, which tests drive with an autojump clock).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

import msgspec

from .. import NSQ_VERSION
from ..broker.clock import BrokerClock
from ..wire.documents import LookupdNode, LookupdProducer
from ..wire.lookupd import Identify
from ..wire.names import is_ephemeral, is_valid_topic_name
from .faults import LookupdFaults
from .options import LookupdOptions
from .registration_db import (
    ANY,
    Category,
    PeerInfo,
    Producer,
    Registration,
    RegistrationDB,
    filter_by_active,
    keys,
    subkeys,
)

log = logging.getLogger("nsqbox.lookupd")

_CLIENT = Registration(Category.CLIENT)


#: A producer as /lookup lists it, and an nsqd as /nodes lists it (the shared schema).
ProducerInfo = LookupdProducer
NodeInfo = LookupdNode


def _producer_info(peer: PeerInfo) -> ProducerInfo:
    return ProducerInfo(
        remote_address=peer.remote_address,
        hostname=peer.hostname,
        broadcast_address=peer.broadcast_address,
        tcp_port=peer.tcp_port,
        http_port=peer.http_port,
        version=peer.version,
    )


class NSQLookupd:
    """One nsqlookupd's state and operations.

    Names that come from a peer are checked before they reach the DB: a name
    that is not valid cannot be registered, so queries and deletes by such a
    name find nothing. This also keeps ``*``, the DB's wildcard, from matching
    every key (nsqlookupd's ``/topic/delete?topic=*`` deletes every topic).

    ``tcp_port``/``http_port`` are the bound ports (IDENTIFY replies with them);
    the server sets them once its listeners are up.
    """

    def __init__(
        self,
        options: LookupdOptions,
        clock: Callable[[], float],
        *,
        broker: BrokerClock | None = None,
    ) -> None:
        self.options = options
        self.db = RegistrationDB()
        #: Broker time (its box's, shared with its nsqds; ``clock`` is its real time):
        #: tombstones and inactive producers follow it.
        self.broker = broker if broker is not None else BrokerClock(real=clock)
        self.clock = self.broker.now
        self.tcp_port = 0
        self.http_port = 0
        self.hostname = socket.gethostname()
        #: Faults on demand (tests): hidden producers, an HTTP API that stops answering.
        self.faults = LookupdFaults(clock)

    # --- TCP V1 -----------------------------------------------------------------

    def identify(self, peer_id: str, remote_address: str, ident: Identify) -> PeerInfo:
        """Record an identified nsqd; the caller keeps the PeerInfo for the connection."""
        peer = PeerInfo(
            id=peer_id,
            remote_address=remote_address,
            hostname=ident.hostname,
            broadcast_address=ident.broadcast_address,
            tcp_port=ident.tcp_port,
            http_port=ident.http_port,
            version=ident.version,
            last_update=self.clock(),
        )
        log.info(
            "CLIENT(%s): IDENTIFY Address:%s TCP:%d HTTP:%d Version:%s",
            peer_id, peer.broadcast_address, peer.tcp_port, peer.http_port, peer.version,
        )  # fmt: skip
        self.db.add_producer(_CLIENT, peer)
        return peer

    def identify_response(self) -> bytes:
        """The IDENTIFY reply, keys in the order Go's encoding/json writes a map."""
        return msgspec.json.encode(
            {
                "broadcast_address": self.options.effective_broadcast_address(),
                "hostname": self.hostname,
                "http_port": self.http_port,
                "tcp_port": self.tcp_port,
                "version": NSQ_VERSION,
            }
        )

    def ping(self, peer: PeerInfo | None) -> None:
        """A PING: refresh the peer's last update (a PING before IDENTIFY is fine too)."""
        if peer is not None:
            peer.last_update = self.clock()

    def register(self, peer: PeerInfo, topic: str, channel: str) -> None:
        """REGISTER: a channel registers its topic too."""
        if channel and self.db.add_producer(Registration(Category.CHANNEL, topic, channel), peer):
            log.info(
                "DB: client(%s) REGISTER category:channel key:%s subkey:%s", peer.id, topic, channel
            )
        if self.db.add_producer(Registration(Category.TOPIC, topic), peer):
            log.info("DB: client(%s) REGISTER category:topic key:%s subkey:", peer.id, topic)

    def unregister(self, peer: PeerInfo, topic: str, channel: str) -> None:
        """UNREGISTER: drop the peer's entries; an ``#ephemeral`` key goes with its last producer.

        A topic UNREGISTER also drops the peer from that topic's channels (nsqd
        sends channel UNREGISTERs first, so normally there are none left).
        """
        if channel:
            key = Registration(Category.CHANNEL, topic, channel)
            removed, left = self.db.remove_producer(key, peer.id)
            if removed:
                log.info(
                    "DB: client(%s) UNREGISTER category:channel key:%s subkey:%s",
                    peer.id,
                    topic,
                    channel,
                )
            if left == 0 and is_ephemeral(channel):
                self.db.remove_registration(key)
            return
        for key in self.db.find_registrations(Category.CHANNEL, topic, ANY):
            removed, _ = self.db.remove_producer(key, peer.id)
            if removed:
                log.warning(
                    "client(%s) unexpected UNREGISTER category:channel key:%s subkey:%s",
                    peer.id,
                    topic,
                    key.subkey,
                )
        key = Registration(Category.TOPIC, topic)
        removed, left = self.db.remove_producer(key, peer.id)
        if removed:
            log.info("DB: client(%s) UNREGISTER category:topic key:%s subkey:", peer.id, topic)
        if left == 0 and is_ephemeral(topic):
            self.db.remove_registration(key)

    def disconnect(self, peer: PeerInfo) -> None:
        """The peer's connection ended: it leaves every registration (the keys stay)."""
        for key in self.db.remove_peer(peer.id):
            log.info(
                "DB: client(%s) UNREGISTER category:%s key:%s subkey:%s",
                peer.id, key.category.value, key.key, key.subkey,
            )  # fmt: skip

    # --- HTTP queries -------------------------------------------------------------

    def topics(self) -> list[str]:
        """Every topic key, with or without producers."""
        return keys(self.db.find_registrations(Category.TOPIC, ANY, ""))

    def channels(self, topic: str) -> list[str]:
        """Every channel key of ``topic``."""
        if not is_valid_topic_name(topic):
            return []
        return subkeys(self.db.find_registrations(Category.CHANNEL, topic, ANY))

    def lookup(self, topic: str) -> tuple[list[str], list[ProducerInfo]] | None:
        """/lookup: channels and active, untombstoned producers; None for an unknown topic."""
        if not is_valid_topic_name(topic) or not self.db.find_registrations(
            Category.TOPIC, topic, ""
        ):
            return None
        producers = filter_by_active(
            self.db.find_producers(Category.TOPIC, topic, ""),
            self.options.inactive_producer_timeout,
            self.options.tombstone_lifetime,
            self.clock(),
        )
        if self.faults.hiding and self.faults.hides(topic):
            producers = []
        return self.channels(topic), [_producer_info(p.peer) for p in producers]

    def nodes(self) -> list[NodeInfo]:
        """/nodes: active nsqds (tombstoned ones included) with their topics and tombstones."""
        now = self.clock()
        lifetime = self.options.tombstone_lifetime
        clients = filter_by_active(
            self.db.find_producers(Category.CLIENT, "", ""),
            self.options.inactive_producer_timeout,
            0.0,
            now,
        )
        per_topic: dict[str, list[Producer]] = {}
        nodes = []
        for client in clients:
            peer = client.peer
            topics = keys(
                k for k in self.db.lookup_registrations(peer.id) if k.category is Category.TOPIC
            )
            tombstones = []
            for topic in topics:
                if topic not in per_topic:
                    per_topic[topic] = self.db.find_producers(Category.TOPIC, topic, "")
                tombstones.append(
                    any(p.peer is peer and p.is_tombstoned(lifetime, now) for p in per_topic[topic])
                )
            nodes.append(
                NodeInfo(
                    remote_address=peer.remote_address,
                    hostname=peer.hostname,
                    broadcast_address=peer.broadcast_address,
                    tcp_port=peer.tcp_port,
                    http_port=peer.http_port,
                    version=peer.version,
                    tombstones=tombstones,
                    topics=topics,
                )
            )
        return nodes

    def debug(self) -> dict[str, list[dict[str, Any]]]:
        """/debug: every key (``category:key:subkey``) with its producers' raw state.

        Times are Unix nanoseconds as nsqlookupd reports them; ``tombstoned_at`` is
        0 for a producer never tombstoned (Go prints its zero time's odd value).
        """
        now = self.clock()
        wall_ns = self.broker.wall_ns()

        def unix_ns(t: float) -> int:
            return wall_ns - int((now - t) * 1e9)

        data: dict[str, list[dict[str, Any]]] = {}
        for key, producers in self.db:
            # as in nsqlookupd, a key with no producers does not appear at all
            for p in producers:
                name = f"{key.category.value}:{key.key}:{key.subkey}"
                data.setdefault(name, []).append(
                    {
                        "id": p.peer.id,
                        "hostname": p.peer.hostname,
                        "broadcast_address": p.peer.broadcast_address,
                        "tcp_port": p.peer.tcp_port,
                        "http_port": p.peer.http_port,
                        "version": p.peer.version,
                        "last_update": unix_ns(p.peer.last_update),
                        "tombstoned": p.tombstoned,
                        "tombstoned_at": unix_ns(p.tombstoned_at) if p.tombstoned else 0,
                    }
                )
        return data

    # --- HTTP actions ------------------------------------------------------------

    def create_topic(self, topic: str) -> None:
        """Add a topic key (no producers)."""
        log.info("DB: adding topic(%s)", topic)
        self.db.add_registration(Registration(Category.TOPIC, topic))

    def delete_topic(self, topic: str) -> None:
        """Forget a topic and its channels (nsqds that still have it re-register on reconnect)."""
        if not is_valid_topic_name(topic):
            return
        for key in self.db.find_registrations(Category.CHANNEL, topic, ANY):
            log.info("DB: removing channel(%s) from topic(%s)", key.subkey, topic)
            self.db.remove_registration(key)
        for key in self.db.find_registrations(Category.TOPIC, topic, ""):
            log.info("DB: removing topic(%s)", topic)
            self.db.remove_registration(key)

    def tombstone_topic_producer(self, topic: str, node: str) -> None:
        """Tombstone ``topic`` on the producers named ``node`` (``broadcast_address:http_port``)."""
        if not is_valid_topic_name(topic):
            return
        log.info("DB: setting tombstone for producer@%s of topic(%s)", node, topic)
        now = self.clock()
        for producer in self.db.find_producers(Category.TOPIC, topic, ""):
            if producer.peer.node == node:
                producer.tombstone(now)

    def create_channel(self, topic: str, channel: str) -> None:
        """Add a channel key and its topic key."""
        log.info("DB: adding channel(%s) in topic(%s)", channel, topic)
        self.db.add_registration(Registration(Category.CHANNEL, topic, channel))
        log.info("DB: adding topic(%s)", topic)
        self.db.add_registration(Registration(Category.TOPIC, topic))

    def delete_channel(self, topic: str, channel: str) -> bool:
        """Forget a channel key; False when there was none (404 CHANNEL_NOT_FOUND)."""
        found = self.db.find_registrations(Category.CHANNEL, topic, channel)
        for key in found:
            log.info("DB: removing channel(%s) from topic(%s)", channel, topic)
            self.db.remove_registration(key)
        return bool(found)
