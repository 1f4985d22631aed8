"""NSQ's JSON documents, one schema for both sides: nsqd's ``/stats`` and ``/info``, nsqlookupd's
``/nodes`` and ``/lookup``.

The servers encode these Structs; the admin, the TUI (through the admin), the test harness and
the tools decode the same Structs. Keys, their order and their JSON types are nsqd v1.3.0's
(nsqd/stats.go, nsqd/client_v2.go, nsqd/http.go, nsqlookupd/http.go), Go's quirks included:

* a nil Go slice is ``null``: a channel's ``clients`` without ``include_clients``, ``producers``
  when there are none, ``topics`` when the ``topic`` filter names no topic, ``percentiles``
  without e2e latency tracking;
* ``omitempty`` fields (a client's ``authed``, ``auth_identity``, ``auth_identity_url``,
  ``pub_counts``, the document's ``memory``) are :data:`msgspec.UNSET` when empty, so they are
  left out; :func:`unset_if_empty` makes that choice for the encoder.

Every field has a default so that decoding tolerates an nsqd that leaves a key out (an older
release, or a hand-written test body); the encoders give every field. Pure values: no I/O.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "CHANNEL_COUNTS",
    "TOPIC_COUNTS",
    "ChannelStats",
    "ChannelsDocument",
    "ClientStats",
    "InfoDocument",
    "LookupDocument",
    "LookupdNode",
    "LookupdProducer",
    "MemStats",
    "NodesDocument",
    "Percentile",
    "PubCount",
    "QuantileResult",
    "StatsDocument",
    "TopicStats",
    "TopicsDocument",
    "nanoseconds_to_human",
    "unset_if_empty",
]

T = TypeVar("T")


def unset_if_empty(value: T) -> T | UnsetType:
    """Go's ``omitempty``: :data:`~msgspec.UNSET` (left out) for a false, zero or empty value."""
    return value if value else UNSET


# --- nsqd /stats ----------------------------------------------------------------------------------


class Percentile(msgspec.Struct, frozen=True):
    """One reported percentile: ``quantile`` (e.g. 0.99) and its ``value`` in ns."""

    quantile: float = 0.0
    value: float = 0.0


def nanoseconds_to_human(value: float) -> str:
    """nsqd's ``NanoSecondToHuman``: ``1.5ms``, ``320.0us``, ``2.0s``."""
    for scale, suffix in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if value > scale:
            return f"{value / scale:.1f}{suffix}"
    return f"{value:.1f}ns"


class QuantileResult(msgspec.Struct, frozen=True):
    """What /stats reports as ``e2e_processing_latency``.

    ``percentiles`` is None (JSON ``null``) when the channel tracks no latency,
    as nsqd's ``Result`` of a nil quantile.
    """

    count: int = 0
    percentiles: list[Percentile] | None = None

    def __str__(self) -> str:
        """nsqd's text form: the values, human readable, comma separated."""
        return ", ".join(nanoseconds_to_human(p.value) for p in self.percentiles or ())


class PubCount(msgspec.Struct, frozen=True):
    """Messages a producer published to one topic."""

    topic: str = ""
    count: int = 0


class ClientStats(msgspec.Struct, frozen=True, kw_only=True):
    """One TCP client, as nsqd's ``ClientV2Stats``."""

    client_id: str = ""
    hostname: str = ""
    version: str = ""
    remote_address: str = ""
    state: int = 0
    ready_count: int = 0
    in_flight_count: int = 0
    message_count: int = 0
    finish_count: int = 0
    requeue_count: int = 0
    connect_ts: int = 0
    sample_rate: int = 0
    deflate: bool = False
    snappy: bool = False
    user_agent: str = ""
    authed: bool | UnsetType = UNSET
    auth_identity: str | UnsetType = UNSET
    auth_identity_url: str | UnsetType = UNSET
    pub_counts: list[PubCount] | UnsetType = UNSET
    tls: bool = False
    tls_cipher_suite: str = ""
    tls_version: str = ""
    tls_negotiated_protocol: str = ""
    tls_negotiated_protocol_is_mutual: bool = False


class ChannelStats(msgspec.Struct, frozen=True):
    """One channel, as nsqd's ``ChannelStats``."""

    channel_name: str = ""
    depth: int = 0
    backend_depth: int = 0
    in_flight_count: int = 0
    deferred_count: int = 0
    message_count: int = 0
    requeue_count: int = 0
    timeout_count: int = 0
    client_count: int = 0
    clients: list[ClientStats] | None = None
    paused: bool = False
    e2e_processing_latency: QuantileResult = QuantileResult()


class TopicStats(msgspec.Struct, frozen=True):
    """One topic, as nsqd's ``TopicStats``."""

    topic_name: str = ""
    channels: list[ChannelStats] = []
    depth: int = 0
    backend_depth: int = 0
    message_count: int = 0
    message_bytes: int = 0
    paused: bool = False
    e2e_processing_latency: QuantileResult = QuantileResult()


class MemStats(msgspec.Struct, frozen=True):
    """nsqd's ``memStats`` keys (``include_mem``)."""

    heap_objects: int = 0
    heap_idle_bytes: int = 0
    heap_in_use_bytes: int = 0
    heap_released_bytes: int = 0
    gc_pause_usec_100: int = 0
    gc_pause_usec_99: int = 0
    gc_pause_usec_95: int = 0
    next_gc_bytes: int = 0
    gc_total_runs: int = 0


class StatsDocument(msgspec.Struct, frozen=True, kw_only=True):
    """The JSON body of ``/stats?format=json`` (``memory`` left out unless asked for)."""

    version: str = ""
    health: str = ""
    start_time: int = 0
    topics: list[TopicStats] | None = None
    memory: MemStats | UnsetType = UNSET
    producers: list[ClientStats] | None = None


# --- nsqd /info -----------------------------------------------------------------------------------


class InfoDocument(msgspec.Struct, frozen=True):
    """The body of nsqd's ``GET /info``; durations are Go nanoseconds."""

    version: str = ""
    broadcast_address: str = ""
    hostname: str = ""
    http_port: int = 0
    tcp_port: int = 0
    start_time: int = 0
    max_heartbeat_interval: int = 0
    max_output_buffer_size: int = 0
    max_output_buffer_timeout: int = 0
    max_deflate_level: int = 0


# --- nsqlookupd /lookup, /nodes, /topics, /channels -----------------------------------------------


class LookupdProducer(msgspec.Struct, frozen=True):
    """An nsqd as ``/lookup`` lists it (nsqlookupd's PeerInfo JSON)."""

    remote_address: str = ""
    hostname: str = ""
    broadcast_address: str = ""
    tcp_port: int = 0
    http_port: int = 0
    version: str = ""


class LookupdNode(LookupdProducer, frozen=True):
    """An nsqd as ``/nodes`` lists it: ``tombstones[i]`` is about ``topics[i]``.

    Decoding a ``/lookup`` producer into it leaves ``tombstones`` and ``topics`` None.
    """

    tombstones: list[bool] | None = None
    topics: list[str] | None = None


class LookupDocument(msgspec.Struct, frozen=True):
    """The body of nsqlookupd's ``GET /lookup?topic=``."""

    channels: list[str] | None = None
    producers: list[LookupdProducer] | None = None


class NodesDocument(msgspec.Struct, frozen=True):
    """The body of nsqlookupd's ``GET /nodes`` (a ``/lookup`` body decodes into it too)."""

    producers: list[LookupdNode] | None = None


class TopicsDocument(msgspec.Struct, frozen=True):
    """The body of nsqlookupd's (and nsqd's) ``GET /topics``."""

    topics: list[str] | None = None


class ChannelsDocument(msgspec.Struct, frozen=True):
    """The body of nsqlookupd's ``GET /channels?topic=``."""

    channels: list[str] | None = None


#: The counters a wait can name on a topic and on a channel: the test handle's ``wait_for``
#: and the admin's ``/api/wait`` (in-flight, deferred and clients as their counts).
TOPIC_COUNTS = ("depth", "message_count")
CHANNEL_COUNTS = (
    "depth",
    "in_flight",
    "deferred",
    "message_count",
    "requeue_count",
    "timeout_count",
    "clients",
)
