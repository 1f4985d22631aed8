"""The admin service's options, with nsqadmin's flag names and defaults (apps/nsqadmin).

Durations are seconds. A TOML ``--config`` file uses the flag names with ``-`` turned into ``_``,
except ``nsqlookupd_http_addresses`` and ``nsqd_http_addresses`` (nsqadmin's keys) and
``admin_users``. nsqadmin options nsqbox has no use for (graphite, statsd, TLS client settings,
notifications, base path) are not offered.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..goflags import FlagSet
from ..logs import parse_level
from ..nsqd.config import ConfigError, Kind, OptionFlag, coerce, flag_value, load_config_file

__all__ = [
    "ADMIN_OPTION_FLAGS",
    "AdminCommand",
    "AdminOptions",
    "ConfigError",
    "admin_flag_set",
    "parse_admin_args",
    "resolve_admin_options",
]


@dataclass(slots=True)
class AdminOptions:
    """Every admin option. Defaults are nsqadmin v1.3.0's, except the bind host (127.0.0.1)."""

    log_level: str = "info"
    log_prefix: str = "[nsqadmin] "
    http_address: str = "127.0.0.1:4171"
    lookupd_http_addresses: list[str] = field(default_factory=list)
    nsqd_http_addresses: list[str] = field(default_factory=list)
    http_client_connect_timeout: float = 2.0
    http_client_request_timeout: float = 5.0
    #: With users listed, only requests whose ``acl_http_header`` names one may change things.
    admin_users: list[str] = field(default_factory=list)
    acl_http_header: str = "X-Forwarded-User"

    def validate(self) -> None:
        """Raise ValueError with nsqadmin's message for options it refuses at start."""
        if not self.lookupd_http_addresses and not self.nsqd_http_addresses:
            raise ValueError("--nsqd-http-address or --lookupd-http-address required")
        if self.lookupd_http_addresses and self.nsqd_http_addresses:
            raise ValueError("use --nsqd-http-address or --lookupd-http-address not both")


#: nsqadmin's option flags that nsqbox supports, in nsqadmin's order.
ADMIN_OPTION_FLAGS: tuple[OptionFlag, ...] = (
    OptionFlag("log-level", Kind.LOG_LEVEL, "log level: debug, info, warn, error or fatal"),
    OptionFlag("log-prefix", Kind.STRING, "prefix for every log line"),
    OptionFlag("http-address", Kind.STRING, "<addr>:<port> to listen on for HTTP clients"),
    OptionFlag("http-client-connect-timeout", Kind.DURATION, "timeout of outgoing HTTP connects"),
    OptionFlag("http-client-request-timeout", Kind.DURATION, "timeout of outgoing HTTP requests"),
    OptionFlag("acl-http-header", Kind.STRING, "HTTP header naming the authenticated admin user"),
    OptionFlag(
        "lookupd-http-address",
        Kind.STRING_ARRAY,
        "lookupd HTTP address (may be given multiple times)",
        cfg="nsqlookupd_http_addresses",
        field="lookupd_http_addresses",
    ),
    OptionFlag(
        "nsqd-http-address",
        Kind.STRING_ARRAY,
        "nsqd HTTP address (may be given multiple times)",
        cfg="nsqd_http_addresses",
        field="nsqd_http_addresses",
    ),
    OptionFlag(
        "admin-user",
        Kind.STRING_ARRAY,
        "admin user (may be given multiple times); with any, only they may change things",
        cfg="admin_users",
        field="admin_users",
    ),
)


@dataclass(frozen=True, slots=True)
class AdminCommand:
    """The outcome of parsing an ``nsqbox admin`` command line."""

    options: AdminOptions
    show_version: bool
    flags: FlagSet
    args: list[str]


def admin_flag_set(name: str = "nsqadmin", defaults: AdminOptions | None = None) -> FlagSet:
    """nsqadmin's flag set (the supported part); ``defaults`` supply the defaults."""
    base = AdminOptions() if defaults is None else defaults
    flags = FlagSet(name)
    flags.add_string("config", "", "path to config file")
    flags.add_bool("version", False, "print version string")
    for opt in ADMIN_OPTION_FLAGS:
        flags.var(opt.flag, flag_value(opt.kind, getattr(base, opt.attr)), opt.usage)
    return flags


def resolve_admin_options(
    flags: FlagSet, cfg: Mapping[str, Any], defaults: AdminOptions | None = None
) -> AdminOptions:
    """Each option from its flag if given, else the config file, else the default.

    Raises ConfigError for a value that cannot be coerced or options nsqadmin refuses.
    """
    options = copy.deepcopy(AdminOptions() if defaults is None else defaults)
    for opt in ADMIN_OPTION_FLAGS:
        if flags.is_set(opt.flag):
            value = copy.copy(flags[opt.flag].value.value)
        elif opt.config_key in cfg:
            raw = cfg[opt.config_key]
            try:
                value = (
                    parse_level(str(raw)) if opt.kind is Kind.LOG_LEVEL else coerce(opt.kind, raw)
                )
            except ValueError as exc:
                raise ConfigError(
                    f"failed to coerce config value {opt.config_key} = {raw} - {exc}"
                ) from None
        else:
            continue
        setattr(options, opt.attr, value)
    try:
        options.validate()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return options


def parse_admin_args(argv: Sequence[str], *, defaults: AdminOptions | None = None) -> AdminCommand:
    """Parse an nsqadmin-style command line (without the program name).

    Raises goflags' FlagError and HelpRequested, and ConfigError.
    """
    base = AdminOptions() if defaults is None else defaults
    flags = admin_flag_set("nsqbox admin", base)
    rest = flags.parse(list(argv))
    if flags["version"].value.value:
        return AdminCommand(copy.deepcopy(base), True, flags, rest)
    path = flags["config"].value.value
    cfg = load_config_file(path) if path else {}
    return AdminCommand(resolve_admin_options(flags, cfg, base), False, flags, rest)
