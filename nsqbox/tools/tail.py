"""``nsqbox tail TOPIC``: print a topic's messages, like NSQ's ``nsq_tail``.

It subscribes on an ephemeral channel (``tailNNNNNN#ephemeral`` unless ``--channel`` names one),
so it takes a copy of every message without disturbing other consumers, and prints each body on
its own line, then FINs it. ``-n N`` stops after N messages (waiting for them if need be).

It reads from the nsqds given by ``--nsqd-tcp-address`` (default ``127.0.0.1:4150``) or from
every nsqd the ``--lookupd-http-address`` lookupds list for the topic, asking them again every
``--lookupd-poll-interval``. SIGINT or SIGTERM stop it (exit status 0).

On a terminal, each body's control characters (C0 but tab and newline, DEL, C1) and bytes that
are not UTF-8 are printed as ``\\xNN`` (:mod:`nsqbox.process.terminal_text`): a body is anybody's,
and
an escape sequence in it would talk to the terminal. Piped, or with ``--raw``, bodies are
written as they are, as ``nsq_tail`` writes them.

A topic with no channel keeps its messages for its first channel, and the tail's channel would
be that one: it takes them (``-n 3`` takes every buffered message and shows three). ``nsqbox
tail`` says so on stderr before it subscribes, in the case the TUI asks first
(:func:`~nsqbox.admin.first_channel.first_channel_warning`), when it can read the topic's
``/stats``: through the lookupds, or with ``--nsqd-tcp-address`` on the nsqd's HTTP port when
that is the next port (nsqd's own layout, 4150 and 4151), checked against its ``/info``.

It consumes with nsqbox's client (:func:`nsqbox.client.open_consumer`): RDY spread over the
nsqds, reconnects, and go-nsq's 5-attempt limit, as ``nsq_tail`` has from go-nsq.
"""

from __future__ import annotations

import logging
import random
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from .. import __version__
from ..go.flags import FlagSet
from ..net.addresses import split_host_port
from ..process.logs import configure_logging, parse_level
from ..process.terminal_text import visible, visible_bytes
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .common import (
    DEFAULT_NSQD_TCP,
    STOP_SIGNALS,
    Fatal,
    ParsedArgs,
    run_tool,
    run_trio,
)

if TYPE_CHECKING:
    from ..admin.clusterinfo import ClusterInfo
    from ..client import Message

__all__ = ["main", "tail_flag_set"]

log = logging.getLogger("nsqbox.tools.tail")

USER_AGENT = f"nsqbox-tail/{__version__}"
#: How long closing the consumers may take once done (the client's graceful close).
CLOSE_TIMEOUT = 2.0


@dataclass(slots=True)
class TailOptions:
    """What ``nsqbox tail`` was asked to do."""

    topics: list[str]
    channel: str
    count: int = 0
    max_in_flight: int = 200
    print_topic: bool = False
    nsqd_tcp_addresses: list[str] = field(default_factory=list)
    lookupd_http_addresses: list[str] = field(default_factory=list)
    lookupd_poll_interval: float = 10.0
    #: Write bodies as they are, even to a terminal.
    raw: bool = False


def tail_flag_set() -> FlagSet:
    """``nsqbox tail``'s flags (``nsq_tail``'s, plus a positional topic)."""
    flags = FlagSet("nsqbox tail")
    flags.add_string("channel", "", "NSQ channel (default: an ephemeral one of its own)")
    flags.add_int("max-in-flight", 200, "max number of messages to allow in flight")
    flags.add_int("n", 0, "total messages to show (will wait if starved)")
    flags.add_bool("print-topic", False, "print topic name where message was received")
    flags.add_bool(
        "raw", False, "write bodies as they are (default: controls as \\xNN on a terminal)"
    )
    flags.add_string_array(
        "nsqd-tcp-address",
        f"nsqd TCP address (may be given multiple times; default {DEFAULT_NSQD_TCP})",
    )
    flags.add_string_array(
        "lookupd-http-address", "lookupd HTTP address (may be given multiple times)"
    )
    flags.add_duration(
        "lookupd-poll-interval", 10.0, "how often to ask the lookupds for the topic's nsqds"
    )
    flags.add_string_array("topic", "NSQ topic (may be given multiple times, or as arguments)")
    flags.add_string("log-level", "warn", "log level: debug, info, warn, error or fatal")
    flags.add_bool("version", False, "print version string")
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> TailOptions:
    topics = [*flags["topic"].value.value, *args.positional]
    if not topics:
        raise Fatal("--topic required")
    nsqds = flags["nsqd-tcp-address"].value.value
    lookupds = flags["lookupd-http-address"].value.value
    if nsqds and lookupds:
        raise Fatal("use --nsqd-tcp-address or --lookupd-http-address not both")
    if not nsqds and not lookupds:
        nsqds = [DEFAULT_NSQD_TCP]
    for topic in topics:
        if not is_valid_topic_name(topic):
            raise Fatal(f"invalid topic name {topic!r}")
    channel = flags["channel"].value.value or f"tail{random.randrange(999999):06d}#ephemeral"
    if not is_valid_channel_name(channel):
        raise Fatal(f"invalid channel name {channel!r}")
    count = flags["n"].value.value
    max_in_flight = flags["max-in-flight"].value.value
    if 0 < count < max_in_flight:
        max_in_flight = count  # don't ask for more messages than wanted
    if max_in_flight < 1:
        raise Fatal("--max-in-flight must be positive")
    return TailOptions(
        topics=topics,
        channel=channel,
        count=count,
        max_in_flight=max_in_flight,
        print_topic=flags["print-topic"].value.value,
        nsqd_tcp_addresses=nsqds,
        lookupd_http_addresses=lookupds,
        lookupd_poll_interval=flags["lookupd-poll-interval"].value.value,
        raw=flags["raw"].value.value,
    )


class Tail:
    """What one ``nsqbox tail`` run has shown, and when it is done."""

    def __init__(self, options: TailOptions, out: BinaryIO, *, escape: bool = False) -> None:
        """Print to ``out``; ``escape`` shows control characters as ``\\xNN`` (a terminal)."""
        import trio

        self.options = options
        self.out = out
        self.escape = escape
        self.shown = 0
        self.done = trio.Event()

    def handler(self, topic: str) -> Callable[[Message], None]:
        """The consumer's message handler for ``topic``: print, then let it be finished."""

        def handle(message: Message) -> None:
            if self.done.is_set():  # more than -n arrived at once: leave them for others
                message.requeue(0, backoff=False)
                return
            self.show(topic, message.body)

        return handle

    def show(self, topic: str, body: bytes) -> None:
        """Print one message; set :attr:`done` when the count is reached."""
        prefix = topic.encode() + b" | " if self.options.print_topic else b""
        if self.escape:
            body = visible_bytes(body)
        try:
            self.out.write(prefix + body + b"\n")
            self.out.flush()
        except BrokenPipeError:  # the reader went away (`nsqbox tail t | head -1`)
            self.done.set()
            return
        self.shown += 1
        if self.options.count and self.shown >= self.options.count:
            self.done.set()


async def _check_reachable(address: str) -> None:
    """Fatal unless ``address`` accepts a TCP connection (nsq_tail exits when it cannot connect)."""
    import trio

    host, port = split_host_port(address)
    try:
        with trio.fail_after(5):
            stream = await trio.open_tcp_stream(host, port)
    except (OSError, trio.TooSlowError) as exc:
        raise Fatal(f"failed to connect to nsqd {address} - {exc}") from None
    await stream.aclose()


async def _nsqd_http_address(info: ClusterInfo, tcp_address: str) -> str | None:
    """The HTTP address of the nsqd at ``tcp_address`` when it is on the next port (checked
    against its ``/info``), else None: nsq_tail's flags name only TCP addresses."""
    from ..admin.stats import join_host_port

    host, port = split_host_port(tcp_address)
    candidate = join_host_port(host, port + 1)
    try:
        node = await info.node_info(candidate)
    except Exception:  # nothing there, not an nsqd: the check is skipped
        return None
    return candidate if node.tcp_port == port else None


async def _first_channel_warnings(options: TailOptions) -> list[tuple[str, int]]:
    """:func:`~nsqbox.admin.first_channel.first_channel_warning` for each topic whose
    ``/stats`` can be read, with the topic's depth; a topic that cannot be checked is passed
    over (debug log)."""
    from ..admin.clusterinfo import ClusterInfo, make_http_client
    from ..admin.first_channel import first_channel_warning
    from ..admin.stats import aggregate_topic

    warnings = []
    async with make_http_client(addresses=options.lookupd_http_addresses) as client:
        info = ClusterInfo(client, logger=log)
        nsqds = []
        if not options.lookupd_http_addresses:
            for address in options.nsqd_tcp_addresses:
                http = await _nsqd_http_address(info, address)
                if http is None:
                    log.debug("not checking %s's channels: no nsqd HTTP port found", address)
                    return []
                nsqds.append(http)
        for topic in options.topics:
            try:
                producers = await info.topic_producers(topic, options.lookupd_http_addresses, nsqds)
                stats = await info.nsqd_stats(producers.value, topic=topic, include_clients=False)
            except Exception as exc:  # ClusterError, a lookupd that does not know it yet
                log.debug("not checking topic %s's channels: %s", topic, exc)
                continue
            if producers.errors or stats.errors:  # part of the cluster unseen: cannot tell
                continue
            rows = [r for r in stats.value if r.topic_name == topic]
            row = aggregate_topic(topic, rows) if rows else None
            warning = first_channel_warning(row)
            if warning is not None and row is not None:
                warnings.append((warning, row.depth))
    return warnings


async def _tail(options: TailOptions) -> None:
    import trio

    from ..client import Config, open_consumer

    for address in options.nsqd_tcp_addresses:
        await _check_reachable(address)
    for warning, depth in await _first_channel_warnings(options):
        count = options.count
        lost = (
            f" (-n {count} prints {count:,} of them: the other {depth - count:,} are taken too)"
            if count and depth > count
            else ""
        )
        sys.stderr.write(
            f"nsqbox tail: WARNING: {visible(warning)}; tailing it anyway, as nsq_tail does{lost}\n"
        )
        sys.stderr.flush()
    config = Config(
        user_agent=USER_AGENT,
        max_in_flight=options.max_in_flight,
        lookupd_poll_interval=options.lookupd_poll_interval,
        close_timeout=CLOSE_TIMEOUT,
    )
    escape = not options.raw and sys.stdout.isatty()
    tail = Tail(options, sys.stdout.buffer, escape=escape)
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                async for _ in signals:
                    tail.done.set()

            nursery.start_soon(stop_on_signal)
            async with AsyncExitStack() as stack:
                for topic in options.topics:
                    await stack.enter_async_context(
                        open_consumer(
                            topic,
                            options.channel,
                            tail.handler(topic),
                            nsqd_tcp_addresses=options.nsqd_tcp_addresses,
                            lookupd_http_addresses=options.lookupd_http_addresses,
                            config=config,
                        )
                    )
                await tail.done.wait()
            # Leaving the stack closed the consumers gracefully (CLS, then the last FINs).
            nursery.cancel_scope.cancel()


def main(argv: list[str]) -> int:
    """``nsqbox tail TOPIC``; returns the exit status."""
    flags = tail_flag_set()

    def body(args: ParsedArgs) -> int:
        options = _options(flags, args)
        try:
            level = parse_level(flags["log-level"].value.value)
        except ValueError as exc:
            raise Fatal(str(exc)) from None
        configure_logging(level, "")
        return run_trio(_tail, options)

    return run_tool(flags, argv, body, version="nsqbox tail")
