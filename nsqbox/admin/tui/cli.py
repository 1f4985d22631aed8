"""``nsqbox tui``: the admin TUI against any NSQ cluster.

Flags follow nsqadmin's (Go style, one or two dashes): ``--lookupd-http-address`` or
``--nsqd-http-address`` (each repeatable, not both; with neither, the box's lookupd at
``127.0.0.1:4161``), plus ``--read-only``, ``--interval`` and ``--admin-http-address`` (nsqbox's
admin service: the Faults view then goes through it, and can restart the box's nodes)::

    nsqbox tui --lookupd-http-address 10.0.0.9:4161 --read-only
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ... import program_version
from ...goflags import FlagError, FlagSet, HelpRequested

if TYPE_CHECKING:  # Textual loads only when the app runs, not for -h or --version
    from .app import AdminApp

__all__ = ["DEFAULT_LOOKUPD_HTTP", "TUIOptions", "main", "parse_tui_args", "tui_flag_set"]

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
        "nsqbox's admin service, for the Faults view's restart, crash and start (nsqbox up's)",
    )
    flags.add_duration("interval", 2.0, "time between refreshes")
    flags.add_duration("http-client-connect-timeout", 2.0, "timeout for HTTP connect")
    flags.add_duration("http-client-request-timeout", 5.0, "timeout for HTTP request")
    flags.add_bool("version", False, "print version string")
    return flags


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
    return TUIOptions(
        lookupd_http_addresses=lookupds,
        nsqd_http_addresses=nsqds,
        read_only=bool(flags["read-only"].value.value),
        interval=interval,
        connect_timeout=float(flags["http-client-connect-timeout"].value.value),
        request_timeout=float(flags["http-client-request-timeout"].value.value),
        admin_http_address=str(flags["admin-http-address"].value.value),
    )


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
    return AdminApp(factory, interval=options.interval, read_only=options.read_only)


def main(argv: list[str]) -> int:
    """``nsqbox tui [flags]``; the exit status."""
    try:
        options = parse_tui_args(argv)
    except HelpRequested as exc:
        sys.stderr.write(exc.usage)
        return 0
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n{exc.usage}")
        return 2
    except UsageError as exc:
        sys.stderr.write(f"nsqbox tui: {exc}\n{tui_flag_set().usage()}")
        return 2
    if options is None:
        print(program_version("nsqbox tui"))
        return 0
    app = build_app(options)
    app.run()
    return app.return_code or 0
