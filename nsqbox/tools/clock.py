"""``nsqbox clock``: read and move a box's broker time, through the admin service (issue #24).

::

    nsqbox clock now                 # broker time of every clock the admin service finds
    nsqbox clock advance 1h          # move every manual clock an hour ahead (or 90, 1m30s)

Both talk to the admin service's ``/api/clock`` (``--admin-http-address``, default
``127.0.0.1:4171``, where ``nsqbox up`` serves it). Only a box started with
``nsqbox up --clock manual`` moves; a refusal prints the admin service's message and exits
with status 1. ``--json`` prints the answer as JSON.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import httpx

from ..goflags import FlagSet
from .common import Fatal, ParsedArgs, run_tool

__all__ = ["clock_flag_set", "format_clocks", "main"]

USAGE = "usage: nsqbox clock now | advance DURATION (seconds, or a Go duration: 1h, 90s)"


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
        moved = f", {clock['offset']:g}s ahead" if clock.get("offset") else ""
        fired = f", {clock['fired']} fired" if "fired" in clock else ""
        nodes = " ".join(clock.get("nodes", []))
        lines.append(f"{_when(float(clock['now']))} ({clock['mode']}{moved}{fired}) {nodes}")
    if not lines:
        lines.append("no node answered with a clock (nsqbox's servers have one; real NSQ not)")
    if doc.get("message"):
        lines.append(str(doc["message"]))
    return "\n".join(lines) + "\n"


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
        raise Fatal(str(doc.get("message") or f"{response.status_code} {response.text.strip()}"))
    return doc


def run(flags: FlagSet, args: ParsedArgs, out: TextIO | None = None) -> int:
    """Do what ``args`` asks; print the answer."""
    match args.positional:
        case ["now"]:
            doc = _call(flags, "GET", "/api/clock", {})
        case ["advance", by]:
            doc = _call(flags, "POST", "/api/clock/advance", {"by": by})
        case _:
            raise Fatal(USAGE)
    text = json.dumps(doc) + "\n" if flags["json"].value.value else format_clocks(doc)
    (out or sys.stdout).write(text)
    return 0


def main(argv: list[str]) -> int:
    """``nsqbox clock now|advance D [flags]``; the exit status."""
    flags = clock_flag_set()
    return run_tool(flags, argv, lambda args: run(flags, args), version="nsqbox clock")
