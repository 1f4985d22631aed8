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

import copy
import datetime
import enum
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nsqbox.goflags import (
    BoolValue,
    DurationValue,
    FlagSet,
    FlagValue,
    FloatArrayValue,
    FuncValue,
    IntValue,
    StrconvError,
    StringArrayValue,
    StringValue,
    format_float,
    go_quote,
    parse_bool,
    parse_duration,
    parse_float,
    parse_int,
)
from nsqbox.logs import parse_level
from nsqbox.nsqd.options import (
    TLS_NOT_REQUIRED,
    TLS_REQUIRED,
    TLS_REQUIRED_EXCEPT_HTTP,
    NSQDOptions,
)

#: --tls-min-version's accepted values (nsqd's table; "" keeps the default).
TLS_VERSIONS = ("tls1.0", "tls1.1", "tls1.2", "tls1.3")


class ConfigError(Exception):
    """A start-up error nsqd reports as ``FATAL`` before exiting with status 1."""


class Kind(enum.Enum):
    """How an option is parsed from a flag and coerced from a TOML value."""

    STRING = enum.auto()
    INT = enum.auto()
    BOOL = enum.auto()
    DURATION = enum.auto()
    STRING_ARRAY = enum.auto()
    FLOAT_ARRAY = enum.auto()
    LOG_LEVEL = enum.auto()
    TLS_REQUIRED = enum.auto()
    TLS_MIN_VERSION = enum.auto()


@dataclass(frozen=True, slots=True)
class OptionFlag:
    """One nsqd flag that sets an :class:`NSQDOptions` field."""

    flag: str
    kind: Kind
    usage: str
    #: The TOML key when it is not the flag name with ``-`` turned into ``_``.
    cfg: str = ""
    #: The NSQDOptions field when it is not the flag name with ``-`` turned into ``_``.
    field: str = ""

    @property
    def config_key(self) -> str:
        """The key in a TOML config file (go-options: the ``cfg`` tag, else the flag name)."""
        return self.cfg or self.flag.replace("-", "_")

    @property
    def attr(self) -> str:
        """The :class:`NSQDOptions` field this flag sets."""
        return self.field or self.flag.replace("-", "_")


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
        "tls-required", Kind.TLS_REQUIRED, "require TLS from clients: true, false or tcp-https"
    ),
    OptionFlag(
        "tls-min-version",
        Kind.TLS_MIN_VERSION,
        "lowest TLS version accepted: tls1.0, tls1.1, tls1.2 or tls1.3",
    ),
    OptionFlag("deflate", _B, "let clients negotiate deflate compression"),
    OptionFlag("max-deflate-level", _I, "highest deflate level a client may ask for, [1,9]"),
    OptionFlag("snappy", _B, "let clients negotiate snappy compression"),
)


@dataclass(frozen=True, slots=True)
class NSQDCommand:
    """The outcome of parsing an nsqd command line."""

    options: NSQDOptions
    #: ``--version`` was given: print the version and exit (the config file is not read).
    show_version: bool
    flags: FlagSet
    #: Arguments after the flags (nsqd ignores them).
    args: list[str]


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


def _show_level(level: str) -> str:
    return "WARNING" if level == "warn" else level.upper()


def flag_value(kind: Kind, default: Any) -> FlagValue[Any]:
    if kind is Kind.STRING:
        return StringValue(default)
    if kind is Kind.INT:
        return IntValue(default)
    if kind is Kind.BOOL:
        return BoolValue(default)
    if kind is Kind.DURATION:
        return DurationValue(default)
    if kind is Kind.STRING_ARRAY:
        return StringArrayValue([])  # nsqd's arrays start empty: a flag replaces, not extends
    if kind is Kind.FLOAT_ARRAY:
        return FloatArrayValue([])
    if kind is Kind.LOG_LEVEL:
        return FuncValue(default, lambda text, _: parse_level(text), _show_level)
    if kind is Kind.TLS_REQUIRED:
        return FuncValue(default, _parse_tls_required, str, is_bool_flag=True, zero_text="0")
    return FuncValue(default, _parse_tls_min_version, str, zero_text="0")


def nsqd_flag_set(name: str = "nsqd", defaults: NSQDOptions | None = None) -> FlagSet:
    """nsqd's flag set; ``defaults`` supply the defaults (nsqbox's NSQDOptions if None)."""
    base = NSQDOptions() if defaults is None else defaults
    flags = FlagSet(name)
    flags.add_bool("version", False, "print the version and exit")
    flags.add_string("config", "", "path to a TOML config file")
    flags.add_bool("verbose", False, "[deprecated] has no effect; use --log-level")
    flags.add_bool("worker-id", False, "[deprecated] use --node-id")
    for opt in NSQD_OPTION_FLAGS:
        flags.var(opt.flag, flag_value(opt.kind, getattr(base, opt.attr)), opt.usage)
    return flags


def load_config_file(path: str) -> dict[str, Any]:
    """Read a TOML config file; ConfigError with nsqd's wording if it cannot be read."""
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        detail = f"open {path}: {(exc.strerror or str(exc)).lower()}"
        raise ConfigError(f"failed to load config file {path} - {detail}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"failed to load config file {path} - {exc}") from None


def _go_v(value: object) -> str:
    """A TOML value as Go's ``%v`` prints it (for messages and nsqd's "%v" conversions)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, list):
        return "[" + " ".join(_go_v(v) for v in value) + "]"
    return str(value)


def validate_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """nsqd's ``config.Validate``: check and normalise tls_required, tls_min_version, log_level.

    Runs on the file's values even when a flag overrides them, as nsqd does.
    """
    checked = dict(cfg)
    for key, parse in (
        ("tls_required", lambda text: _parse_tls_required(text, TLS_NOT_REQUIRED)),
        ("log_level", parse_level),
    ):
        if key in checked:
            try:
                checked[key] = parse(_go_v(checked[key]))
            except ValueError:
                raise ConfigError(f"failed parsing {key} {_go_v(checked[key])}") from None
    if "tls_min_version" in checked:
        raw = _go_v(checked["tls_min_version"])
        try:
            version = _parse_tls_min_version(raw, "")
        except ValueError:
            raise ConfigError(f"failed parsing tls_min_version {raw}") from None
        if version:
            checked["tls_min_version"] = version
        else:
            del checked["tls_min_version"]  # "" means the default
    return checked


def _go_type(value: object) -> str:
    names = {bool: "bool", int: "int64", float: "float64", str: "string", list: "[]interface {}"}
    if isinstance(value, datetime.date | datetime.time):
        return "time.Time"
    return names.get(type(value), "map[string]interface {}")


def coerce(kind: Kind, value: Any) -> Any:
    """Turn a TOML value into the option's type as go-options' ``coerce`` does."""
    if kind in (Kind.LOG_LEVEL, Kind.TLS_REQUIRED, Kind.TLS_MIN_VERSION):
        return value  # validate_config normalised these already
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind is Kind.STRING:
        if isinstance(value, str | bool | int | float):
            return _go_v(value)
    elif kind is Kind.INT:
        if is_int:
            return value
        if isinstance(value, str):
            return parse_int(value, 10)
        raise ValueError(f"invalid int64 value type {_go_type(value)}")
    elif kind is Kind.BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return parse_bool(value)
        if is_int:
            return value != 0  # go-options returns value == 0 here, which is a bug
        raise ValueError(f"invalid bool value type {_go_type(value)}")
    elif kind is Kind.DURATION:
        if isinstance(value, str):
            return parse_duration(value)
        if is_int:
            return value / 1000  # go-options reads a bare integer as milliseconds
        raise ValueError(f"invalid time.Duration value type {_go_type(value)}")
    elif kind is Kind.STRING_ARRAY:
        if isinstance(value, str):
            return value.split(",")
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    elif kind is Kind.FLOAT_ARRAY:
        if isinstance(value, str):
            return [parse_float(v.strip()) for v in value.split(",")]
        if isinstance(value, list) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            return [float(v) for v in value]
    raise ValueError(f"invalid value type {_go_type(value)}")


def resolve_options(
    flags: FlagSet, cfg: Mapping[str, Any], defaults: NSQDOptions | None = None
) -> NSQDOptions:
    """go-options ``Resolve``: each field from its flag if given, else the config, else default.

    ``cfg`` must have been through :func:`validate_config`. Raises ConfigError.
    """
    options = copy.deepcopy(NSQDOptions() if defaults is None else defaults)
    for opt in NSQD_OPTION_FLAGS:
        if flags.is_set(opt.flag):
            value = copy.copy(flags[opt.flag].value.value)
        elif opt.config_key in cfg:
            raw = cfg[opt.config_key]
            try:
                value = coerce(opt.kind, raw)
            except (StrconvError, ValueError) as exc:
                raise ConfigError(
                    f"failed to coerce config value {opt.config_key} = {_go_v(raw)} - {exc}"
                ) from None
        else:
            continue
        setattr(options, opt.attr, value)
    _check_like_nsqd_new(options)
    return options


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


def parse_nsqd_args(
    argv: list[str], *, defaults: NSQDOptions | None = None, flags: FlagSet | None = None
) -> NSQDCommand:
    """Parse an nsqd command line (without the program name) as nsqd does.

    ``flags`` may be a flag set from :func:`nsqd_flag_set` (built with the same ``defaults``)
    with extra flags added by the caller. Raises FlagError and HelpRequested (goflags) and
    ConfigError.
    """
    base = NSQDOptions() if defaults is None else defaults
    flag_set = nsqd_flag_set(defaults=base) if flags is None else flags
    rest = flag_set.parse(argv)
    if flag_set["version"].value.value:
        return NSQDCommand(copy.deepcopy(base), True, flag_set, rest)
    path = flag_set["config"].value.value
    cfg = validate_config(load_config_file(path)) if path else {}
    return NSQDCommand(resolve_options(flag_set, cfg, base), False, flag_set, rest)
