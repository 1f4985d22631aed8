"""nsqlookupd's command line and ``--config`` file, resolved into :class:`LookupdOptions`.

Mirrors nsqlookupd v1.3.0 (apps/nsqlookupd) through :mod:`nsqbox.go.options`. Kept apart from
:mod:`nsqbox.lookupd.options`, so a box that parses no command line (the test fixture's) does
not load the flag machinery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..go.flags import FlagSet
from ..go.options import (
    ALLOWED_HOST_FLAG,
    AUTH_HTTP_ADDRESS_FLAG,
    Command,
    ConfigError,
    Kind,
    OptionFlag,
    Program,
)
from .options import LookupdOptions

__all__ = [
    "LOOKUPD",
    "LOOKUPD_OPTION_FLAGS",
    "ConfigError",
    "LookupdCommand",
    "lookupd_flag_set",
    "parse_lookupd_args",
    "resolve_lookupd_options",
]

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
