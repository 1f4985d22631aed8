"""What one nsqd's metrics are made of, read at one moment (no ``prometheus_client`` here)."""

from __future__ import annotations

from dataclasses import dataclass

from ..wire.documents import StatsDocument

__all__ = ["NodeSnapshot", "connections_in"]


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """One nsqd at one moment: its ``/stats`` document and what else it says of itself.

    ``stats`` is the ``/stats?format=json`` document (clients may be left out; ``memory`` is
    exported when present); the addresses are what ``/info`` (or lookupd) says; ``connections``
    counts client connections; ``now`` is the Unix time the snapshot was read at.
    """

    stats: StatsDocument
    hostname: str
    broadcast_address: str
    tcp_port: int
    http_port: int
    connections: int
    now: float


def connections_in(stats: StatsDocument) -> int:
    """The client connections a ``/stats`` document with clients shows.

    Consumers are listed under their channel and producers (clients that published) apart; a
    connection that did both is counted once, by its remote address (``client_id`` is what the
    client chose to call itself, by default its host name, so it is not one per connection). A
    connection that has done neither yet is not in ``/stats``, so it is not counted.
    """
    seen: set[str] = set()
    for topic in stats.topics or ():
        for channel in topic.channels:
            seen.update(c.remote_address for c in channel.clients or ())
    seen.update(c.remote_address for c in stats.producers or ())
    return len(seen)
