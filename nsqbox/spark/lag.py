"""The simple reader's lag: what waits in the channel, its own prefetched messages included.

The simple reader keeps RDY open between micro-batches, so part of the channel
is in flight on nsqd for the reader without being in any batch yet: in its
buffer, in the socket, or in nsqd's output buffer. nsqd's ``depth`` leaves all
of these out, and the reader sees only the first. What nsqd does count is how
many messages it has sent each client (``message_count`` in ``/stats``, per
connection since it connected). The reader counts, per connection, the
messages it has *released*: read off the socket and gone from its buffer
(handed to Spark, or handed back to nsqd). So, from one ``/stats`` answer per
node, with the reader's connections named by nsqd's ``remote_address`` (each
connection's local address, an IPv4 address the same whether or not a
dual-stack listener wrote it IPv4-mapped)::

    waiting(node) = depth + sum over the reader's connections (message_count - released)

is every message of the channel on that node that no micro-batch holds yet:
queued, or sent to the reader and not handed out. A connection nsqd lists
under another address (a NAT or proxy between) cannot be matched; that node
then counts ``depth`` plus what the reader has buffered from it, which misses
what is still on the wire. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["ChannelStats", "ConnectionCount", "node_waiting", "plain_address", "waiting"]

#: The largest count believed from a node (nsqd counts in int64).
MAX_COUNT = 2**62
_MAPPED = "[::ffff:"


def plain_address(address: str) -> str:
    """``[::ffff:10.0.0.5]:4000`` as ``10.0.0.5:4000``; any other address as it is."""
    if address.lower().startswith(_MAPPED) and "]:" in address:
        host, _, port = address[len(_MAPPED) :].partition("]:")
        if host.count(".") == 3:
            return f"{host}:{port}"
    return address


@dataclass(frozen=True)
class ChannelStats:
    """One node's answer for the channel: its depth and what it sent each client."""

    depth: int
    #: Messages nsqd has sent each client of the channel, by the client's remote address.
    sent: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ConnectionCount:
    """One of the reader's connections, as the reader counts it."""

    #: The connection's local ``host:port`` (nsqd's ``remote_address`` for it).
    local_address: str
    #: Messages read off it since it connected.
    received: int
    #: Of those, how many are still in the reader's buffer.
    buffered: int

    @property
    def released(self) -> int:
        """Messages read off it and gone from the buffer (handed out or handed back)."""
        return self.received - self.buffered


def node_waiting(stats: ChannelStats, connections: Sequence[ConnectionCount]) -> int:
    """The messages on one node that no micro-batch holds yet (see the module docstring)."""
    sent = {plain_address(address): count for address, count in stats.sent.items()}
    local = [(plain_address(c.local_address), c) for c in connections]
    if all(address in sent for address, _ in local):
        prefetched = sum(max(0, sent[address] - c.released) for address, c in local)
    else:  # a connection nsqd names otherwise: only what the reader holds is known
        prefetched = sum(c.buffered for c in connections)
    return min(stats.depth + prefetched, MAX_COUNT)


def waiting(
    stats: Mapping[str, ChannelStats | None],
    connections: Mapping[str, Sequence[ConnectionCount]],
) -> int | None:
    """The sum of :func:`node_waiting` over ``stats``'s nodes; None when one is unknown."""
    total = 0
    for node, answer in stats.items():
        if answer is None:
            return None
        total += node_waiting(answer, connections.get(node, ()))
    return min(total, MAX_COUNT)
