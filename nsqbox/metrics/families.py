"""nsqd snapshots as Prometheus metric families (docs/metrics.md lists them).

One :class:`MetricFamilies` per scrape: :meth:`~MetricFamilies.add` each node's
:class:`~nsqbox.metrics.snapshot.NodeSnapshot`, then :meth:`~MetricFamilies.collect` the
families, one per metric name whatever the number of nodes (Prometheus wants each family once
in an exposition). The families are built from scratch each time, so a deleted topic's series
are simply absent from the next scrape; nothing is kept between scrapes.

Names follow Prometheus' conventions: a ``nsqd_`` prefix, ``_total`` on counters, base units
(seconds, bytes; nsqd's nanoseconds and microseconds are converted). Topic series carry
``topic`` and ``paused`` labels, channel series ``topic``, ``channel`` and ``paused``; with
``node_label`` every series also carries ``node``, the nsqd's HTTP address.

Imports ``prometheus_client``: import this module when a scrape comes, not before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from ..wire.documents import ChannelStats, MemStats, QuantileResult, TopicStats
from .snapshot import NodeSnapshot

__all__ = ["MetricFamilies"]

_COUNTER: Final = "counter"
_GAUGE: Final = "gauge"

#: (kind, name, /stats field, help, unit) of the numbers each topic reports.
_TOPIC: Final = (
    (_COUNTER, "nsqd_topic_messages", "message_count", "Messages published to the topic.", ""),
    (
        _COUNTER,
        "nsqd_topic_message_bytes",
        "message_bytes",
        "Bytes of message bodies published to the topic.",
        "bytes",
    ),
    (
        _GAUGE,
        "nsqd_topic_depth",
        "depth",
        "Messages queued on the topic (memory and disk), not yet copied to its channels.",
        "",
    ),
    (_GAUGE, "nsqd_topic_backend_depth", "backend_depth", "Of the topic's depth, on disk.", ""),
)

#: The same for each channel.
_CHANNEL: Final = (
    (
        _COUNTER,
        "nsqd_channel_messages",
        "message_count",
        "Messages the channel received from its topic.",
        "",
    ),
    (
        _COUNTER,
        "nsqd_channel_requeues",
        "requeue_count",
        "Messages requeued (REQ, or a consumer that closed with them in flight).",
        "",
    ),
    (
        _COUNTER,
        "nsqd_channel_timeouts",
        "timeout_count",
        "Messages that timed out in flight (no FIN, REQ or TOUCH in time).",
        "",
    ),
    (
        _GAUGE,
        "nsqd_channel_depth",
        "depth",
        "Messages waiting in the channel (memory and disk): the consumers' backlog.",
        "",
    ),
    (_GAUGE, "nsqd_channel_backend_depth", "backend_depth", "Of the channel's depth, on disk.", ""),
    (
        _GAUGE,
        "nsqd_channel_in_flight",
        "in_flight_count",
        "Messages sent to consumers and not yet finished, requeued or timed out.",
        "",
    ),
    (
        _GAUGE,
        "nsqd_channel_deferred",
        "deferred_count",
        "Messages deferred (DPUB, REQ with a delay).",
        "",
    ),
    (_GAUGE, "nsqd_channel_clients", "client_count", "Consumers subscribed to the channel.", ""),
)

#: The same for the node's memory (nsqd's /stats ``memory``, present through the exporter).
_MEMORY: Final = (
    (_GAUGE, "nsqd_mem_heap_objects", "heap_objects", "Allocated heap objects.", ""),
    (_GAUGE, "nsqd_mem_heap_idle_bytes", "heap_idle_bytes", "Heap bytes idle.", "bytes"),
    (_GAUGE, "nsqd_mem_heap_in_use_bytes", "heap_in_use_bytes", "Heap bytes in use.", "bytes"),
    (
        _GAUGE,
        "nsqd_mem_heap_released_bytes",
        "heap_released_bytes",
        "Heap bytes released to the operating system.",
        "bytes",
    ),
    (
        _GAUGE,
        "nsqd_mem_next_gc_bytes",
        "next_gc_bytes",
        "Heap size at which the next garbage collection runs.",
        "bytes",
    ),
    (_COUNTER, "nsqd_mem_gc_runs", "gc_total_runs", "Garbage collections run.", ""),
)

_NumberSpec = tuple[str, str, str, str, str]
_Numbers = list[tuple[str, CounterMetricFamily | GaugeMetricFamily]]


def _numbers(specs: Sequence[_NumberSpec], labels: Sequence[str]) -> _Numbers:
    """Each spec's family, paired with the /stats field it reads."""
    numbers: _Numbers = []
    for kind, name, field, doc, unit in specs:
        family_type = CounterMetricFamily if kind == _COUNTER else GaugeMetricFamily
        numbers.append((field, family_type(name, doc, labels=labels, unit=unit)))
    return numbers


class MetricFamilies:
    """The metric families of one scrape, filled node by node (see the module doc)."""

    def __init__(self, *, node_label: bool = False) -> None:
        self.node_label = node_label
        self._base = base = ["node"] if node_label else []
        self._topic_labels = topic = [*base, "topic", "paused"]
        self._channel_labels = channel = [*base, "topic", "channel", "paused"]
        self._info = InfoMetricFamily(
            "nsqd", "The nsqd: its version and addresses (always 1).", labels=base
        )
        self._start_time = GaugeMetricFamily(
            "nsqd_start_time", "When nsqd started, in Unix time.", labels=base, unit="seconds"
        )
        self._uptime = GaugeMetricFamily(
            "nsqd_uptime", "How long nsqd has been running.", labels=base, unit="seconds"
        )
        self._healthy = GaugeMetricFamily(
            "nsqd_healthy",
            "1 while nsqd reports itself healthy (/ping answers OK), 0 otherwise.",
            labels=base,
        )
        self._connections = GaugeMetricFamily(
            "nsqd_connections", "Client connections (TCP) to nsqd.", labels=base
        )
        self._up = GaugeMetricFamily(
            "nsqd_up",
            "1 when the exporter read the nsqd's /stats in this scrape, 0 otherwise.",
            labels=base,
        )
        self._topic = _numbers(_TOPIC, topic)
        self._channel = _numbers(_CHANNEL, channel)
        self._memory = _numbers(_MEMORY, base)
        self._gc_pauses = SummaryMetricFamily(
            "nsqd_mem_gc_pause",
            "Garbage-collection pauses, by quantile of the last 256.",
            labels=base,
            unit="seconds",
        )
        self._topic_latency = SummaryMetricFamily(
            "nsqd_topic_e2e_processing_latency",
            "Time from publish to FIN over the topic's channels, by quantile "
            "(with --e2e-processing-latency-percentile).",
            labels=topic,
            unit="seconds",
        )
        self._channel_latency = SummaryMetricFamily(
            "nsqd_channel_e2e_processing_latency",
            "Time from publish to FIN, by quantile (with --e2e-processing-latency-percentile).",
            labels=channel,
            unit="seconds",
        )

    def add(self, snapshot: NodeSnapshot, node: str = "") -> None:
        """Add one node's series (``node`` is its label value when the node label is on)."""
        base = [node] if self.node_label else []
        if self.node_label:
            self._up.add_metric(base, 1)
        stats = snapshot.stats
        self._info.add_metric(
            base,
            {
                "version": stats.version,
                "hostname": snapshot.hostname,
                "broadcast_address": snapshot.broadcast_address,
                "tcp_port": str(snapshot.tcp_port),
                "http_port": str(snapshot.http_port),
            },
        )
        self._start_time.add_metric(base, stats.start_time)
        self._uptime.add_metric(base, max(0.0, snapshot.now - stats.start_time))
        self._healthy.add_metric(base, 1 if stats.health == "OK" else 0)
        self._connections.add_metric(base, snapshot.connections)
        for topic in stats.topics or ():
            self._add_topic(base, topic)
        if isinstance(stats.memory, MemStats):
            self._add_memory(base, stats.memory)

    def add_unreachable(self, node: str) -> None:
        """Say that ``node`` did not answer (``nsqd_up`` 0); only with the node label."""
        if not self.node_label:
            raise ValueError("a node is unreachable only to an exporter with the node label")
        self._up.add_metric([node], 0)

    def _add_topic(self, base: list[str], topic: TopicStats) -> None:
        labels = [*base, topic.topic_name, _bool(topic.paused)]
        _add_numbers(self._topic, labels, topic)
        for quantile, value in _quantiles(topic.e2e_processing_latency):
            _add_quantile(self._topic_latency, self._topic_labels, labels, quantile, value)
        for channel in topic.channels:
            self._add_channel([*base, topic.topic_name], channel)

    def _add_channel(self, base: list[str], channel: ChannelStats) -> None:
        labels = [*base, channel.channel_name, _bool(channel.paused)]
        _add_numbers(self._channel, labels, channel)
        for quantile, value in _quantiles(channel.e2e_processing_latency):
            _add_quantile(self._channel_latency, self._channel_labels, labels, quantile, value)

    def _add_memory(self, base: list[str], memory: MemStats) -> None:
        _add_numbers(self._memory, base, memory)
        for quantile, usec in (
            (0.95, memory.gc_pause_usec_95),
            (0.99, memory.gc_pause_usec_99),
            (1.0, memory.gc_pause_usec_100),
        ):
            _add_quantile(self._gc_pauses, self._base, base, quantile, usec / 1e6)

    def collect(self) -> list[Metric]:
        """Every family that has samples, in a stable order (node, topics, channels, memory)."""
        families: list[Metric] = [
            self._up,
            self._info,
            self._start_time,
            self._uptime,
            self._healthy,
            self._connections,
            *(family for _, family in self._topic),
            self._topic_latency,
            *(family for _, family in self._channel),
            self._channel_latency,
            *(family for _, family in self._memory),
            self._gc_pauses,
        ]
        return [family for family in families if family.samples]


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _add_numbers(numbers: _Numbers, labels: list[str], row: object) -> None:
    for field, family in numbers:
        family.add_metric(labels, getattr(row, field))


def _quantiles(result: QuantileResult) -> list[tuple[float, float]]:
    """nsqd's latency percentiles (ns) as ``(quantile, seconds)``."""
    return [(p.quantile, p.value / 1e9) for p in result.percentiles or ()]


def _add_quantile(
    family: SummaryMetricFamily,
    names: list[str],
    labels: list[str],
    quantile: float,
    value: float,
) -> None:
    """One quantile sample of a summary.

    Summaries here have no ``_count`` or ``_sum``: nsqd's latency count is of the samples in
    its sliding window, not a running total, and nsqd keeps no sum.
    """
    sample_labels = dict(zip(names, labels, strict=True))
    sample_labels["quantile"] = repr(float(quantile))  # as prometheus_client writes them
    family.add_sample(family.name, sample_labels, value)
