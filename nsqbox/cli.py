"""The ``nsqbox`` command: ``nsqbox <command> [flags]`` (also ``python -m nsqbox``).

Commands live in :data:`SUBCOMMANDS` as ``"module:function"`` strings, imported only when run, so
``nsqbox --version`` stays light and each command adds one line here. A command function takes
the arguments after its name and returns the exit status.
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from nsqbox import NSQ_VERSION, __version__, program_version
from nsqbox.go.flags import FlagSet, parse_or_exit
from nsqbox.net.addresses import format_address
from nsqbox.nsqd.config import ConfigError, NSQDCommand, nsqd_flag_set, parse_nsqd_args
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.process.logs import configure_logging, unconfigure_logging

logger = logging.getLogger("nsqbox.cli")

#: Commands that exist: name -> "module:function" taking ``argv`` and returning the exit status.
SUBCOMMANDS: dict[str, str] = {
    "up": "nsqbox.run.up:main",
    "nsqd": "nsqbox.cli:nsqd_main",
    "lookupd": "nsqbox.lookupd.server:main",
    "admin": "nsqbox.admin.server:main",
    "tui": "nsqbox.admin.tui.cli:main",
    "pub": "nsqbox.tools.pub:main",
    "tail": "nsqbox.tools.tail:main",
    "stat": "nsqbox.tools.stat:main",
    "fault": "nsqbox.tools.faults:main",
    "clock": "nsqbox.tools.clock:main",
    "snapshot": "nsqbox.tools.snapshot:main",
    "record": "nsqbox.tools.record:main",
    "replay": "nsqbox.tools.replay:main",
    "docs": "nsqbox.tools.docs:main",
}

#: One line of help per command.
SUMMARIES: dict[str, str] = {
    "up": "run the whole box in one process: nsqlookupd, nsqd(s) and the admin service",
    "nsqd": "run an nsqd; takes NSQ nsqd's flags",
    "lookupd": "run an nsqlookupd; takes NSQ nsqlookupd's flags",
    "admin": "run the admin service (nsqadmin's /api); takes nsqadmin's flags",
    "tui": "the terminal admin UI, for nsqbox or any NSQ cluster",
    "pub": "publish messages to a topic",
    "tail": "print the messages of a topic",
    "stat": "print topic and channel statistics",
    "fault": "make the box misbehave on purpose: list, add and lift faults, restart nodes",
    "clock": "read and move the box's broker time (nsqbox up --clock manual)",
    "snapshot": "save the box's state to a file, load one into it (docs/state.md)",
    "record": "keep every message published to a topic in a file (docs/state.md)",
    "replay": "publish a recording again, with its spacing or faster (docs/state.md)",
    "docs": "print the documentation that ships with nsqbox (nsqbox docs testing)",
}

# How nsqd labels fatal start-up errors (main.go's logFatal always uses this prefix).
_NSQD_PREFIX = "[nsqd] "


def version_line() -> str:
    """What ``nsqbox --version`` prints."""
    return f"nsqbox {__version__} (NSQ {NSQ_VERSION} protocol)"


def nsqd_version_line() -> str:
    """What ``nsqbox nsqd --version`` prints, shaped like nsqd's own line for scripts."""
    return program_version("nsqd")


def usage() -> str:
    """The top-level help text."""
    width = max(len(name) for name in SUMMARIES)
    lines = [f"  {name:<{width}}  {text}" for name, text in SUMMARIES.items()]
    return (
        "usage: nsqbox <command> [flags]\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\n'nsqbox --version' prints the version; 'nsqbox <command> -h' lists its flags.\n"
    )


def _load(target: str) -> Callable[[list[str]], int] | None:
    """Import ``module:function``; None when the module (not one of its imports) is missing."""
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            return None
        raise
    func: Callable[[list[str]], int] | None = getattr(module, attr, None)
    return func


def main(argv: list[str] | None = None) -> int:
    """Run ``nsqbox`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:
        sys.stderr.write(usage())
        return 2
    name, rest = args[0], args[1:]
    if name in ("--version", "-version"):
        print(version_line())
        return 0
    if name in ("-h", "--help", "-help", "help"):
        sys.stdout.write(usage())
        return 0
    target = SUBCOMMANDS.get(name)
    func = _load(target) if target else None
    if func is None:
        if name in SUMMARIES:
            print(f"nsqbox: '{name}' is not available yet", file=sys.stderr)
        else:
            print(f"nsqbox: unknown command '{name}'\n", file=sys.stderr)
            sys.stderr.write(usage())
        return 2
    try:
        return func(rest)
    except KeyboardInterrupt:  # a second Ctrl-C while shutting down
        return 130
    finally:
        unconfigure_logging()


# --- nsqd and up --------------------------------------------------------------------------------


def fatal(message: str, prefix: str = _NSQD_PREFIX) -> int:
    """Log ``message`` as nsqd's logFatal does and return nsqd's exit status for it."""
    configure_logging("info", prefix)
    logger.critical("%s", message)
    return 1


def parse_nsqd_command(argv: list[str], flags: FlagSet, defaults: NSQDOptions) -> NSQDCommand | int:
    """Parse an nsqd-style command line; an int is the exit status when there is nothing to run.

    ``flags`` is :func:`~nsqbox.nsqd.config.nsqd_flag_set` built with ``defaults``, perhaps with
    more flags added (``nsqbox up`` adds its own).
    """
    try:
        command = parse_or_exit(lambda: parse_nsqd_args(argv, defaults=defaults, flags=flags))
    except ConfigError as exc:
        return fatal(str(exc))
    if isinstance(command, int):
        return command
    if command.args and not command.show_version:
        # nsqd silently ignores these, and with them every flag after them ("-snappy false"
        # stops parsing at "false"); refusing is kinder than running with half the flags.
        print(
            f"{flags.name}: unexpected argument {command.args[0]!r}; "
            "flags must come first and boolean flags take values as -flag=false",
            file=sys.stderr,
        )
        return 2
    return command


def nsqd_main(argv: list[str]) -> int:
    """``nsqbox nsqd [flags]``: an nsqd, with nsqd's flags and config file."""
    defaults = NSQDOptions()
    flags = nsqd_flag_set("nsqbox nsqd", defaults)
    ready_json = flags.add_bool(
        "ready-json", False, "once listening, print the addresses as one JSON line on stdout"
    )
    command = parse_nsqd_command(argv, flags, defaults)
    if isinstance(command, int):
        return command
    if command.show_version:
        print(nsqd_version_line())
        return 0
    return _serve(command.options, label="nsqbox nsqd", ready_json=ready_json.value)


@dataclass(slots=True)
class _RunState:
    started: bool = False


def _serve(options: NSQDOptions, *, label: str, ready_json: bool) -> int:
    """Run the services until SIGINT or SIGTERM; the exit status."""
    import trio  # not at the top: ``nsqbox --version`` and ``-h`` should not pay for it

    from nsqbox.nsqd.domain.metadata import MetadataError
    from nsqbox.nsqd.domain.nsqd import ShutdownError

    configure_logging(options.log_level, options.log_prefix)
    state = _RunState()
    message: str | None = None
    interrupted = False
    try:
        trio.run(_run_until_signal, options, label, ready_json, state)
    except* KeyboardInterrupt:  # Ctrl-C before the signal receiver, or a second one after it
        interrupted = True
    except* ShutdownError as group:  # each failure was logged already: a summary line
        message = str(first_error(group))
    except* MetadataError as group:  # nsqd: logFatal("failed to load metadata - %s")
        message = f"failed to load metadata - {first_error(group)}"
    except* (OSError, ValueError) as group:
        if state.started:
            raise  # after start-up these are bugs, and a traceback is what helps
        message = f"failed to instantiate nsqd - {first_error(group)}"
    if message is not None:
        return fatal(message)
    return 130 if interrupted else 0


def first_error(error: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: the one worth one line."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def _run_until_signal(
    options: NSQDOptions, label: str, ready_json: bool, state: _RunState
) -> None:
    import trio

    from nsqbox.nsqd.server import serve_nsqd  # the server stack loads only when it runs
    from nsqbox.process.service import serve_until_signalled

    async def start(nursery: trio.Nursery) -> None:
        addrs = await nursery.start(serve_nsqd, options)
        state.started = True
        tcp = format_address(addrs.tcp)
        http = format_address(addrs.http) if addrs.http else None
        services = f"nsqd (TCP {tcp}, HTTP {http or 'off'})"
        where = f"; data in {options.data_path or os.getcwd()}"
        print(f"{label}: running {services}{where}; Ctrl-C stops", file=sys.stderr)
        if ready_json:
            ready = {"nsqd_tcp_address": tcp, "nsqd_http_address": http}
            print(json.dumps(ready), flush=True)
        # What start-up made (modules, classes, functions) lives as long as the process:
        # moved out of the collector's reach, a full collection walks only what came after
        # (about 17 ms less each on a slow core, a pause every message waits out).
        gc.freeze()

    await serve_until_signalled(start, logger)
