"""nsqlookupd's registration database: which nsqd produces which topic and channel.

A plain in-memory structure with no I/O and no clock of its own: callers pass
``now`` (seconds on any monotonic clock; the server uses trio's, so tests can
jump it). It follows nsqlookupd/registration_db.go:

* A :class:`Registration` is a key: ``(CLIENT, "", "")`` for every identified
  nsqd, ``(TOPIC, topic, "")`` and ``(CHANNEL, topic, channel)``.
* Each key maps producer ids (the nsqd's remote address) to :class:`Producer`
  entries that share one :class:`PeerInfo` per connection.
* Removing a producer leaves its key behind, even with no producers left: a
  topic stays listed after its nsqd goes away, until someone deletes it over
  HTTP (or, for ``#ephemeral`` names, its last producer unregisters).
* A tombstone belongs to one (topic key, producer) pair. Registering again
  while tombstoned keeps the existing entry, so the tombstone survives; only an
  UNREGISTER (or a disconnect) drops the entry for good.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator

import msgspec

__all__ = [
    "ANY",
    "Category",
    "PeerInfo",
    "Producer",
    "Registration",
    "RegistrationDB",
    "filter_by_active",
    "keys",
    "subkeys",
]

#: The wildcard for a key or subkey in :meth:`RegistrationDB.find_registrations`.
ANY = "*"


class Category(enum.Enum):
    """What a registration key names."""

    CLIENT = "client"
    TOPIC = "topic"
    CHANNEL = "channel"


class Registration(msgspec.Struct, frozen=True):
    """A registration key: ``category``, ``key`` (the topic) and ``subkey`` (the channel)."""

    category: Category
    key: str = ""
    subkey: str = ""

    def is_match(self, category: Category, key: str, subkey: str) -> bool:
        """True when this key matches; ``key``/``subkey`` may be :data:`ANY`."""
        return (
            self.category is category
            and (key == ANY or self.key == key)
            and (subkey == ANY or self.subkey == subkey)
        )


class PeerInfo(msgspec.Struct, eq=False):
    """One identified nsqd connection, as it described itself in IDENTIFY.

    ``id`` is the connection's remote address (unique per connection);
    ``last_update`` is refreshed by IDENTIFY and PING.
    """

    id: str
    remote_address: str
    hostname: str
    broadcast_address: str
    tcp_port: int
    http_port: int
    version: str
    last_update: float

    @property
    def node(self) -> str:
        """``broadcast_address:http_port``, the name /topic/tombstone's ``node`` matches."""
        return f"{self.broadcast_address}:{self.http_port}"


class Producer(msgspec.Struct, eq=False):
    """A peer's entry under one registration key (tombstones live here)."""

    peer: PeerInfo
    tombstoned: bool = False
    tombstoned_at: float = 0.0

    def tombstone(self, now: float) -> None:
        """Hide this producer from /lookup for the tombstone lifetime, starting ``now``."""
        self.tombstoned = True
        self.tombstoned_at = now

    def is_tombstoned(self, lifetime: float, now: float) -> bool:
        """True while a tombstone set less than ``lifetime`` seconds ago is in force."""
        return self.tombstoned and now - self.tombstoned_at < lifetime


def filter_by_active(
    producers: Iterable[Producer], inactivity_timeout: float, tombstone_lifetime: float, now: float
) -> list[Producer]:
    """Producers that pinged within ``inactivity_timeout`` and are not tombstoned.

    Pass ``tombstone_lifetime=0`` to keep tombstoned producers (as /nodes does).
    """
    return [
        p
        for p in producers
        if now - p.peer.last_update <= inactivity_timeout
        and not p.is_tombstoned(tombstone_lifetime, now)
    ]


class RegistrationDB:
    """Keys to producers. Iteration follows insertion order, so listings are stable."""

    def __init__(self) -> None:
        self._map: dict[Registration, dict[str, Producer]] = {}

    def __iter__(self) -> Iterator[tuple[Registration, list[Producer]]]:
        """Every key with its producers (for /debug)."""
        for key, producers in self._map.items():
            yield key, list(producers.values())

    def add_registration(self, key: Registration) -> None:
        """Make sure ``key`` exists (with no producers if it is new)."""
        self._map.setdefault(key, {})

    def add_producer(self, key: Registration, peer: PeerInfo) -> bool:
        """Add ``peer`` under ``key`` unless it is already there; True when added.

        An existing entry, and any tombstone on it, is kept.
        """
        producers = self._map.setdefault(key, {})
        if peer.id in producers:
            return False
        producers[peer.id] = Producer(peer)
        return True

    def remove_producer(self, key: Registration, peer_id: str) -> tuple[bool, int]:
        """Remove ``peer_id`` from ``key``: (whether it was there, producers left).

        The key itself stays, even when no producer is left.
        """
        producers = self._map.get(key)
        if producers is None:
            return False, 0
        removed = producers.pop(peer_id, None) is not None
        return removed, len(producers)

    def remove_registration(self, key: Registration) -> None:
        """Forget ``key`` and all of its producers."""
        self._map.pop(key, None)

    def find_registrations(self, category: Category, key: str, subkey: str) -> list[Registration]:
        """Keys matching ``category``/``key``/``subkey`` (either may be :data:`ANY`)."""
        if key != ANY and subkey != ANY:
            exact = Registration(category, key, subkey)
            return [exact] if exact in self._map else []
        return [k for k in self._map if k.is_match(category, key, subkey)]

    def find_producers(self, category: Category, key: str, subkey: str) -> list[Producer]:
        """Producers under matching keys, one per peer (the first entry found)."""
        if key != ANY and subkey != ANY:
            return list(self._map.get(Registration(category, key, subkey), {}).values())
        seen: set[str] = set()
        found: list[Producer] = []
        for k, producers in self._map.items():
            if not k.is_match(category, key, subkey):
                continue
            for peer_id, producer in producers.items():
                if peer_id not in seen:
                    seen.add(peer_id)
                    found.append(producer)
        return found

    def lookup_registrations(self, peer_id: str) -> list[Registration]:
        """Every key ``peer_id`` is registered under."""
        return [k for k, producers in self._map.items() if peer_id in producers]

    def remove_peer(self, peer_id: str) -> list[Registration]:
        """Drop ``peer_id`` from every key (a connection went away); returns the keys it left."""
        left = self.lookup_registrations(peer_id)
        for key in left:
            self._map[key].pop(peer_id, None)
        return left


def keys(registrations: Iterable[Registration]) -> list[str]:
    """The ``key`` (topic) of each registration."""
    return [r.key for r in registrations]


def subkeys(registrations: Iterable[Registration]) -> list[str]:
    """The ``subkey`` (channel) of each registration."""
    return [r.subkey for r in registrations]
