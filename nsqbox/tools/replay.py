"""``nsqbox replay FILE --topic T``: publish a recording's messages again (issue #34).

::

    nsqbox replay orders.jsonl.gz --topic orders-copy              # with the recorded spacing
    nsqbox replay orders.jsonl.gz --topic orders --speed 10x       # ten times as fast
    nsqbox replay orders.jsonl.gz --topic orders --speed max       # as fast as nsqd takes them
    nsqbox replay orders.jsonl.gz --topic orders --channel billing # into one channel (nsqbox)
    nsqbox replay orders.jsonl.gz --topic orders --step            # under the manual clock

FILE is a snapshot (docs/state.md): a recording of ``nsqbox record``, or any snapshot. It is
read whole and checked first, so a damaged or truncated file is refused with the line it
failed on and nothing is published. Then its message lines are published, in the file's order,
to ``--topic`` through the nsqd at ``--nsqd-http-address``, with the recorded spacing divided
by ``--speed`` (:func:`nsqbox.snapshot.replay.replay`: wall time).

``--channel C`` publishes into that one channel of the topic and no other, through nsqbox's
``POST /nsqbox/channel/mpub`` (the topic and channel are created if need be). Real
nsqd has no such route (it answers ``404``: a topic gives every message to all its channels),
and replay says so before publishing anything.

``--step`` follows the box's manual broker clock instead of wall time: the file is handed to
the nsqd, which publishes each message when broker time reaches its recorded offset from the
first (divided by ``--speed``), so ``nsqbox clock advance`` publishes exactly the messages due
(:func:`nsqbox.snapshot.replay.start_step_replay`). The command returns once the nsqd took the
file, having published the messages at offset 0.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

import httpx

from ..go.flags import FlagSet
from ..snapshot.files import check_snapshot
from ..snapshot.format import SnapshotError
from ..snapshot.replay import (
    BATCH_BYTES,
    BATCH_MESSAGES,
    ReplayError,
    replay,
    start_step_replay,
)
from ..snapshot.speed import parse_speed as parse_factor
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .common import DEFAULT_NSQD_HTTP, Fatal, ParsedArgs, run_tool

__all__ = ["BATCH_BYTES", "BATCH_MESSAGES", "main", "parse_speed", "replay_flag_set"]


@dataclass(slots=True)
class ReplayOptions:
    """What ``nsqbox replay`` was asked to do."""

    path: str
    topic: str
    channel: str
    #: How much faster than recorded; None: as fast as possible.
    speed: float | None
    nsqd_http: str
    timeout: float
    #: Follow the box's manual broker clock (the nsqd publishes), not wall time.
    step: bool = False


def parse_speed(text: str) -> float | None:
    """``--speed``: ``max`` (None), or a factor such as ``10x``, ``0.5x`` or ``2``."""
    try:
        return parse_factor(text)
    except ValueError as exc:
        raise Fatal(f"--{exc}") from None


def replay_flag_set() -> FlagSet:
    """``nsqbox replay``'s flags."""
    flags = FlagSet("nsqbox replay")
    flags.add_string("topic", "", "the topic to publish to (required)")
    flags.add_string("channel", "", "publish into this channel of the topic only (nsqbox only)")
    flags.add_string("speed", "1x", "the recorded spacing's speed-up (10x), or max")
    flags.add_bool("step", False, "publish as the box's manual broker clock reaches each message")
    flags.add_string("nsqd-http-address", DEFAULT_NSQD_HTTP, "the nsqd's HTTP address")
    flags.add_duration("http-client-request-timeout", 30.0, "timeout for HTTP request")
    return flags


def _options(flags: FlagSet, args: ParsedArgs) -> ReplayOptions:
    match args.positional:
        case [path]:
            pass
        case []:
            raise Fatal("FILE required: nsqbox replay FILE --topic T")
        case [_, extra, *_]:
            raise Fatal(f"unexpected argument {extra!r}")
    topic = str(flags["topic"].value.value)
    if not topic:
        raise Fatal("--topic required")
    if not is_valid_topic_name(topic):
        raise Fatal(f"invalid topic name {topic!r}")
    channel = str(flags["channel"].value.value)
    if channel and not is_valid_channel_name(channel):
        raise Fatal(f"invalid channel name {channel!r}")
    http = str(flags["nsqd-http-address"].value.value)
    speed = parse_speed(str(flags["speed"].value.value))
    step = bool(flags["step"].value.value)
    if step and speed is None:
        raise Fatal("--step publishes at the recorded offsets: --speed max has none")
    return ReplayOptions(
        path=path,
        topic=topic,
        channel=channel,
        speed=speed,
        nsqd_http=http if "://" in http else f"http://{http}",
        timeout=float(flags["http-client-request-timeout"].value.value),
        step=step,
    )


def run(options: ReplayOptions, out: TextIO | None = None) -> int:
    """Check the file, then replay it; print what was published."""
    out = out or sys.stdout
    try:
        summary = check_snapshot(options.path)
    except SnapshotError as exc:
        raise Fatal(f"{options.path} refused, nothing published: {exc}") from None
    except OSError as exc:
        raise Fatal(f"cannot read {options.path}: {exc}") from None
    where = f"{options.topic}/{options.channel}" if options.channel else options.topic
    try:
        with httpx.Client(timeout=options.timeout, trust_env=False) as client:
            if options.step:
                assert options.speed is not None
                started = start_step_replay(
                    client,
                    options.path,
                    options.nsqd_http,
                    options.topic,
                    channel=options.channel,
                    speed=options.speed,
                )
                out.write(
                    f"replaying {started.messages} messages to {where} under the broker clock "
                    f"(replay {started.id}): {started.published} published at once, the others "
                    "as the clock reaches them (nsqbox clock advance)\n"
                )
                return 0
            sent = replay(
                client,
                options.path,
                options.nsqd_http,
                options.topic,
                channel=options.channel,
                speed=options.speed,
            )
    except SnapshotError as exc:
        raise Fatal(f"{options.path} refused by the nsqd, nothing published: {exc}") from None
    except ReplayError as exc:
        raise Fatal(str(exc)) from None
    out.write(f"replayed {sent} of {summary.messages} messages to {where}\n")
    return 0


def main(argv: list[str]) -> int:
    """``nsqbox replay FILE --topic T``; the exit status."""
    flags = replay_flag_set()
    return run_tool(flags, argv, lambda args: run(_options(flags, args)))
