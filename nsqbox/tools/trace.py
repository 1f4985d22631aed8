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
ended. When a node stops, crashes or restarts under it, the trace says so on stderr ("lost
the stream to NODE: it closed") and tries the node again every second, for
``--reconnect-timeout`` (default 60s; 0: for as long as the trace runs, as ``nsq_tail`` and
go-nsq's consumers reconnect to an nsqd they were given). A node back within that time is
followed again from where its stream ended, or, when it restarted, from the start of its
new journal (everything it recorded since it came back is printed); a node
gone for longer is given up on, and once no node is left to follow the trace exits with
status 1, as it does when no node can be followed at the start. When the trace reads more
slowly than a node records, the node's ring drops what the trace had not read yet: the
trace says how many entries it lost, on stderr, and goes on (docs/journeys.md, "The
bounds"). Real nsqd keeps no journal: its nodes are reported as "not supported by this
nsqd".
"""

from __future__ import annotations

import atexit
import gc
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

__all__ = ["RECONNECT_TIMEOUT", "RETRY", "main", "trace_flag_set"]

#: How long the trace waits before it tries again a node that went away (seconds).
RETRY: Final = 1.0
#: How long it tries a node that went away before it gives up on it, by default (seconds):
#: go-nsq's consumers try an nsqd again every minute (its ``LookupdPollInterval``).
RECONNECT_TIMEOUT: Final = 60.0


@dataclass(slots=True)
class TraceOptions:
    """What ``nsqbox trace`` was asked to do."""

    topic: str
    channel: str
    kinds: str
    count: int
    as_json: bool
    nodes: Nodes
    #: How long a node that went away is tried again (seconds; 0: as long as the trace runs).
    reconnect_timeout: float


USAGE = """\
usage: nsqbox trace TOPIC [CHANNEL] [flags]
  a line per event of TOPIC's messages (of CHANNEL's copies only) as it happens; a node that
  stops or restarts is tried again every second for --reconnect-timeout, and the trace exits
  with status 1 once no node is left to follow
"""


def trace_flag_set() -> FlagSet:
    """``nsqbox trace``'s flags."""
    flags = FlagSet("nsqbox trace")
    flags.add_string("kind", "", "only these kinds of event (comma-separated)")
    flags.add_int("n", 0, "stop after this many events (0: at SIGINT or SIGTERM)")
    flags.add_duration(
        "reconnect-timeout",
        RECONNECT_TIMEOUT,
        "how long to try again an nsqd that went away before giving up on it (0: forever)",
    )
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
    kinds = str(flags["kind"].value.value)
    from ..admin.journal import KINDS  # the kinds nsqd names: one that is not, said here

    unknown = [kind for kind in kinds.split(",") if kind and kind not in KINDS]
    if unknown:
        raise Fatal(f"unknown kind {visible(unknown[0])!r} (kinds: {', '.join(KINDS)})")
    reconnect_timeout = float(flags["reconnect-timeout"].value.value)
    if reconnect_timeout < 0:
        raise Fatal("--reconnect-timeout must not be negative")
    return TraceOptions(
        topic=topic,
        channel=channel,
        kinds=kinds,
        count=count,
        as_json=bool(flags["json"].value.value),
        nodes=node_options(flags),
        reconnect_timeout=reconnect_timeout,
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
        #: The nodes followed now; when the last one is given up on, the trace is over.
        self.following = 0
        self.stranded = False

    def drop_node(self) -> None:
        """A node that was followed is given up on; the trace is done when none is left."""
        self.following -= 1
        if self.following <= 0:
            self.stranded = True
            self.done.set()

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


def _query(options: TraceOptions, after: int | None, journal: str) -> dict[str, str | int]:
    """The stream's parameters: the trace's filters, and where to go on from (``after``, an
    event number of the node's journal named ``journal``)."""
    params: dict[str, str | int] = {"topic": options.topic}
    if options.channel:
        params["channel"] = options.channel
    if options.kinds:
        params["kind"] = options.kinds
    if after is not None:
        params["after"] = after
        params["journal"] = journal  # a restarted node's new journal starts from its oldest
    return params


async def _follow(node: str, trace: Trace, *, task_status: trio.TaskStatus[str | None]) -> None:
    """Print ``node``'s events until cancelled: a stream, then the next from its end.

    Reports ``task_status`` once the first stream has started (None), or why it could not
    (and returns). A stream lost later is noted and followed by a new one, tried every
    :data:`RETRY` seconds for the trace's ``reconnect_timeout``; past it, the node is given
    up on (:meth:`Trace.drop_node`) and this returns.
    """
    import trio

    from ..client.journal import JournalError, JournalUnsupported
    from ..client.journal_stream import open_journal_stream

    options = trace.options
    bound = options.reconnect_timeout
    timeout = options.nodes.timeout
    after: int | None = None
    journal = ""  # the name of the journal ``after`` counts in
    started = False
    #: When the node went away (trio time), until a new stream of it starts.
    gone_since: float | None = None
    while True:
        opened = trio.current_time()
        try:
            async with open_journal_stream(
                node, _query(options, after, journal), connect_timeout=timeout
            ) as stream:
                async for doc in stream:
                    marker = doc.get("marker")
                    following = doc.get("next") if marker else doc.get("n")
                    if isinstance(following, int) and not isinstance(following, bool):
                        after = following
                    if marker == "start" and isinstance(doc.get("journal"), str):
                        journal = doc["journal"]
                    if marker is None:
                        # flushed once per piece the node sent, not per line
                        trace.show({**doc, "node": node}, flush=not stream.buffered)
                    elif marker == "start" and not started:
                        started = True
                        trace.following += 1
                        task_status.started(None)
                    elif marker == "start" and gone_since is not None:
                        gone_since = None
                        _note(f"following {node} again")
                    elif marker == "lost":
                        lost = doc.get("entries")
                        _note(f"{node}: lost {lost} journal entries (read too slowly)")
            if not started:  # no start marker: not a journal stream
                task_status.started(f"{node}: the stream ended before it started")
                return
            # the stream ended (max_ms): go on with a new one at once, unless the node ends
            # its streams as soon as they start (it is not asked again in a tight loop)
            if trio.current_time() - opened < RETRY:
                await trio.sleep(RETRY)
            continue
        except JournalUnsupported as exc:  # came back without a journal: no use trying
            if not started:
                task_status.started(str(exc))
                return
            _note(f"{exc}; no longer following it")
            trace.drop_node()
            return
        except JournalError as exc:  # JournalStreamLost too: "lost the stream to NODE: ..."
            if not started:
                task_status.started(str(exc))
                return
            if gone_since is None:
                how_long = f" for up to {bound:g}s" if bound else ""
                _note(f"{exc}; following it again (trying every {RETRY:g}s{how_long})")
        now = trio.current_time()
        if gone_since is None:
            gone_since = now
        elif bound and now - gone_since >= bound:
            _note(f"gave up on {node}: gone for {bound:g}s (--reconnect-timeout)")
            trace.drop_node()
            return
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
    if trace.stranded:
        raise Fatal("no nsqd left to follow")


def main(argv: list[str]) -> int:
    """``nsqbox trace TOPIC [CHANNEL]``; returns the exit status."""
    # Once the trace is over the process ends, and Python's shutdown runs full collections
    # over every object start-up made (trio, httpx, h11 and nsqbox's modules: some 38,000):
    # 0.1 s after the last line on an idle machine, over a second on a busy one, with nothing
    # left to do. Moved out of the collector's reach at exit, the process ends at once.
    # (At exit, not now: a caller running this in its own process keeps its collector.)
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    flags = trace_flag_set()

    def body(args: ParsedArgs) -> int:
        return run_trio(_trace, _options(flags, args))

    return run_tool(flags, argv, body, synopsis=USAGE)
