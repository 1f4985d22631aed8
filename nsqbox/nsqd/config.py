"""nsqd's command line and ``--config`` file, resolved into :class:`NSQDOptions` as nsqd does.

Mirrors nsqd v1.3.0 (apps/nsqd/options.go, main.go, nsqd/options.go) and go-options'
``Resolve``: every flag name and default; a value given on the command line beats the TOML
config file, which beats the default. Config keys are the flag name with ``-`` turned into ``_``,
except ``id`` (--node-id), ``nsqlookupd_tcp_addresses`` (--lookupd-tcp-address),
``auth_http_addresses`` and ``e2e_processing_latency_percentiles``. Unknown keys are ignored.

TOML values are coerced as go-options does: a duration may be a string (``"60s"``) or an integer
count of milliseconds; a list option may be a TOML array or a comma-separated string; an integer
option may be a decimal string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nsqbox.go.flags import FlagSet
from nsqbox.go.options import (
    ALLOWED_HOST_FLAG,
    DROP,
    Command,
    ConfigError,
    CustomKind,
    Kind,
    OptionFlag,
    Program,
    coerce,
    flag_value,
    load_config_file,
)
from nsqbox.go.syntax import go_quote, parse_bool
from nsqbox.nsqd.domain.options import (
    TLS_NOT_REQUIRED,
    TLS_REQUIRED,
    TLS_REQUIRED_EXCEPT_HTTP,
    NSQDOptions,
)

__all__ = [
    "ALLOWED_HOST_FLAG",
    "NSQD",
    "NSQD_OPTION_FLAGS",
    "TLS_MIN_VERSION_KIND",
    "TLS_REQUIRED_KIND",
    "TLS_VERSIONS",
    "ConfigError",
    "Kind",
    "NSQDCommand",
    "OptionFlag",
    "coerce",
    "flag_value",
    "load_config_file",
    "nsqd_flag_set",
    "parse_nsqd_args",
    "resolve_options",
    "validate_config",
]

#: --tls-min-version's accepted values (nsqd's table; "" keeps the default).
TLS_VERSIONS = ("tls1.0", "tls1.1", "tls1.2", "tls1.3")

#: The outcome of parsing an nsqd command line.
NSQDCommand = Command[NSQDOptions]


def _parse_tls_required(text: str, _current: int) -> int:
    lowered = text.lower()
    if lowered == "tcp-https":
        return TLS_REQUIRED_EXCEPT_HTTP
    # strconv's own message is kept: this is a custom flag, not one of flag's built-in types.
    return TLS_REQUIRED if parse_bool(lowered) else TLS_NOT_REQUIRED


def _parse_tls_min_version(text: str, current: str) -> str:
    lowered = text.lower()
    if not lowered:
        return current
    if lowered not in TLS_VERSIONS:
        raise ValueError(f"unknown tlsVersionOption {go_quote(lowered)}")
    return lowered


#: --tls-required: true, false or tcp-https (nsqd's tlsRequiredOption).
TLS_REQUIRED_KIND = CustomKind(
    "tls-required",
    _parse_tls_required,
    lambda text: _parse_tls_required(text, TLS_NOT_REQUIRED),
    is_bool_flag=True,
)
#: --tls-min-version: tls1.0 .. tls1.3, "" for the default (nsqd's tlsMinVersionOption).
TLS_MIN_VERSION_KIND = CustomKind(
    "tls-min-version",
    _parse_tls_min_version,
    lambda text: _parse_tls_min_version(text, "") or DROP,  # "" means the default
)

_S, _I, _B, _D = Kind.STRING, Kind.INT, Kind.BOOL, Kind.DURATION

#: nsqd's option flags, in nsqd's order (``-h`` sorts them by name).
NSQD_OPTION_FLAGS: tuple[OptionFlag, ...] = (
    OptionFlag("log-level", Kind.LOG_LEVEL, "log level: debug, info, warn, error or fatal"),
    OptionFlag("log-prefix", _S, "prefix for every log line"),
    OptionFlag(
        "node-id",
        _I,
        "node id in message ids, [0,1024); defaults to a hash of the hostname",
        cfg="id",
    ),
    OptionFlag("https-address", _S, "<addr>:<port> for HTTPS clients"),
    OptionFlag("http-address", _S, "<addr>:<port> for HTTP clients (empty: no HTTP)"),
    OptionFlag("tcp-address", _S, "<addr>:<port> for TCP clients"),
    OptionFlag(
        "auth-http-address",
        Kind.STRING_ARRAY,
        "<addr>:<port> or URL of an auth server (repeatable)",
        cfg="auth_http_addresses",
        field="auth_http_addresses",
    ),
    ALLOWED_HOST_FLAG,
    OptionFlag(
        "journal-size",
        _I,
        "nsqbox: events the message journal keeps (0: no journal; /nsqbox/journal)",
    ),
    # Added to NSQ after v1.3.0; nsqbox's auth client supports it.
    OptionFlag("auth-http-request-method", _S, "HTTP method of auth server requests: get or post"),
    OptionFlag(
        "broadcast-address",
        _S,
        "address registered with lookupd (default: the bind host if loopback, else the hostname)",
    ),
    OptionFlag(
        "broadcast-tcp-port", _I, "TCP port registered with lookupd (default: the bound TCP port)"
    ),
    OptionFlag(
        "broadcast-http-port",
        _I,
        "HTTP port registered with lookupd (default: the bound HTTP port)",
    ),
    OptionFlag(
        "lookupd-tcp-address",
        Kind.STRING_ARRAY,
        "nsqlookupd TCP address (repeatable)",
        cfg="nsqlookupd_tcp_addresses",
        field="lookupd_tcp_addresses",
    ),
    OptionFlag("http-client-connect-timeout", _D, "connect timeout of outgoing HTTP requests"),
    OptionFlag("http-client-request-timeout", _D, "timeout of outgoing HTTP requests"),
    OptionFlag(
        "data-path",
        _S,
        "directory for disk-backed queues and metadata (default: the current directory)",
    ),
    OptionFlag("mem-queue-size", _I, "messages kept in memory per topic and per channel"),
    OptionFlag("max-bytes-per-file", _I, "bytes per disk queue file before it rolls"),
    OptionFlag("sync-every", _I, "disk queue writes between fsyncs"),
    OptionFlag("sync-timeout", _D, "longest time between disk queue fsyncs"),
    OptionFlag(
        "queue-scan-worker-pool-max", _I, "most workers scanning in-flight and deferred queues"
    ),
    OptionFlag("queue-scan-selection-count", _I, "channels checked per queue scan for timeouts"),
    OptionFlag("msg-timeout", _D, "default time before an unfinished message is requeued"),
    OptionFlag("max-msg-timeout", _D, "longest message timeout a client may ask for"),
    OptionFlag("max-msg-size", _I, "largest message, in bytes"),
    OptionFlag("max-req-timeout", _D, "longest requeue (and deferred publish) delay"),
    OptionFlag("max-body-size", _I, "largest command body, in bytes"),
    OptionFlag("max-heartbeat-interval", _D, "longest heartbeat interval a client may ask for"),
    OptionFlag("max-rdy-count", _I, "largest RDY count a client may send"),
    OptionFlag(
        "max-output-buffer-size", _I, "largest output buffer a client may ask for, in bytes"
    ),
    OptionFlag(
        "max-output-buffer-timeout", _D, "longest output flush interval a client may ask for"
    ),
    OptionFlag(
        "min-output-buffer-timeout", _D, "shortest output flush interval a client may ask for"
    ),
    OptionFlag("output-buffer-timeout", _D, "default interval between flushes to a client"),
    OptionFlag("max-channel-consumers", _I, "most consumers per channel (0: unlimited)"),
    OptionFlag("statsd-address", _S, "UDP <addr>:<port> of a statsd daemon"),
    OptionFlag("statsd-interval", _D, "time between pushes to statsd"),
    OptionFlag("statsd-mem-stats", _B, "also push memory and GC stats to statsd"),
    OptionFlag("statsd-prefix", _S, "prefix of statsd keys (%s becomes the host)"),
    OptionFlag("statsd-udp-packet-size", _I, "size of statsd UDP packets, in bytes"),
    OptionFlag("statsd-exclude-ephemeral", _B, "leave ephemeral topics and channels out of statsd"),
    OptionFlag(
        "e2e-processing-latency-percentile",
        Kind.FLOAT_ARRAY,
        "end-to-end latency percentile to track, in (0, 1] (repeatable or comma-separated)",
        cfg="e2e_processing_latency_percentiles",
        field="e2e_processing_latency_percentiles",
    ),
    OptionFlag(
        "e2e-processing-latency-window-time",
        _D,
        "window over which latency percentiles are computed",
    ),
    OptionFlag("tls-cert", _S, "path to the certificate file"),
    OptionFlag("tls-key", _S, "path to the private key file"),
    OptionFlag(
        "tls-client-auth-policy", _S, "client certificate policy: require or require-verify"
    ),
    OptionFlag("tls-root-ca-file", _S, "path to the certificate authority file"),
    OptionFlag(
        "tls-required", TLS_REQUIRED_KIND, "require TLS from clients: true, false or tcp-https"
    ),
    OptionFlag(
        "tls-min-version",
        TLS_MIN_VERSION_KIND,
        "lowest TLS version accepted: tls1.0, tls1.1, tls1.2 or tls1.3",
    ),
    OptionFlag("deflate", _B, "let clients negotiate deflate compression"),
    OptionFlag("max-deflate-level", _I, "highest deflate level a client may ask for, [1,9]"),
    OptionFlag("snappy", _B, "let clients negotiate snappy compression"),
)


def _check_like_nsqd_new(options: NSQDOptions) -> None:
    """The option checks nsqd makes when it is created (nsqd.New), with its messages."""
    if options.tls_client_auth_policy and options.tls_required == TLS_NOT_REQUIRED:
        options.tls_required = TLS_REQUIRED  # asking for client certificates implies TLS
    try:
        options.validate()
    except ValueError as exc:
        raise ConfigError(f"failed to instantiate nsqd - {exc}") from None
    if options.tls_required != TLS_NOT_REQUIRED and not (options.tls_cert or options.tls_key):
        raise ConfigError(
            "failed to instantiate nsqd - "
            "cannot require TLS client connections without TLS key and cert"
        )
    if options.auth_http_request_method not in ("get", "post"):
        raise ConfigError(
            "failed to instantiate nsqd - --auth-http-request-method must be post or get"
        )


#: nsqd as the options machinery sees it.
NSQD: Program[NSQDOptions] = Program(
    "nsqd",
    NSQD_OPTION_FLAGS,
    head=(
        ("version", False, "print the version and exit"),
        ("config", "", "path to a TOML config file"),
        ("verbose", False, "[deprecated] has no effect; use --log-level"),
        ("worker-id", False, "[deprecated] use --node-id"),
    ),
    defaults=NSQDOptions,
    validated=("tls_required", "log_level", "tls_min_version"),
    check=_check_like_nsqd_new,
)


def nsqd_flag_set(name: str = "nsqd", defaults: NSQDOptions | None = None) -> FlagSet:
    """nsqd's flag set; ``defaults`` supply the defaults (nsqbox's NSQDOptions if None)."""
    return NSQD.flag_set(name, defaults)


def validate_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """nsqd's ``config.Validate``: check and normalise tls_required, log_level, tls_min_version.

    Runs on the file's values even when a flag overrides them, as nsqd does.
    """
    return NSQD.validate_config(cfg)


def resolve_options(
    flags: FlagSet, cfg: Mapping[str, Any], defaults: NSQDOptions | None = None
) -> NSQDOptions:
    """go-options ``Resolve`` of nsqd's options, then nsqd.New's checks. Raises ConfigError.

    ``cfg`` must have been through :func:`validate_config`.
    """
    return NSQD.resolve(flags, cfg, defaults)


def parse_nsqd_args(
    argv: list[str], *, defaults: NSQDOptions | None = None, flags: FlagSet | None = None
) -> NSQDCommand:
    """Parse an nsqd command line (without the program name) as nsqd does.

    ``flags`` may be a flag set from :func:`nsqd_flag_set` (built with the same ``defaults``)
    with extra flags added by the caller. Raises FlagError and HelpRequested (goflags) and
    ConfigError.
    """
    return NSQD.parse(argv, defaults=defaults, flags=flags)
