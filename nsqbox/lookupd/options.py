"""nsqlookupd's options, with real nsqlookupd's names and defaults (apps/nsqlookupd).

Durations are seconds (floats), as trio speaks them. Field names are the flag
names with ``-`` turned into ``_`` (the keys a TOML config file uses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..addresses import broadcast_address
from ..goflags import FlagSet
from ..gooptions import (
    ALLOWED_HOST_FLAG,
    AUTH_HTTP_ADDRESS_FLAG,
    Command,
    ConfigError,
    Kind,
    OptionFlag,
    Program,
)

__all__ = [
    "LOOKUPD",
    "LOOKUPD_OPTION_FLAGS",
    "ConfigError",
    "LookupdCommand",
    "LookupdOptions",
    "lookupd_flag_set",
    "parse_lookupd_args",
    "resolve_lookupd_options",
]


@dataclass(slots=True)
class LookupdOptions:
    """Every nsqlookupd option. Defaults are nsqlookupd v1.3.0's, except the bind host.

    nsqbox binds 127.0.0.1 by default: a development tool must not listen on
    every interface unless told to.
    """

    log_level: str = "info"
    log_prefix: str = "[nsqlookupd] "
    tcp_address: str = "127.0.0.1:4160"
    http_address: str = "127.0.0.1:4161"
    broadcast_address: str = ""  # "" -> derived, see effective_broadcast_address()
    inactive_producer_timeout: float = 300.0
    tombstone_lifetime: float = 45.0
    #: nsqbox's: Host names allowed beside IP literals, localhost and the hostname (and,
    #: with any, asked of NSQ's own routes too); see :mod:`nsqbox.http.local_guard`.
    allowed_hosts: list[str] = field(default_factory=list)
    #: nsqbox's: with any (the box's nsqd auth), nsqbox's own routes are off.
    auth_http_addresses: list[str] = field(default_factory=list)
    #: Set by the box (no flag): its nsqds' ``--broadcast-address``, a Host it answers to.
    box_broadcast_address: str = ""

    def effective_broadcast_address(self) -> str:
        """What IDENTIFY replies carry: the flag, else a loopback bind host, else the hostname.

        nsqd builds the lookupd HTTP address it asks for channels from this, so
        on a loopback-only box it must not be a hostname that resolves elsewhere.
        """
        return broadcast_address(self.broadcast_address, self.tcp_address)


# --- command line and --config (apps/nsqlookupd) ---------------------------------------

#: nsqlookupd's option flags, in its order (``-h`` sorts them by name).
LOOKUPD_OPTION_FLAGS: tuple[OptionFlag, ...] = (
    OptionFlag("log-level", Kind.LOG_LEVEL, "log level: debug, info, warn, error or fatal"),
    OptionFlag("log-prefix", Kind.STRING, "prefix for every log line"),
    OptionFlag("tcp-address", Kind.STRING, "<addr>:<port> to listen on for TCP clients"),
    OptionFlag("http-address", Kind.STRING, "<addr>:<port> to listen on for HTTP clients"),
    OptionFlag(
        "broadcast-address",
        Kind.STRING,
        "address of this lookupd node (default: the bind host if loopback, else the hostname)",
    ),
    OptionFlag(
        "inactive-producer-timeout",
        Kind.DURATION,
        "duration of time a producer will remain in the active list since its last ping",
    ),
    OptionFlag(
        "tombstone-lifetime",
        Kind.DURATION,
        "duration of time a producer will remain tombstoned if registration remains",
    ),
    ALLOWED_HOST_FLAG,
    AUTH_HTTP_ADDRESS_FLAG,
)


#: The outcome of parsing an nsqlookupd command line.
LookupdCommand = Command[LookupdOptions]

#: nsqlookupd as the options machinery sees it.
LOOKUPD: Program[LookupdOptions] = Program(
    "nsqlookupd",
    LOOKUPD_OPTION_FLAGS,
    head=(
        ("config", "", "path to config file"),
        ("version", False, "print version string"),
        ("verbose", False, "[deprecated] has no effect, use --log-level"),
    ),
    defaults=LookupdOptions,
)


def lookupd_flag_set(name: str = "nsqlookupd", defaults: LookupdOptions | None = None) -> FlagSet:
    """nsqlookupd's flag set; ``defaults`` supply the defaults (nsqbox's if None)."""
    return LOOKUPD.flag_set(name, defaults)


def resolve_lookupd_options(
    flags: FlagSet, cfg: Mapping[str, Any], defaults: LookupdOptions | None = None
) -> LookupdOptions:
    """go-options ``Resolve``: each option from its flag if given, else the config, else default.

    Unknown config keys are ignored, as nsqlookupd does. Raises ConfigError.
    """
    return LOOKUPD.resolve(flags, LOOKUPD.validate_config(cfg), defaults)


def parse_lookupd_args(
    argv: Sequence[str], *, defaults: LookupdOptions | None = None
) -> LookupdCommand:
    """Parse an nsqlookupd command line (without the program name) as nsqlookupd does.

    Both ``-flag=value`` and ``--flag value`` forms are accepted. Raises goflags'
    FlagError and HelpRequested, and ConfigError.
    """
    return LOOKUPD.parse(argv, defaults=defaults)
