"""``nsqbox snapshot``: save a running box's state to a file, and load one into a box (issue #34).

::

    nsqbox snapshot save FILE        # every nsqd of the box, one consistent cut
    nsqbox snapshot load FILE        # into a running box (merged with what it holds)
    nsqbox snapshot load FILE --replace  # instead of what it holds
    nsqbox snapshot check FILE       # read a snapshot strictly; say what it holds

``save`` and ``load`` reach the box through its admin service (``--admin-http-address``,
default ``127.0.0.1:4171``): ``save`` asks it for one cut of every nsqd (``POST
/api/snapshot``), then fetches each node's records from the node; ``load`` finds the nsqds in
the box's node order (``GET /api/faults``). With ``--nsqd-http-address`` (repeated, node 0
first) they talk to those nsqds directly, and ``save`` cuts them one after the other (a
consistent cut of each node, not of all of them at once). A name ending in ``.gz`` is gzip.
The format is docs/state.md's; a damaged or truncated file is refused with the line it failed
on, before anything is loaded. ``--replace`` makes each nsqd of the box hold what the file says
and nothing else (every topic, channel and message the file does not list goes, in the same
pass as the load on that node). ``nsqbox up --load FILE`` loads one into a new box.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import httpx

from ..go.flags import FlagSet
from ..net.unreachable import unreachable_reason
from ..snapshot.files import SnapshotSummary, check_snapshot
from ..snapshot.format import SnapshotError
from ..snapshot.transfer import Cut, SnapshotTransferError, cut_nodes, load, save
from .common import Fatal, ParsedArgs, run_tool

__all__ = ["main", "snapshot_flag_set"]

USAGE = """\
usage: nsqbox snapshot COMMAND FILE [flags]
  save FILE              save every nsqd of the box (one consistent cut) to FILE (.gz: gzip)
  load FILE              load FILE into the running box's nsqds (merged with what they hold;
                         --replace: instead of it)
  check FILE             read FILE strictly and say what it holds
"""


def snapshot_flag_set() -> FlagSet:
    """``nsqbox snapshot``'s flags."""
    flags = FlagSet("nsqbox snapshot")
    flags.add_string("admin-http-address", "127.0.0.1:4171", "the admin service's HTTP address")
    flags.add_string_array(
        "nsqd-http-address", "an nsqd's HTTP address, instead of the admin's (node 0 first)"
    )
    flags.add_string("user", "", "the admin user to send (for an admin service with --admin-user)")
    flags.add_string("acl-http-header", "X-Forwarded-User", "the header naming the admin user")
    flags.add_duration("http-client-request-timeout", 300.0, "timeout for HTTP request")
    flags.add_bool(
        "replace", False, "load: remove every topic, channel and message the file does not hold"
    )
    return flags


def _admin(flags: FlagSet) -> str:
    address = str(flags["admin-http-address"].value.value)
    return address if "://" in address else f"http://{address}"


def _http_failure(exc: httpx.HTTPError, peer: str = "") -> str:
    """What an HTTP failure says: the address (after ``peer``, e.g. "the admin service at ")
    and why, once each (``cannot reach 127.0.0.1:4151: connection refused``)."""
    try:
        where = peer + exc.request.url.netloc.decode("ascii", "replace")
    except RuntimeError:  # no request: nothing to name
        return str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return f"cannot reach {where}: {unreachable_reason(exc)}"
    return f"{where}: {unreachable_reason(exc)}"


def _admin_doc(client: httpx.Client, method: str, url: str) -> dict[str, Any]:
    try:
        response = client.request(method, url)
    except httpx.HTTPError as exc:
        raise Fatal(_http_failure(exc, "the admin service at ")) from None
    try:
        doc: dict[str, Any] = response.json()
    except ValueError:
        doc = {}
    if response.status_code != 200:
        raise Fatal(f"the admin service answered {response.status_code} {doc.get('message', '')}")
    return doc


def _nsqds(flags: FlagSet, client: httpx.Client) -> list[str]:
    given = [str(a) for a in flags["nsqd-http-address"].value.value]
    if given:
        return given
    doc = _admin_doc(client, "GET", f"{_admin(flags)}/api/faults")
    control = [n for n in doc.get("control") or [] if n.get("role") == "nsqd"]
    if not control:
        raise Fatal("the admin service runs no box: name the nodes with --nsqd-http-address")
    return [str(n["node"]) for n in sorted(control, key=lambda n: int(n["index"]))]


def _cuts(flags: FlagSet, client: httpx.Client) -> list[Cut]:
    if flags["nsqd-http-address"].value.value:
        return cut_nodes(client, [str(a) for a in flags["nsqd-http-address"].value.value])
    doc = _admin_doc(client, "POST", f"{_admin(flags)}/api/snapshot")
    return [
        Cut.of(f"http://{c['http_address']}", c)
        for c in sorted(doc.get("cuts") or [], key=lambda c: int(c["node"]))
    ]


def describe(summary: SnapshotSummary) -> str:
    """One line: what a snapshot holds."""
    header = summary.header
    clock = f", manual clock at +{header.clock_offset:g}s" if header.clock == "manual" else ""
    return (
        f"{_count(summary.messages, 'message')} in {_count(summary.topics, 'topic')} and "
        f"{_count(summary.channels, 'channel')} on {header.nodes} nsqd(s){clock}\n"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _loaded(path: str, answers: list[dict[str, Any]], replace: bool) -> str:
    """The line ``load`` prints: how many messages went in, and what a replace removed."""
    loaded = sum(int(a.get("messages", 0)) for a in answers)
    line = f"loaded {path}: {loaded} messages into {len(answers)} nsqd(s)"
    if replace:
        removed = [a.get("removed") or {} for a in answers]
        topics, channels, messages = (
            sum(int(r.get(key, 0)) for r in removed) for key in ("topics", "channels", "messages")
        )
        line += (
            f", replacing what they held (removed {_count(topics, 'topic')}, "
            f"{_count(channels, 'channel')} and {_count(messages, 'message')})"
        )
    return line + "\n"


def run(flags: FlagSet, args: ParsedArgs, out: TextIO | None = None) -> int:
    """Do what ``args`` asks; print what was saved, loaded or checked."""
    out = out or sys.stdout
    match args.positional:
        case [("save" | "load" | "check") as command, path]:
            pass
        case []:
            raise Fatal(f"no command\n{USAGE.rstrip()}")
        case [("save" | "load" | "check"), *rest] if not rest:
            raise Fatal(f"{args.positional[0]} takes a FILE\n{USAGE.rstrip()}")
        case [("save" | "load" | "check"), _, extra, *_]:
            raise Fatal(f"unexpected argument {extra!r}\n{USAGE.rstrip()}")
        case [other, *_]:
            raise Fatal(f"unknown command {other!r}\n{USAGE.rstrip()}")
    if flags["replace"].value.value and command != "load":
        raise Fatal(f"--replace is for load, not {command}")
    headers = {}
    if flags["user"].value.value:
        headers[str(flags["acl-http-header"].value.value)] = str(flags["user"].value.value)
    timeout = float(flags["http-client-request-timeout"].value.value)
    try:
        if command == "check":
            out.write(f"{path}: {describe(check_snapshot(path))}")
            return 0
        with httpx.Client(timeout=timeout, headers=headers, trust_env=False) as client:
            if command == "save":
                summary = save(client, path, _cuts(flags, client))
                out.write(f"saved {path}: {describe(summary)}")
            else:
                replace = bool(flags["replace"].value.value)
                answers = load(client, path, _nsqds(flags, client), replace=replace)
                out.write(_loaded(path, answers, replace))
    except SnapshotError as exc:
        if command == "check":  # it loads nothing: it says what is wrong with the file
            raise Fatal(f"{path} is not a valid snapshot: {exc}") from None
        raise Fatal(f"{path} refused, nothing loaded: {exc}") from None
    except (SnapshotTransferError, OSError) as exc:
        raise Fatal(f"snapshot {command} failed: {exc}") from None
    except httpx.HTTPError as exc:
        raise Fatal(f"snapshot {command} failed: {_http_failure(exc)}") from None
    return 0


def main(argv: list[str]) -> int:
    """``nsqbox snapshot save|load|check FILE [flags]``; the exit status."""
    flags = snapshot_flag_set()
    return run_tool(flags, argv, lambda args: run(flags, args), synopsis=USAGE)
