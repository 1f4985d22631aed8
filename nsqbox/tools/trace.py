"""``nsqbox trace TOPIC [CHANNEL]``: a live line per event of a topic's messages (issue #33).

::

    nsqbox trace orders                    # every event of topic orders, as it happens
    nsqbox trace orders billing --json     # one channel's events, as JSON lines
    nsqbox trace orders --lookupd-http-address 127.0.0.1:4161 -n 100

It follows the streaming form of each nsqd's journal (``GET /nsqbox/journal/stream``,
docs/journeys.md) and prints each event as it arrives, in the format of ``nsqbox journey``
(``--json``: one JSON line per event, with its ``node``). The nsqds are the
``--nsqd-http-address`` ones (default ``127.0.0.1:4151``) or every nsqd the
``--lookupd-http-address`` lookupds list when it starts. Events of one node come in its
order; several nodes' are printed as they come. ``-n N`` stops after N events; SIGINT or
SIGTERM stop it (exit status 0). Once every stream has started, it says so on stderr.

A stream lasts at most an hour: the trace goes on with a new one from where the last one
ended, and so it does, after a second, when a node restarts. When the trace reads more
slowly than a node records, the node's ring drops what the trace had not read yet: the
trace says how many entries it lost, on stderr, and goes on (docs/journeys.md, "The
bounds"). Real nsqd keeps no journal: its nodes are reported as "not supported by this
nsqd", and with no node to follow the exit status is 1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

from ..go.flags import FlagSet
from ..process.terminal_text import visible
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .common import STOP_SIGNALS, Fatal, ParsedArgs, run_tool, run_trio
from .journey import Nodes, add_node_flags, describe, event_json, node_options, nodes_of

if TYPE_CHECKING:
    import trio

__all__ = ["RETRY", "main", "trace_flag_set"]

#: How long the trace waits before it follows a node again that went away (seconds).
RETRY: Final = 1.0


@dataclass(slots=True)
class TraceOptions:
    """What ``nsqbox trace`` was asked to do."""

    topic: str
    channel: str
    kinds: str
    count: int
    as_json: bool
    nodes: Nodes


USAGE = """\
usage: nsqbox trace TOPIC [CHANNEL] [flags]
  a line per event of TOPIC's messages (of CHANNEL's copies only) as it happens
"""


def trace_flag_set() -> FlagSet:
    """``nsqbox trace``'s flags."""
    flags = FlagSet("nsqbox trace")
    flags.add_string("kind", "", "only these kinds of event (comma-separated)")
    flags.add_int("n", 0, "stop after this many events (0: at SIGINT or SIGTERM)")
    add_node_flags(flags)
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> TraceOptions:
    positional = list(args.positional)
    if not positional or len(positional) > 2:
        raise Fatal("usage: nsqbox trace TOPIC [CHANNEL] [flags]")
    topic = positional[0]
    channel = positional[1] if len(positional) > 1 else ""
    if not is_valid_topic_name(topic):
        raise Fatal(f"invalid topic name {visible(topic)!r}")
    if channel and not is_valid_channel_name(channel):
        raise Fatal(f"invalid channel name {visible(channel)!r}")
    count = int(flags["n"].value.value)
    if count < 0:
        raise Fatal("-n must not be negative")
    return TraceOptions(
        topic=topic,
        channel=channel,
        kinds=str(flags["kind"].value.value),
        count=count,
        as_json=bool(flags["json"].value.value),
        nodes=node_options(flags),
    )


class Trace:
    """The lines printed so far, and when the trace is done."""

    def __init__(self, options: TraceOptions, out: TextIO, several: bool) -> None:
        import trio

        self.options = options
        self.out = out
        self.several = several
        self.shown = 0
        self.done = trio.Event()

    def show(self, event: dict[str, Any], *, flush: bool = True) -> None:
        """Print one event (``flush``: and what was printed before); set :attr:`done` when
        ``-n`` is reached or stdout went away."""
        if self.done.is_set():
            return
        options = self.options
        line = event_json(event) if options.as_json else describe(event, node=self.several, id=True)
        self.shown += 1
        last = bool(options.count and self.shown >= options.count)
        try:
            self.out.write(line + "\n")
            if flush or last:
                self.out.flush()
        except BrokenPipeError:  # `nsqbox trace t | head -3`
            self.done.set()
            return
        if last:
            self.done.set()


def _note(text: str) -> None:
    sys.stderr.write(f"nsqbox trace: {visible(text)}\n")
    sys.stderr.flush()


async def _follow(node: str, trace: Trace, *, task_status: trio.TaskStatus[str | None]) -> None:
    """Print ``node``'s events until cancelled: a stream, then the next from its end.

    Reports ``task_status`` once the first stream has started (None), or why it could not
    (and returns); later failures are noted and followed by a new stream.
    """
    import trio

    from ..client.journal import JournalError
    from ..client.journal_stream import open_journal_stream

    options = trace.options
    params: dict[str, str | int] = {"topic": options.topic}
    if options.channel:
        params["channel"] = options.channel
    if options.kinds:
        params["kind"] = options.kinds
    after: int | None = None
    started = False
    timeout = options.nodes.timeout
    while True:
        query = params if after is None else {**params, "after": after}
        try:
            async with open_journal_stream(node, query, connect_timeout=timeout) as stream:
                async for doc in stream:
                    marker = doc.get("marker")
                    following = doc.get("next") if marker else doc.get("n")
                    if isinstance(following, int) and not isinstance(following, bool):
                        after = following
                    if marker is None:
                        # flushed once per piece the node sent, not per line
                        trace.show({**doc, "node": node}, flush=not stream.buffered)
                    elif marker == "start" and not started:
                        started = True
                        task_status.started(None)
                    elif marker == "lost":
                        lost = doc.get("entries")
                        _note(f"{node}: lost {lost} journal entries (read too slowly)")
        except JournalError as exc:
            if not started:
                task_status.started(str(exc))
                return
            _note(f"{exc}; following it again in {RETRY:g}s")
            await trio.sleep(RETRY)


async def _trace(options: TraceOptions) -> None:
    import httpx
    import trio

    with httpx.Client(timeout=options.nodes.timeout, trust_env=False) as blocking:
        addresses = nodes_of(blocking, options.nodes)
    trace = Trace(options, sys.stdout, len(addresses) > 1)
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            following = 0
            for node in addresses:
                why = await nursery.start(_follow, node, trace)
                if why is None:
                    following += 1
                else:
                    _note(why)
            if not following:
                raise Fatal("no nsqd to follow")
            place = f"{options.topic}/{options.channel}" if options.channel else options.topic
            _note(f"following {place} on {following} nsqd(s); Ctrl-C stops")

            async def stop_on_signal() -> None:
                async for _ in signals:
                    trace.done.set()

            nursery.start_soon(stop_on_signal)
            await trace.done.wait()
            nursery.cancel_scope.cancel()


def main(argv: list[str]) -> int:
    """``nsqbox trace TOPIC [CHANNEL]``; returns the exit status."""
    flags = trace_flag_set()

    def body(args: ParsedArgs) -> int:
        return run_trio(_trace, _options(flags, args))

    return run_tool(flags, argv, body, synopsis=USAGE)
