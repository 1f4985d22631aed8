"""The admin service's options, with nsqadmin's flag names and defaults (apps/nsqadmin).

Durations are seconds. A TOML ``--config`` file uses the flag names with ``-`` turned into ``_``,
except ``nsqlookupd_http_addresses`` and ``nsqd_http_addresses`` (nsqadmin's keys) and
``admin_users``. nsqadmin options nsqbox has no use for (graphite, statsd, TLS client settings,
notifications, base path) are not offered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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

__all__ = [
    "ADMIN",
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
    #: nsqbox's: Host names allowed beside IP literals, localhost and the hostname (every
    #: route of the admin service checks Host); see :mod:`nsqbox.http.local_guard`.
    allowed_hosts: list[str] = field(default_factory=list)
    #: nsqbox's: with any (the box's nsqd auth), node control, faults, clock and the
    #: message listing are off.
    auth_http_addresses: list[str] = field(default_factory=list)
    #: Set by the box (no flag): its nsqds' ``--broadcast-address``, a Host it answers to.
    box_broadcast_address: str = ""

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
    ALLOWED_HOST_FLAG,
    AUTH_HTTP_ADDRESS_FLAG,
)


#: The outcome of parsing an ``nsqbox admin`` command line.
AdminCommand = Command[AdminOptions]


def _check(options: AdminOptions) -> None:
    try:
        options.validate()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


#: nsqadmin (the supported part) as the options machinery sees it.
ADMIN: Program[AdminOptions] = Program(
    "nsqbox admin",
    ADMIN_OPTION_FLAGS,
    head=(
        ("config", "", "path to config file"),
        ("version", False, "print version string"),
    ),
    defaults=AdminOptions,
    check=_check,
)


def admin_flag_set(name: str = "nsqadmin", defaults: AdminOptions | None = None) -> FlagSet:
    """nsqadmin's flag set (the supported part); ``defaults`` supply the defaults."""
    return ADMIN.flag_set(name, defaults)


def resolve_admin_options(
    flags: FlagSet, cfg: Mapping[str, Any], defaults: AdminOptions | None = None
) -> AdminOptions:
    """Each option from its flag if given, else the config file, else the default.

    Raises ConfigError for a value that cannot be coerced or options nsqadmin refuses.
    """
    return ADMIN.resolve(flags, ADMIN.validate_config(cfg), defaults)


def parse_admin_args(argv: Sequence[str], *, defaults: AdminOptions | None = None) -> AdminCommand:
    """Parse an nsqadmin-style command line (without the program name).

    Raises goflags' FlagError and HelpRequested, and ConfigError.
    """
    return ADMIN.parse(argv, defaults=defaults)
