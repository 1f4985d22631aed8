"""What ``nsqbox pub``, ``tail`` and ``stat`` share: command lines, fatal errors, signals.

The tools take Go-style flags as NSQ's own tools do (``-topic x``, ``--topic=x``), and also
positional arguments between them (``nsqbox pub orders -nsqd-tcp-address h:4150 '{"id":1}'``);
``--`` ends the flags.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import program_version
from ..go.flags import FlagSet, parse_or_exit

__all__ = [
    "DEFAULT_NSQD_HTTP",
    "DEFAULT_NSQD_TCP",
    "Fatal",
    "ParsedArgs",
    "go_log_line",
    "parse_args",
    "run_tool",
    "run_trio",
    "tool_version",
]

#: Where the tools look when given no address: the box's first nsqd at NSQ's default ports.
DEFAULT_NSQD_TCP = "127.0.0.1:4150"
DEFAULT_NSQD_HTTP = "127.0.0.1:4151"


class Fatal(Exception):
    """Stop the tool: print the message as Go's ``log.Fatal`` does and exit with status 1."""


def go_log_line(message: str) -> str:
    """``message`` as Go's standard logger prints it: ``2006/01/02 15:04:05 message``."""
    return f"{time.strftime('%Y/%m/%d %H:%M:%S')} {message}"


def tool_version(name: str) -> str:
    """A tool's ``--version`` line, shaped like NSQ's (``nsq_tail v1.3.0 (built w/go1.19.8)``)."""
    return program_version(name)


@dataclass(frozen=True, slots=True)
class ParsedArgs:
    """The positional arguments, in order; the flags' values are read from the flag set."""

    positional: list[str]


def parse_args(flags: FlagSet, argv: Sequence[str]) -> ParsedArgs:
    """Parse flags anywhere among positional arguments (Go's parser stops at the first one).

    Raises FlagError and HelpRequested as :meth:`FlagSet.parse` does.
    """
    args = list(argv)
    positional: list[str] = []
    while args:
        rest = flags.parse(args)
        consumed = len(args) - len(rest)
        if consumed and args[consumed - 1] == "--":
            positional.extend(rest)  # "--": everything after it is an argument
            break
        if not rest:
            break
        positional.append(rest[0])
        args = rest[1:]
    return ParsedArgs(positional)


def run_tool(
    flags: FlagSet,
    argv: Sequence[str],
    body: Callable[[ParsedArgs], int],
    *,
    synopsis: str = "",
    version: str = "",
) -> int:
    """Parse ``argv`` with ``flags``, run ``body``; map usage errors and :class:`Fatal`.

    A flag that does not parse exits 2 with the flag list, as Go's ``flag`` package (and so
    every NSQ tool) does; ``synopsis`` (a command's subcommands) goes before that list, and
    before ``-h``'s. With ``version`` (the tool's name), ``--version`` prints the tool's
    version instead of running ``body``.
    """
    args = parse_or_exit(lambda: parse_args(flags, argv), synopsis=synopsis)
    if isinstance(args, int):
        return args
    if version and flags["version"].value.value:
        print(tool_version(version))
        return 0
    try:
        return body(args)
    except Fatal as exc:
        sys.stdout.flush()
        print(go_log_line(str(exc)), file=sys.stderr)
        return 1


#: The signals that stop a tool (as NSQ's tools: SIGINT and SIGTERM).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def run_trio(async_fn: Callable[..., Awaitable[Any]], *args: Any) -> int:
    """``trio.run(async_fn, *args)``; 0 when it returns, 130 on Ctrl-C.

    A :class:`Fatal` raised inside (even within nurseries' exception groups) is re-raised
    bare, for :func:`run_tool` to report.
    """
    import trio

    fatal: BaseException | None = None
    status = 0
    try:
        trio.run(async_fn, *args)
    except* Fatal as group:
        fatal = _leaf(group)
    except* KeyboardInterrupt:
        status = 130
    if fatal is not None:
        raise fatal
    return status
