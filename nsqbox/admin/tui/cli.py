"""``nsqbox tui``: the admin TUI against any NSQ cluster.

Flags follow nsqadmin's (Go style, one or two dashes): ``--lookupd-http-address`` or
``--nsqd-http-address`` (each repeatable, not both; with neither, the box's lookupd at
``127.0.0.1:4161``), plus ``--read-only``, ``--interval`` and ``--admin-http-address`` (nsqbox's
admin service: the Faults view then goes through it, and can restart the box's nodes; ``ctrl+s``
has it save a snapshot; the status line says where the box was loaded from)::

    nsqbox tui --lookupd-http-address 10.0.0.9:4161 --read-only

``--web`` serves the same TUI as a web page instead (:mod:`.web`: textual-serve, on
``--web-host``:``--web-port``, 127.0.0.1:4172 by default, to the holder of the printed URL's
token; ``--allowed-host`` adds Host names it answers); each browser tab runs ``nsqbox tui
--web-session`` with every other flag as given (``--admin-http-address`` included). A web
session saves listed messages only under ``--web-save-dir`` (without it, not at all).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ... import program_version
from ...go.flags import FlagSet, parse_or_exit
from ...go.syntax import format_duration_ns
from .web_access import DEFAULT_WEB_HOST, DEFAULT_WEB_PORT

if TYPE_CHECKING:  # Textual loads only when the app runs, not for -h or --version
    from .app import AdminApp

__all__ = [
    "DEFAULT_LOOKUPD_HTTP",
    "TUIOptions",
    "add_web_flags",
    "allowed_hosts",
    "main",
    "parse_tui_args",
    "tui_argv",
    "tui_command",
    "tui_flag_set",
    "web_port",
]

#: Where ``nsqbox tui`` looks with no address: the lookupd ``nsqbox up`` runs.
DEFAULT_LOOKUPD_HTTP = "127.0.0.1:4161"


@dataclass(frozen=True, slots=True)
class TUIOptions:
    """What ``nsqbox tui`` was asked to do."""

    lookupd_http_addresses: tuple[str, ...] = ()
    nsqd_http_addresses: tuple[str, ...] = ()
    read_only: bool = False
    interval: float = 2.0
    connect_timeout: float = 2.0
    request_timeout: float = 5.0
    #: Faults (and restarting nodes) through this admin service instead of the nodes.
    admin_http_address: str = ""
    #: Serve the TUI as a web page (on ``web_host``:``web_port``) instead of running it here.
    web: bool = False
    web_host: str = DEFAULT_WEB_HOST
    web_port: int = DEFAULT_WEB_PORT
    #: Host names the web page answers beside IP literals, localhost and the hostname.
    allowed_hosts: tuple[str, ...] = ()
    #: Where a web session may save files (empty: nowhere).
    web_save_dir: str = ""
    #: This TUI is a browser tab's (``--web-session``): it saves only under web_save_dir.
    web_session: bool = False


def tui_flag_set() -> FlagSet:
    """``nsqbox tui``'s flags."""
    flags = FlagSet("nsqbox tui")
    flags.add_string_array(
        "lookupd-http-address",
        f"lookupd HTTP address (may be given multiple times; default {DEFAULT_LOOKUPD_HTTP})",
    )
    flags.add_string_array("nsqd-http-address", "nsqd HTTP address (may be given multiple times)")
    flags.add_bool("read-only", False, "show the cluster, but offer no action that changes it")
    flags.add_string(
        "admin-http-address",
        "",
        "nsqbox's admin service (nsqbox up's), for the Faults view's restart, crash and start, "
        "and for saving snapshots (ctrl+s)",
    )
    flags.add_duration("interval", 2.0, "time between refreshes")
    flags.add_duration("http-client-connect-timeout", 2.0, "timeout for HTTP connect")
    flags.add_duration("http-client-request-timeout", 5.0, "timeout for HTTP request")
    add_web_flags(flags)
    flags.add_string_array(
        "allowed-host",
        "with --web: a Host name to answer besides IP addresses, localhost and "
        "this machine's name (may be given multiple times)",
    )
    flags.add_bool("web-session", False, "(set by --web) this TUI is a browser tab's")
    flags.add_bool("version", False, "print version string")
    return flags


def add_web_flags(flags: FlagSet, save_dir_default: str = "nowhere") -> None:
    """``--web``, ``--web-host``, ``--web-port`` and ``--web-save-dir`` (``nsqbox tui``'s and
    ``nsqbox up``'s; ``save_dir_default`` says where saving goes without the last)."""
    flags.add_bool("web", False, "serve the admin TUI as a web page (a TUI per browser tab)")
    flags.add_string("web-host", DEFAULT_WEB_HOST, "with --web: the address to listen on")
    flags.add_int(
        "web-port", DEFAULT_WEB_PORT, "with --web: the port to listen on (0: any free port)"
    )
    flags.add_string(
        "web-save-dir",
        "",
        "with --web: the directory a tab may save listed messages under "
        f"(default {save_dir_default})",
    )


def allowed_hosts(flags: FlagSet) -> tuple[str, ...]:
    """``--allowed-host``'s names, when ``flags`` has that flag (else none)."""
    if "allowed-host" not in flags:
        return ()
    return tuple(str(h) for h in flags["allowed-host"].value.value)


def web_port(flags: FlagSet) -> int:
    """``--web-port``; ValueError when it is not a port."""
    port = int(flags["web-port"].value.value)
    if not 0 <= port <= 65535:
        raise ValueError("--web-port must be in [0, 65535]")
    return port


class UsageError(Exception):
    """Flags that cannot work together (exit status 2)."""


def parse_tui_args(argv: Sequence[str]) -> TUIOptions | None:
    """The options, or None for ``--version``.

    Raises HelpRequested, FlagError, or UsageError for flags that do not fit together.
    """
    flags = tui_flag_set()
    rest = flags.parse(argv)
    if rest:
        raise UsageError(f"unexpected argument {rest[0]!r}")
    if flags["version"].value.value:
        return None
    lookupds = tuple(flags["lookupd-http-address"].value.value)
    nsqds = tuple(flags["nsqd-http-address"].value.value)
    if lookupds and nsqds:
        raise UsageError("use --nsqd-http-address or --lookupd-http-address not both")
    if not lookupds and not nsqds:
        lookupds = (DEFAULT_LOOKUPD_HTTP,)
    interval = float(flags["interval"].value.value)
    if interval <= 0:
        raise UsageError("--interval must be positive")
    try:
        port = web_port(flags)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return TUIOptions(
        lookupd_http_addresses=lookupds,
        nsqd_http_addresses=nsqds,
        read_only=bool(flags["read-only"].value.value),
        interval=interval,
        connect_timeout=float(flags["http-client-connect-timeout"].value.value),
        request_timeout=float(flags["http-client-request-timeout"].value.value),
        admin_http_address=str(flags["admin-http-address"].value.value),
        web=bool(flags["web"].value.value),
        web_host=str(flags["web-host"].value.value),
        web_port=port,
        allowed_hosts=allowed_hosts(flags),
        web_save_dir=str(flags["web-save-dir"].value.value),
        web_session=bool(flags["web-session"].value.value),
    )


def tui_argv(options: TUIOptions) -> list[str]:
    """The terminal TUI's flags that ask for what ``options`` says (no web flags)."""
    argv = [f"--lookupd-http-address={a}" for a in options.lookupd_http_addresses]
    argv += [f"--nsqd-http-address={a}" for a in options.nsqd_http_addresses]
    if options.read_only:
        argv.append("--read-only")
    if options.admin_http_address:
        argv.append(f"--admin-http-address={options.admin_http_address}")
    for flag, seconds in (
        ("interval", options.interval),
        ("http-client-connect-timeout", options.connect_timeout),
        ("http-client-request-timeout", options.request_timeout),
    ):
        argv.append(f"--{flag}={format_duration_ns(round(seconds * 1e9))}")
    return argv


def tui_command(options: TUIOptions) -> str:
    """The shell command textual-serve runs for each tab: this Python, ``-m nsqbox tui
    --web-session`` (and ``--web-save-dir``, made absolute, when given)."""
    argv = [*tui_argv(options), "--web-session"]
    if options.web_save_dir:
        argv.append(f"--web-save-dir={os.path.abspath(options.web_save_dir)}")
    return shlex.join([sys.executable, "-m", "nsqbox", "tui", *argv])


def build_app(options: TUIOptions) -> AdminApp:
    """The app for ``options`` (not running yet)."""
    from .app import AdminApp
    from .backend import open_model_backend

    factory = partial(
        open_model_backend,
        lookupd_http_addresses=options.lookupd_http_addresses,
        nsqd_http_addresses=options.nsqd_http_addresses,
        connect_timeout=options.connect_timeout,
        request_timeout=options.request_timeout,
        admin_http_address=options.admin_http_address or None,
    )
    return AdminApp(
        factory,
        interval=options.interval,
        read_only=options.read_only,
        web_session=options.web_session,
        save_dir=Path(options.web_save_dir) if options.web_save_dir else None,
    )


def main(argv: list[str]) -> int:
    """``nsqbox tui [flags]``; the exit status."""
    try:
        options = parse_or_exit(lambda: parse_tui_args(argv))
    except UsageError as exc:
        sys.stderr.write(f"nsqbox tui: {exc}\n{tui_flag_set().usage()}")
        return 2
    if isinstance(options, int):
        return options
    if options is None:
        print(program_version("nsqbox tui"))
        return 0
    if options.web:
        from .web import WebTUI, run_web  # aiohttp and textual-serve load only here

        web_tui = WebTUI(
            tui_command(options),
            options.web_host,
            options.web_port,
            allowed_hosts=options.allowed_hosts,
        )
        return run_web(web_tui)
    app = build_app(options)
    app.run()
    return app.return_code or 0
