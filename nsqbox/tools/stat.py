"""``nsqbox stat``: poll a channel's stats across its nsqds and print them, like ``nsq_stat``.

Both a topic and a channel are required (``--topic``/``--channel``, or the first two
arguments), as ``nsq_stat`` requires both: the counters are one channel's.

Every ``--interval`` it finds the topic's nsqds (through ``--lookupd-http-address``, or among
``--nsqd-http-address``, default ``127.0.0.1:4151``), sums the channel's ``/stats`` over them, and
prints one line: ingress and egress rates, depth (total, memory, disk), in-flight, deferred,
requeued, timed out, messages and clients — with ``nsq_stat``'s header every 25 lines. The first
poll only sets the baseline; ``--count N`` stops after N lines. Any failed request is fatal (exit
status 1), as in ``nsq_stat``; SIGINT or SIGTERM stop it with status 0.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from ..go.flags import FlagSet
from ..go.syntax import parse_int
from .common import (
    DEFAULT_NSQD_HTTP,
    STOP_SIGNALS,
    Fatal,
    ParsedArgs,
    run_tool,
    run_trio,
)

if TYPE_CHECKING:
    from ..admin.clusterinfo import ClusterInfo
    from ..admin.stats import ChannelStats

__all__ = ["format_header", "format_row", "main", "stat_flag_set"]

HEADER_EVERY = 25

USAGE = """\
usage: nsqbox stat [--topic] TOPIC [--channel] CHANNEL [flags]
  both TOPIC and CHANNEL are required, as nsq_stat requires both: the counters are one channel's
"""


@dataclass(frozen=True, slots=True)
class StatOptions:
    """What ``nsqbox stat`` was asked to do."""

    topic: str
    channel: str
    interval: float
    count: int | None
    nsqd_http_addresses: list[str]
    lookupd_http_addresses: list[str]
    connect_timeout: float
    request_timeout: float


def stat_flag_set() -> FlagSet:
    """``nsqbox stat``'s flags (``nsq_stat``'s)."""
    flags = FlagSet("nsqbox stat")
    flags.add_string("topic", "", "NSQ topic (required; or the first argument)")
    flags.add_string("channel", "", "NSQ channel (required; or the second argument)")
    flags.add_duration("interval", 2.0, "duration of time between polling/printing output")
    flags.add_string("count", "", "number of reports (default: until stopped)")
    flags.add_string_array(
        "nsqd-http-address",
        f"nsqd HTTP address (may be given multiple times; default {DEFAULT_NSQD_HTTP})",
    )
    flags.add_string_array(
        "lookupd-http-address", "lookupd HTTP address (may be given multiple times)"
    )
    flags.add_duration("http-client-connect-timeout", 2.0, "timeout for HTTP connect")
    flags.add_duration("http-client-request-timeout", 5.0, "timeout for HTTP request")
    flags.add_bool("version", False, "print version")
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> StatOptions:
    def value(name: str) -> Any:
        return flags[name].value.value

    topic, channel = str(value("topic")), str(value("channel"))
    positional = list(args.positional)
    if not topic and positional:
        topic = positional.pop(0)
    if not channel and positional:
        channel = positional.pop(0)
    if positional:
        raise Fatal(f"unexpected argument {positional[0]!r}")
    if not topic or not channel:
        raise Fatal("--topic and --channel are required")
    interval = float(value("interval"))
    if interval <= 0:
        raise Fatal("--interval should be positive")
    for name in ("http-client-connect-timeout", "http-client-request-timeout"):
        if float(value(name)) <= 0:
            raise Fatal(f"--{name} should be positive")
    count: int | None = None
    if flags.is_set("count"):
        try:
            count = parse_int(str(value("count")), 10, 32)
        except ValueError:
            raise Fatal(f"invalid value {value('count')!r} for --count") from None
        if count <= 0:
            raise Fatal("--count should be positive")
    nsqds: list[str] = list(value("nsqd-http-address"))
    lookupds: list[str] = list(value("lookupd-http-address"))
    if nsqds and lookupds:
        raise Fatal("use --nsqd-http-address or --lookupd-http-address not both")
    if not nsqds and not lookupds:
        nsqds = [DEFAULT_NSQD_HTTP]
    for flag, addresses in (("nsqd-http-address", nsqds), ("lookupd-http-address", lookupds)):
        if any(a.startswith("http") for a in addresses):
            raise Fatal(f"--{flag} error - address should not contain scheme")
    return StatOptions(
        topic=topic,
        channel=channel,
        interval=interval,
        count=count,
        nsqd_http_addresses=nsqds,
        lookupd_http_addresses=lookupds,
        connect_timeout=float(value("http-client-connect-timeout")),
        request_timeout=float(value("http-client-request-timeout")),
    )


def format_header() -> str:
    """``nsq_stat``'s two header lines."""
    return (
        "------rate------+----------------depth----------------+"
        "--------------metadata---------------\n"
        f"{'ingress':>7} {'egress':>7} | {'total':>7} {'mem':>7} {'disk':>7} {'inflt':>5} "
        f"{'def':>5} | {'req':>7} {'t-o':>7} {'msgs':>12} {'clients':>7}\n"
    )


def format_row(now: ChannelStats, before: ChannelStats, interval: float) -> str:
    """One ``nsq_stat`` line: rates over ``interval`` seconds since ``before``, then ``now``."""
    published = now.message_count - before.message_count
    ingress = int(published / interval)
    egress = int((published - (now.depth - before.depth)) / interval)
    return (
        f"{ingress:7d} {egress:7d} | {now.depth:7d} {now.memory_depth:7d} "
        f"{now.backend_depth:7d} {now.in_flight_count:5d} {now.deferred_count:5d} | "
        f"{now.requeue_count:7d} {now.timeout_count:7d} {now.message_count:12d} "
        f"{now.client_count:7d}\n"
    )


async def _channel_stats(info: ClusterInfo, options: StatOptions) -> ChannelStats:
    from ..admin.clusterinfo import ClusterError
    from ..admin.stats import aggregate_channel

    topic, channel = options.topic, options.channel
    try:
        producers = await info.topic_producers(
            topic, options.lookupd_http_addresses, options.nsqd_http_addresses
        )
    except ClusterError as exc:
        raise Fatal(f"ERROR: failed to get topic producers - {exc}") from None
    if producers.errors:
        raise Fatal(f"ERROR: failed to get topic producers - {producers.errors[0]}")
    try:
        stats = await info.nsqd_stats(
            producers.value, topic=topic, channel=channel, include_clients=False
        )
    except ClusterError as exc:
        raise Fatal(f"ERROR: failed to get nsqd stats - {exc}") from None
    if stats.errors:
        raise Fatal(f"ERROR: failed to get nsqd stats - {stats.errors[0]}")
    rows = [c for t in stats.value for c in t.channels if c.channel_name == channel]
    if not rows:
        raise Fatal(
            f"ERROR: failed to find channel({channel}) in stats metadata for topic({topic})"
        )
    return aggregate_channel(topic, channel, rows)


async def _stat_loop(options: StatOptions, out: TextIO) -> None:
    import trio

    from ..admin.clusterinfo import ClusterInfo, make_http_client

    async with make_http_client(options.connect_timeout, options.request_timeout) as client:
        info = ClusterInfo(client)
        before: ChannelStats | None = None
        i = 0
        while options.count is None or i <= options.count:
            now = await _channel_stats(info, options)
            if i % HEADER_EVERY == 0:
                out.write(format_header())
            if before is not None:
                out.write(format_row(now, before, options.interval))
            out.flush()
            before = now
            i += 1
            if options.count is not None and i > options.count:
                break
            await trio.sleep(options.interval)


async def _stat(options: StatOptions) -> None:
    import trio

    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_signal)
            await _stat_loop(options, sys.stdout)
            nursery.cancel_scope.cancel()


def main(argv: list[str]) -> int:
    """``nsqbox stat``; returns the exit status."""
    flags = stat_flag_set()
    return run_tool(
        flags,
        argv,
        lambda args: run_trio(_stat, _options(flags, args)),
        synopsis=USAGE,
        version="nsqbox stat",
    )
