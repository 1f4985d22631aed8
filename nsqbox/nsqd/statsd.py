"""Push nsqd's stats to statsd over UDP (nsqd/statsd.go, internal/statsd, internal/writers).

Every ``--statsd-interval`` nsqd sends, for each topic and channel, gauges
(``depth``, ``backend_depth``, ``in_flight_count``, ``deferred_count``,
``clients``, e2e latency percentiles) and counters (``message_count``,
``message_bytes``, ``requeue_count``, ``timeout_count``) as the change since
its previous send, then the ``mem.*`` figures with ``--statsd-mem-stats``.
Lines are ``<prefix><name>:<value>|g`` or ``|c``, packed into datagrams of at
most ``--statsd-udp-packet-size`` bytes (a line never straddles two), and the
datagrams are spread over the interval minus one second, as nsqd does.

The pure parts (:func:`statsd_prefix`, :func:`render_lines`,
:func:`pack_lines`) are separate from the loop so they can be tested exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeAlias

import trio

from ..net.addresses import split_host_port
from ..wire.names import is_ephemeral
from .domain.quantile import QuantileResult
from .domain.stats import ChannelStats, MemStats, Stats, TopicStats, get_stats, memory_stats

if TYPE_CHECKING:
    from .domain.nsqd import NSQD

logger = logging.getLogger("nsqbox.nsqd")

# Line formatters: a gauge takes a value, a counter a delta.
_Line: TypeAlias = Callable[[str, float], str]
_Delta: TypeAlias = Callable[[str, int], str]


_NO_CHANNEL = ChannelStats("", 0, 0, 0, 0, 0, 0, 0, 0, None, False, QuantileResult())
_NO_TOPIC = TopicStats("", [], 0, 0, 0, 0, False, QuantileResult())


def host_key(host_port: str) -> str:
    """internal/statsd's HostKey: ``.`` and ``:`` become ``_``."""
    return host_port.replace(".", "_").replace(":", "_")


def statsd_prefix(prefix: str, broadcast_address: str, broadcast_http_port: int) -> str:
    """The effective ``--statsd-prefix``, as nsqd.New() computes it.

    ``%s`` becomes the host key of ``broadcast_address:broadcast_http_port``,
    and a non-empty prefix gets a trailing dot.
    """
    if not prefix:
        return ""
    host = f"[{broadcast_address}]" if ":" in broadcast_address else broadcast_address
    prefix = prefix.replace("%s", host_key(f"{host}:{broadcast_http_port}"))
    return prefix if prefix.endswith(".") else prefix + "."


def render_lines(
    prefix: str,
    stats: Stats,
    last: Stats | None,
    memory: MemStats | None = None,
    last_memory: MemStats | None = None,
    *,
    exclude_ephemeral: bool = False,
) -> list[str]:
    """Every statsd line of one send; counters are deltas from ``last``/``last_memory``."""
    return list(_lines(prefix, stats, last, memory, last_memory, exclude_ephemeral))


def _lines(
    prefix: str,
    stats: Stats,
    last: Stats | None,
    memory: MemStats | None,
    last_memory: MemStats | None,
    exclude_ephemeral: bool,
) -> Iterator[str]:
    def gauge(name: str, value: float) -> str:
        return f"{prefix}{name}:{int(value)}|g"

    def counter(name: str, delta: int) -> str:
        return f"{prefix}{name}:{delta}|c"

    previous = {t.topic_name: t for t in (last.topics or [])} if last else {}
    for topic in stats.topics or []:
        if exclude_ephemeral and is_ephemeral(topic.topic_name):
            continue
        # A topic not seen last time counts from zero.
        old = previous.get(topic.topic_name) or _NO_TOPIC
        key = f"topic.{topic.topic_name}"
        yield counter(f"{key}.message_count", topic.message_count - old.message_count)
        yield counter(f"{key}.message_bytes", topic.message_bytes - old.message_bytes)
        yield gauge(f"{key}.depth", topic.depth)
        yield gauge(f"{key}.backend_depth", topic.backend_depth)
        for p in topic.e2e_processing_latency.percentiles or []:
            yield gauge(f"{key}.e2e_processing_latency_{p.quantile * 100:.0f}", p.value)
        old_channels = {c.channel_name: c for c in old.channels}
        for channel in topic.channels:
            if exclude_ephemeral and is_ephemeral(channel.channel_name):
                continue
            yield from _channel_lines(
                f"{key}.channel.{channel.channel_name}",
                channel,
                old_channels.get(channel.channel_name) or _NO_CHANNEL,
                gauge,
                counter,
            )
    if memory is not None:
        yield gauge("mem.heap_objects", memory.heap_objects)
        yield gauge("mem.heap_idle_bytes", memory.heap_idle_bytes)
        yield gauge("mem.heap_in_use_bytes", memory.heap_in_use_bytes)
        yield gauge("mem.heap_released_bytes", memory.heap_released_bytes)
        yield gauge("mem.gc_pause_usec_100", memory.gc_pause_usec_100)
        yield gauge("mem.gc_pause_usec_99", memory.gc_pause_usec_99)
        yield gauge("mem.gc_pause_usec_95", memory.gc_pause_usec_95)
        yield gauge("mem.next_gc_bytes", memory.next_gc_bytes)
        runs_before = last_memory.gc_total_runs if last_memory else 0
        yield counter("mem.gc_runs", memory.gc_total_runs - runs_before)


def _channel_lines(
    key: str,
    channel: ChannelStats,
    old: ChannelStats,
    gauge: _Line,
    counter: _Delta,
) -> Iterator[str]:
    yield counter(f"{key}.message_count", channel.message_count - old.message_count)
    yield gauge(f"{key}.depth", channel.depth)
    yield gauge(f"{key}.backend_depth", channel.backend_depth)
    yield gauge(f"{key}.in_flight_count", channel.in_flight_count)
    yield gauge(f"{key}.deferred_count", channel.deferred_count)
    yield counter(f"{key}.requeue_count", channel.requeue_count - old.requeue_count)
    yield counter(f"{key}.timeout_count", channel.timeout_count - old.timeout_count)
    yield gauge(f"{key}.clients", channel.client_count)
    for p in channel.e2e_processing_latency.percentiles or []:
        yield gauge(f"{key}.e2e_processing_latency_{p.quantile * 100:.0f}", p.value)


def pack_lines(lines: list[str], packet_size: int) -> list[bytes]:
    """Pack ``line\\n`` records into datagrams of at most ``packet_size`` bytes.

    nsqd's BoundaryBufferedWriter: a record that does not fit flushes the
    datagram first, so no record is split; a single record longer than the
    limit goes out alone.
    """
    packets: list[bytes] = []
    current = bytearray()
    for line in lines:
        record = line.encode() + b"\n"
        if current and len(current) + len(record) > packet_size:
            packets.append(bytes(current))
            current.clear()
        current += record
    if current:
        packets.append(bytes(current))
    return packets


async def statsd_loop(nsqd: NSQD) -> None:
    """Send nsqd's stats to ``--statsd-address`` every ``--statsd-interval``, until cancelled.

    Reads ``nsqd.http_port`` for the prefix's host key, so start it once the
    HTTP listener is bound. A send that fails is logged and skipped.
    """
    opts = nsqd.options
    last: Stats | None = None
    last_memory: MemStats | None = None
    deadline = trio.current_time()
    while True:
        # A fixed cadence like Go's ticker: spreading the packets over the
        # interval must not stretch it, and missed ticks are dropped.
        deadline = max(deadline + opts.statsd_interval, trio.current_time())
        await trio.sleep_until(deadline)
        prefix = statsd_prefix(
            opts.statsd_prefix,
            opts.effective_broadcast_address(),
            opts.broadcast_http_port or nsqd.http_port,
        )
        stats = get_stats(nsqd, include_clients=False)
        memory = memory_stats() if opts.statsd_mem_stats else None
        lines = render_lines(
            prefix,
            stats,
            last,
            memory,
            last_memory,
            exclude_ephemeral=opts.statsd_exclude_ephemeral,
        )
        last = stats
        last_memory = memory if memory is not None else last_memory
        packets = pack_lines(lines, opts.statsd_udp_packet_size)
        logger.info("STATSD: pushing stats to %s", opts.statsd_address)
        try:
            await _send(opts.statsd_address, packets, max(0.0, opts.statsd_interval - 1.0))
        except OSError as exc:
            logger.error("failed to send stats to statsd(%s) - %s", opts.statsd_address, exc)


async def _send(address: str, packets: list[bytes], spread: float) -> None:
    """Send ``packets`` to ``address`` over UDP, spaced evenly over ``spread`` seconds."""
    host, port = split_host_port(address)
    info = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_DGRAM)
    family, type_, proto, _, sockaddr = info[0]
    with trio.socket.socket(family, type_, proto) as sock:
        await sock.connect(sockaddr)
        pause = spread / len(packets) if packets else 0.0
        for i, packet in enumerate(packets):
            if i and pause:
                await trio.sleep(pause)
            await sock.send(packet)
