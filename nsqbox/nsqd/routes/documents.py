"""What nsqd's HTTP API answers besides its routes: ``/config`` values, ``/stats`` as text,
and ``/debug``'s snapshot (the routes themselves are :mod:`nsqbox.nsqd.routes.nsqd`).
"""

from __future__ import annotations

import datetime
import functools
import gc
import sys
import time
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from ... import NSQ_VERSION, __version__, program_version
from ...go.syntax import format_duration_ns
from ...http import HTTPError, Response
from ..domain.quantile import QuantileResult
from ..domain.stats import ChannelStats, MemStats, TopicStats, client_line, memory_stats
from ..statsd import statsd_prefix

if TYPE_CHECKING:
    from ...go.options import OptionFlag
    from ..domain.nsqd import NSQD
    from ..domain.stats import ClientStats

__all__ = [
    "GO_LOG_LEVELS",
    "config_value",
    "debug_snapshot",
    "duration_ns",
    "render_stats_text",
]

# Go's lg levels as /config/log_level reports them (a Go int).
GO_LOG_LEVELS: Final = {"debug": 1, "info": 2, "warn": 3, "error": 4, "fatal": 5}

# crypto/tls version numbers, as /config/tls_min_version reports them.
_TLS_VERSIONS: Final = {"tls1.0": 0x0301, "tls1.1": 0x0302, "tls1.2": 0x0303, "tls1.3": 0x0304}


@functools.cache
def _config_options() -> dict[str, OptionFlag]:
    """nsqd's flag-tagged options by config name: what GET /config/:opt can read.

    (--allowed-host is nsqbox's: real nsqd answers INVALID_OPTION for it.) Built on the
    first ``/config`` request: nsqd's flag table is not loaded to start a node.
    """
    from ..config import ALLOWED_HOST_FLAG, NSQD_OPTION_FLAGS

    return {flag.config_key: flag for flag in NSQD_OPTION_FLAGS if flag is not ALLOWED_HOST_FLAG}


def duration_ns(seconds: float) -> int:
    """A duration as Go's JSON writes a ``time.Duration``: integer nanoseconds."""
    return round(seconds * 1e9)


def config_value(nsqd: NSQD, cfg_name: str) -> object:
    """nsqd's getOptByCfgName: a flag option by config name, with Go's JSON types.

    Durations are Go ns integers, the log level and TLS version Go's numbers.
    The statsd prefix is the one nsqd computes at start (host filled in, a
    trailing dot), and lookupd addresses set to ``null`` read back as null.
    """
    from ..config import TLS_MIN_VERSION_KIND, Kind

    opts = nsqd.options
    flag = _config_options().get(cfg_name)
    if flag is None:
        raise HTTPError(400, "INVALID_OPTION")
    if cfg_name == "statsd_prefix":
        return statsd_prefix(
            opts.statsd_prefix,
            opts.effective_broadcast_address(),
            opts.broadcast_http_port or nsqd.http_port,
        )
    if cfg_name == "nsqlookupd_tcp_addresses" and opts.lookupd_tcp_addresses_null:
        # A nil slice in a non-nil interface: Go's RespondV1 encodes it as null
        # (where a bare None would be an empty body).
        return Response.json(None)
    value = getattr(opts, flag.attr)
    match flag.kind:
        case Kind.DURATION:
            return duration_ns(value)
        case Kind.LOG_LEVEL:
            return GO_LOG_LEVELS.get(value, 0)
    if flag.kind is TLS_MIN_VERSION_KIND:
        return _TLS_VERSIONS.get(value.lower(), 0)
    return value


# -- the text format of /stats (nsqd's printStats) --------------------------


def render_stats_text(
    nsqd: NSQD,
    topics: list[TopicStats],
    producers: list[ClientStats],
    memory: MemStats | None,
) -> str:
    """``/stats`` without ``format=json``: nsqd's human-readable report, line for line."""
    started = datetime.datetime.fromtimestamp(nsqd.start_time).astimezone()
    uptime = format_duration_ns(int((time.time() - nsqd.start_time) * 1e9))
    lines = [
        program_version("nsqd"),
        f"start_time {_rfc3339(started)}",
        f"uptime {uptime}",
        "",
        f"Health: {nsqd.get_health()}",
    ]
    if memory is not None:
        lines += ["", "Memory:"]
        lines += [f"   {key:<25}\t{value}" for key, value in msgspec.structs.asdict(memory).items()]
    lines.append("")
    lines.append("Topics: None" if not topics else "Topics:")
    for i, t in enumerate(topics):
        if i:
            lines.append("")  # printStats starts every topic after the first with a newline
        lines.append(
            f"{'*P ' if t.paused else '   '}[{t.topic_name:<15}] depth: {t.depth:<5d} "
            f"be-depth: {t.backend_depth:<5d} msgs: {t.message_count:<8d} "
            f"e2e%: {t.e2e_processing_latency}"
        )
        for c in t.channels:
            lines.append(_channel_line(c))
            lines += [f"        {client_line(client)}" for client in c.clients or ()]
    lines.append("")
    if not producers:
        lines.append("Producers: None")
    else:
        lines.append("Producers:")
        lines += [f"   {client_line(client)}" for client in producers]
    return "\n".join(lines) + "\n"


def _channel_line(c: ChannelStats) -> str:
    latency: QuantileResult = c.e2e_processing_latency
    return (
        f"{'   *P ' if c.paused else '      '}[{c.channel_name:<25}] depth: {c.depth:<5d} "
        f"be-depth: {c.backend_depth:<5d} inflt: {c.in_flight_count:<4d} "
        f"def: {c.deferred_count:<4d} re-q: {c.requeue_count:<5d} "
        f"timeout: {c.timeout_count:<5d} msgs: {c.message_count:<8d} e2e%: {latency}"
    )


def _rfc3339(moment: datetime.datetime) -> str:
    text = moment.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


# -- /debug -------------------------------------------------------------------


def debug_snapshot(nsqd: NSQD) -> dict[str, object]:
    """What ``GET /debug`` shows instead of Go's pprof: the server's internals in JSON."""
    topics = []
    for topic in sorted(nsqd.topics.values(), key=lambda t: t.name):
        channels = [
            {
                "name": c.name,
                "paused": c.paused,
                "ephemeral": c.ephemeral,
                "memory_depth": len(c.memory),
                "backend_depth": c.backend_depth(),
                "in_flight": c.in_flight_count(),
                "deferred": c.deferred_count(),
                "clients": len(c.clients),
            }
            for c in sorted(topic.channels.values(), key=lambda c: c.name)
        ]
        topics.append(
            {
                "name": topic.name,
                "paused": topic.paused,
                "ephemeral": topic.ephemeral,
                "started": topic.started,
                "memory_depth": len(topic.memory),
                "backend_depth": topic.backend_depth(),
                "channels": channels,
            }
        )
    memory = memory_stats()
    return {
        "version": NSQ_VERSION,
        "nsqbox_version": __version__,
        "python": sys.version,
        "uptime_s": round(time.time() - nsqd.start_time, 3),
        "health": nsqd.get_health(),
        "trio_tasks": _count_trio_tasks(),
        "client_count": len(nsqd.clients),
        "rss_bytes": memory.heap_in_use_bytes,
        "gc": {"counts": list(gc.get_count()), "collections": memory.gc_total_runs},
        "topics": topics,
    }


def _count_trio_tasks() -> int:
    """Every task in this trio run (walks the task tree: cheap for a debug page)."""
    count = 0
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count
