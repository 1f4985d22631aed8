"""``nsqbox journey ID``: what happened to one message, on every node (issue #33).

::

    nsqbox journey 0b5f3c6a2d1e0001                      # the nsqd at 127.0.0.1:4151
    nsqbox journey 0b5f3c6a2d1e0001 --lookupd-http-address 127.0.0.1:4161 --json

It reads each nsqd's journal (``GET /nsqbox/journal?id=ID``, every page) and prints the
message's events merged in broker-time order, one line each: the time (UTC), the node when
there are several, the kind, the topic and channel, then the event's fields as
``name=value`` (docs/journeys.md lists them; a ``deadline`` written as the time is).
``--json`` prints each event as one JSON line instead, with its ``node``. The nsqds are
the ``--nsqd-http-address`` ones (default ``127.0.0.1:4151``) or every nsqd the
``--lookupd-http-address`` lookupds list, as NSQ's tools take them.

Real nsqd keeps no journal: an nsqd without the route is reported as "not supported by this
nsqd" on stderr, and when no nsqd could be read the exit status is 1 (as it is when no node
has an event of the message). What a peer sent (user agents, hostnames, client ids) is
printed with its control characters made visible (:mod:`nsqbox.process.terminal_text`);
``--json`` escapes every character that is not printable ASCII.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from ..go.flags import FlagSet
from ..process.terminal_text import visible
from ..wire.names import is_valid_channel_name
from .common import DEFAULT_NSQD_HTTP, Fatal, ParsedArgs, run_tool

if TYPE_CHECKING:
    import httpx

__all__ = ["describe", "event_json", "journey_flag_set", "main", "nodes_of"]

#: The fields every event line starts with (the rest follow as ``name=value``).
_HEAD = ("n", "time", "kind", "topic", "channel", "id", "node")
#: The other fields that are broker times (ns): printed as the event's time is.
_TIMES = frozenset({"deadline"})


@dataclass(slots=True)
class Nodes:
    """Where the nsqds are: given, or to be asked of lookupds."""

    nsqds: list[str]
    lookupds: list[str]
    timeout: float


def add_node_flags(flags: FlagSet) -> None:
    """The flags that say which nsqds to read (``journey`` and ``trace`` share them)."""
    flags.add_string_array(
        "nsqd-http-address",
        f"nsqd HTTP address (may be given multiple times; default {DEFAULT_NSQD_HTTP})",
    )
    flags.add_string_array(
        "lookupd-http-address", "lookupd HTTP address (may be given multiple times)"
    )
    flags.add_bool("json", False, "print each event as one JSON line")
    flags.add_duration("http-client-request-timeout", 10.0, "timeout for HTTP request")


def node_options(flags: FlagSet) -> Nodes:
    """The nsqds (or lookupds) the flags name; :class:`Fatal` for both or a scheme."""
    nsqds = list(flags["nsqd-http-address"].value.value)
    lookupds = list(flags["lookupd-http-address"].value.value)
    if nsqds and lookupds:
        raise Fatal("use --nsqd-http-address or --lookupd-http-address not both")
    if not nsqds and not lookupds:
        nsqds = [DEFAULT_NSQD_HTTP]
    for flag, addresses in (("nsqd-http-address", nsqds), ("lookupd-http-address", lookupds)):
        if any("://" in a for a in addresses):
            raise Fatal(f"--{flag} error - address should not contain scheme")
    timeout = float(flags["http-client-request-timeout"].value.value)
    if timeout <= 0:
        raise Fatal("--http-client-request-timeout should be positive")
    return Nodes(nsqds, lookupds, timeout)


def nodes_of(client: httpx.Client, nodes: Nodes) -> list[str]:
    """The nsqds' HTTP addresses: the given ones, or those the lookupds list."""
    from ..client.journal import JournalError, lookupd_nsqds

    if not nodes.lookupds:
        return nodes.nsqds
    try:
        found = lookupd_nsqds(client, nodes.lookupds)
    except JournalError as exc:
        raise Fatal(str(exc)) from None
    if not found:
        raise Fatal("the lookupds list no nsqd")
    return found


USAGE = """\
usage: nsqbox journey ID [flags]
  ID is a message's id (16 hex digits): what happened to it on every nsqd given or listed
"""


def journey_flag_set() -> FlagSet:
    """``nsqbox journey``'s flags."""
    flags = FlagSet("nsqbox journey")
    flags.add_string("channel", "", "only this channel's events (the publish is the topic's)")
    add_node_flags(flags)
    return flags


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        text = visible(value.replace("\n", "\\n").replace("\t", "\\t"))
        return json.dumps(text, ensure_ascii=False) if (not text or " " in text) else text
    if isinstance(value, dict | list):
        return visible(json.dumps(value, ensure_ascii=True))
    return visible(str(value))


def _when(ns: Any) -> str:
    if not isinstance(ns, int) or isinstance(ns, bool):
        return "-"
    seconds, rest = divmod(ns, 1_000_000_000)
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return str(ns)
    return f"{stamp}.{rest // 1000:06d}"


def describe(event: dict[str, Any], *, node: bool = False, id: bool = False) -> str:
    """One event as a line for a terminal: time, (``node``), kind, topic/channel, (``id``),
    then the other fields as ``name=value``, every string made safe to show; a broker time
    (``deadline``) is written as the event's time is (UTC, to the microsecond)."""
    place = _value(event.get("topic", ""))
    if event.get("channel"):
        place += "/" + _value(event.get("channel"))
    parts = [_when(event.get("time"))]
    if node:
        parts.append(_value(event.get("node", "")))
    parts += [f"{_value(event.get('kind', '')):<9}", place]
    if id:
        parts.append(_value(event.get("id", "")))
    parts += [
        f"{k}={_value(_when(v) if k in _TIMES else v)}" for k, v in event.items() if k not in _HEAD
    ]
    return "  ".join(parts)


def event_json(event: dict[str, Any]) -> str:
    """One event as a JSON line: printable ASCII only (``\\uNNNN`` for anything else)."""
    return json.dumps(event, ensure_ascii=True).replace("\x7f", "\\u007f")


def _show(events: Sequence[dict[str, Any]], as_json: bool, several: bool, out: TextIO) -> None:
    for event in events:
        out.write((event_json(event) if as_json else describe(event, node=several)) + "\n")
    out.flush()


def main(argv: list[str]) -> int:
    """``nsqbox journey ID``; returns the exit status."""
    flags = journey_flag_set()

    def body(args: ParsedArgs) -> int:
        import httpx

        from ..client.journal import read_events

        if len(args.positional) != 1:
            raise Fatal("usage: nsqbox journey ID [flags] (one message id)")
        msg_id = args.positional[0].lower()  # nsqd writes its ids in lower case
        if len(msg_id) != 16 or msg_id.strip("0123456789abcdef"):
            raise Fatal(f"invalid message id {visible(args.positional[0])!r} (16 hex digits)")
        channel = str(flags["channel"].value.value)
        if channel and not is_valid_channel_name(channel):
            raise Fatal(f"invalid channel name {visible(channel)!r}")
        nodes = node_options(flags)
        with httpx.Client(timeout=nodes.timeout, trust_env=False) as client:
            addresses = nodes_of(client, nodes)
            merged = read_events(client, addresses, {"id": msg_id, "channel": channel})
        for why in merged.failed.values():
            sys.stderr.write(f"nsqbox journey: {visible(why)}\n")
        if len(merged.failed) == len(addresses):
            return 1
        if not merged.events:
            sys.stderr.write(f"nsqbox journey: no events of {msg_id} in the journal\n")
            return 1
        try:
            _show(merged.events, bool(flags["json"].value.value), len(addresses) > 1, sys.stdout)
        except BrokenPipeError:
            pass
        return 0

    return run_tool(flags, argv, body, synopsis=USAGE)
