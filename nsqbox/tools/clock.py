"""``nsqbox clock``: read and move a box's broker time, through the admin service (issue #24).

::

    nsqbox clock now                 # broker time of every clock the admin service finds
    nsqbox clock advance 1h          # move every manual clock an hour ahead (or 90, 1m30s)

Both talk to the admin service's ``/api/clock`` (``--admin-http-address``, default
``127.0.0.1:4171``, where ``nsqbox up`` serves it). Only a box started with
``nsqbox up --clock manual`` moves; a refusal prints a sentence saying why (with the admin
service's code) and exits with status 1. ``--json`` prints the answer as JSON.

The span is checked here before it is sent, so that "not a duration", "not forward" and "over
the cap" (:data:`~nsqbox.broker.clock.MAX_ADVANCE`, a year) each get their own sentence; the server
answers all three ``INVALID_BY``. ``advance -5s`` takes ``-5s`` as the span, not as a flag.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import httpx

from ..broker.clock import MAX_ADVANCE
from ..go.flags import FlagSet
from ..go.syntax import format_duration, parse_duration
from .common import Fatal, ParsedArgs, run_tool

__all__ = ["clock_flag_set", "explain", "format_clocks", "main", "span_seconds"]

USAGE = """\
usage: nsqbox clock COMMAND [flags]
  now                    the broker time of every clock the admin service finds
  advance DURATION       move every manual clock DURATION ahead (seconds, or a Go duration:
                         90, 1h, 1m30s; above 0, at most a year); nsqbox up --clock manual only
"""

#: What each of the admin service's refusals means, as a sentence.
MESSAGES = {
    "CLOCK_NOT_MANUAL": (
        "no clock the admin service found is manual: only a box started with "
        "'nsqbox up --clock manual' can be moved (a real clock follows real time)"
    ),
    "INVALID_BY": "the admin service refused the span (above 0 and at most a year)",
    "MISSING_ARG_BY": "advance needs a span of time, such as 1h or 90",
    "OFFSET_LIMIT": "the clock may be moved at most ten years in all",
    "NOT_FOUND": (
        "the admin service has no /api/clock: it is not nsqbox's, or it runs with "
        "--auth-http-address, which turns nsqbox's own routes off"
    ),
    "FORBIDDEN": (
        "the admin service only lets its admin users move time: pass --user "
        "(sent in --acl-http-header)"
    ),
}

#: A negative span (``-5s``, ``-90``): what ``advance`` takes as its argument, not as a flag.
_NEGATIVE_SPAN = re.compile(r"-[0-9.]")


def clock_flag_set() -> FlagSet:
    """``nsqbox clock``'s flags."""
    flags = FlagSet("nsqbox clock")
    flags.add_string("admin-http-address", "127.0.0.1:4171", "the admin service's HTTP address")
    flags.add_string("user", "", "the admin user to send (for an admin service with --admin-user)")
    flags.add_string("acl-http-header", "X-Forwarded-User", "the header naming the admin user")
    flags.add_bool("json", False, "print the admin service's answer as JSON")
    flags.add_duration("http-client-request-timeout", 60.0, "timeout for HTTP request")
    flags.add_bool("version", False, "print version")
    return flags


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def format_clocks(doc: dict[str, Any]) -> str:
    """One line per clock: its time, its mode, how far it was moved, its nodes."""
    lines = []
    for clock in doc.get("clocks", []):
        moved = f", {format_duration(float(clock['offset']))} ahead" if clock.get("offset") else ""
        fired = f", {clock['fired']} fired" if "fired" in clock else ""
        nodes = " ".join(clock.get("nodes", []))
        lines.append(f"{_when(float(clock['now']))} ({clock['mode']}{moved}{fired}) {nodes}")
    if not lines:
        lines.append("no node answered with a clock (nsqbox's servers have one; real NSQ not)")
    if doc.get("message"):
        lines.append(str(doc["message"]))
    return "\n".join(lines) + "\n"


def span_seconds(text: str) -> float:
    """The seconds ``advance TEXT`` moves, checked as the server checks them; Fatal, with a
    sentence, when TEXT is not a duration, not forward or over the one-year cap."""
    raw = text.strip()
    try:
        seconds = float(raw) if len(raw) <= 32 else math.nan
    except ValueError:
        try:
            seconds = parse_duration(raw)
        except ValueError:
            raise Fatal(
                f"{text!r} is not a span of time: give seconds (90, 1.5) or a Go duration "
                "(1h, 1m30s)"
            ) from None
    if not math.isfinite(seconds):
        raise Fatal(f"{text!r} is not a span of time: give a finite number of seconds")
    if seconds <= 0:
        raise Fatal(f"cannot advance by {text}: broker time only moves forward (above 0)")
    if seconds > MAX_ADVANCE:
        cap = format_duration(MAX_ADVANCE)
        raise Fatal(f"cannot advance by {text}: over the cap of one advance ({cap})")
    return seconds


def explain(code: str) -> str:
    """A sentence for one of the admin service's error codes (the code itself in brackets)."""
    if code.startswith("UPSTREAM_ERROR"):
        return f"no node answered the admin service [{code}]"
    sentence = MESSAGES.get(code)
    return f"{sentence} [{code}]" if sentence else code


def _call(flags: FlagSet, method: str, path: str, params: dict[str, str]) -> dict[str, Any]:
    def value(name: str) -> Any:
        return flags[name].value.value

    address = value("admin-http-address")
    headers = {value("acl-http-header"): value("user")} if value("user") else {}
    url = (address if "://" in address else f"http://{address}") + path
    try:
        response = httpx.request(
            method,
            url,
            params=params,
            headers=headers,
            timeout=value("http-client-request-timeout"),
            trust_env=False,
        )
    except httpx.HTTPError as exc:
        raise Fatal(f"cannot reach the admin service at {address}: {exc}") from None
    try:
        doc: dict[str, Any] = response.json()
    except ValueError:
        doc = {}
    if response.status_code != 200:
        code = str(doc.get("message") or f"{response.status_code} {response.text.strip()}")
        raise Fatal(explain(code))
    return doc


def run(flags: FlagSet, args: ParsedArgs, out: TextIO | None = None) -> int:
    """Do what ``args`` asks; print the answer."""
    match args.positional:
        case ["now"]:
            doc = _call(flags, "GET", "/api/clock", {})
        case ["advance", by]:
            span_seconds(by)  # the server's checks, each with its own sentence
            doc = _call(flags, "POST", "/api/clock/advance", {"by": by})
        case []:
            raise Fatal(f"no command\n{USAGE.rstrip()}")
        case ["advance"]:
            raise Fatal(f"advance takes a span of time (1h, 90)\n{USAGE.rstrip()}")
        case ["now" | "advance", *_]:
            extra = args.positional[1 if args.positional[0] == "now" else 2]
            raise Fatal(f"unexpected argument {extra!r}\n{USAGE.rstrip()}")
        case [other, *_]:
            raise Fatal(f"unknown command {other!r}\n{USAGE.rstrip()}")
    text = json.dumps(doc) + "\n" if flags["json"].value.value else format_clocks(doc)
    (out or sys.stdout).write(text)
    return 0


def negative_span_last(argv: Sequence[str]) -> list[str]:
    """``argv`` with each negative number or duration (``-5s``, ``-90``) before ``--`` moved
    just behind it, so the flag parser takes it as the argument it is, not as an unknown flag
    (no flag's name starts with a digit)."""
    args = list(argv)
    end = args.index("--") if "--" in args else len(args)
    spans = [arg for arg in args[:end] if _NEGATIVE_SPAN.match(arg)]
    if not spans:
        return args
    flags = [arg for arg in args[:end] if not _NEGATIVE_SPAN.match(arg)]
    return [*flags, "--", *spans, *args[end + 1 :]]


def main(argv: list[str]) -> int:
    """``nsqbox clock now|advance D [flags]``; the exit status."""
    flags = clock_flag_set()
    return run_tool(
        flags,
        negative_span_last(argv),
        lambda args: run(flags, args),
        synopsis=USAGE,
        version="nsqbox clock",
    )
