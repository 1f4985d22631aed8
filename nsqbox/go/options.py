"""One command line and ``--config`` machinery for nsqd, nsqlookupd and nsqadmin (go-options).

Each program gives only its flag table (a tuple of :class:`OptionFlag`), the plain flags that
lead it (``--version``, ``--config``, ...) and the checks it makes once options are resolved; this
module builds the flag set, reads the TOML file, runs the program's ``config.Validate`` and
resolves options as go-options' ``Resolve`` does: a value given on the command line beats the
config file, which beats the default. Config keys are the flag name with ``-`` turned into ``_``
unless the table names another. Unknown keys are ignored.

TOML values are coerced as go-options does: a duration may be a string (``"60s"``) or an integer
count of milliseconds; a list option may be a TOML array or a comma-separated string; an integer
option may be a decimal string.

No trio and no server here: the command line parses flags without loading either.
"""

from __future__ import annotations

import copy
import datetime
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..process.logs import parse_level
from .flags import (
    BoolValue,
    DurationValue,
    FlagSet,
    FlagValue,
    FloatArrayValue,
    FuncValue,
    IntValue,
    StringArrayValue,
    StringValue,
)
from .syntax import format_float, parse_bool, parse_duration, parse_float, parse_int

__all__ = [
    "ALLOWED_HOST_FLAG",
    "AUTH_HTTP_ADDRESS_FLAG",
    "DROP",
    "Command",
    "ConfigError",
    "CustomKind",
    "Kind",
    "OptionFlag",
    "Program",
    "coerce",
    "flag_value",
    "go_v",
    "load_config_file",
    "resolve_options",
    "validate_config",
]

T = TypeVar("T")


class ConfigError(Exception):
    """A start-up error the program reports as ``FATAL`` before exiting with status 1."""


class Kind(enum.Enum):
    """How an option is parsed from a flag and coerced from a TOML value."""

    STRING = enum.auto()
    INT = enum.auto()
    BOOL = enum.auto()
    DURATION = enum.auto()
    STRING_ARRAY = enum.auto()
    FLOAT_ARRAY = enum.auto()
    LOG_LEVEL = enum.auto()


#: What a :attr:`CustomKind.check` returns to drop the key from the config (it means "default").
DROP: Any = object()


@dataclass(frozen=True, slots=True, eq=False)
class CustomKind:
    """A flag type of one program (nsqd's ``--tls-required``), given with its own parsing.

    A config value of a custom kind is normalised by ``check`` before options are resolved (the
    program's ``config.Validate``), so resolving takes it as it is.
    """

    name: str
    #: Flag text and the current value -> the new value; ValueError if refused.
    parse: Callable[[str, Any], Any]
    #: The config file's value as Go's ``%v`` text -> the value, or :data:`DROP`; ValueError
    #: makes ``failed parsing <key> <value>``.
    check: Callable[[str], Any]
    show: Callable[[Any], str] = str
    is_bool_flag: bool = False
    zero_text: str = "0"


@dataclass(frozen=True, slots=True)
class OptionFlag:
    """One flag that sets a field of the program's options."""

    flag: str
    kind: Kind | CustomKind
    usage: str
    #: The TOML key when it is not the flag name with ``-`` turned into ``_``.
    cfg: str = ""
    #: The options field when it is not the flag name with ``-`` turned into ``_``.
    field: str = ""

    @property
    def config_key(self) -> str:
        """The key in a TOML config file (go-options: the ``cfg`` tag, else the flag name)."""
        return self.cfg or self.flag.replace("-", "_")

    @property
    def attr(self) -> str:
        """The options field this flag sets."""
        return self.field or self.flag.replace("-", "_")


#: nsqbox's ``--allowed-host`` (nsqd, nsqlookupd, the admin service, ``nsqbox up``): a
#: name the Host of a request may give beside IP literals, localhost and the hostname
#: (:mod:`nsqbox.http.local_guard`).
ALLOWED_HOST_FLAG = OptionFlag(
    "allowed-host",
    Kind.STRING_ARRAY,
    "nsqbox: a Host name requests may use beside IP literals, localhost and the hostname "
    "(repeatable); with any, NSQ's own HTTP routes check Host and Origin too",
    cfg="allowed_hosts",
    field="allowed_hosts",
)
#: ``--auth-http-address`` where nsqbox takes it beside nsqd (nsqlookupd, the admin service):
#: with any, nsqbox's own routes (faults, clock, node control) are off, as on such an nsqd.
AUTH_HTTP_ADDRESS_FLAG = OptionFlag(
    "auth-http-address",
    Kind.STRING_ARRAY,
    "nsqbox: the box's nsqd auth server (repeatable); with any, nsqbox's own routes "
    "(faults, clock, node control) are off",
    cfg="auth_http_addresses",
    field="auth_http_addresses",
)


def _show_level(level: str) -> str:
    return "WARNING" if level == "warn" else level.upper()


def flag_value(kind: Kind | CustomKind, default: Any) -> FlagValue[Any]:
    """The flag value of ``kind`` starting at ``default``."""
    if isinstance(kind, CustomKind):
        return FuncValue(
            default, kind.parse, kind.show, is_bool_flag=kind.is_bool_flag, zero_text=kind.zero_text
        )
    if kind is Kind.STRING:
        return StringValue(default)
    if kind is Kind.INT:
        return IntValue(default)
    if kind is Kind.BOOL:
        return BoolValue(default)
    if kind is Kind.DURATION:
        return DurationValue(default)
    if kind is Kind.STRING_ARRAY:
        return StringArrayValue([])  # arrays start empty: a flag replaces, not extends
    if kind is Kind.FLOAT_ARRAY:
        return FloatArrayValue([])
    return FuncValue(default, lambda text, _: parse_level(text), _show_level)


def load_config_file(path: str) -> dict[str, Any]:
    """Read a TOML config file; ConfigError with NSQ's wording if it cannot be read."""
    import tomllib  # only with --config: not worth its memory in every process

    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        detail = f"open {path}: {(exc.strerror or str(exc)).lower()}"
        raise ConfigError(f"failed to load config file {path} - {detail}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"failed to load config file {path} - {exc}") from None


def go_v(value: object) -> str:
    """A TOML value as Go's ``%v`` prints it (for messages and ``"%v"`` conversions)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, list):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    return str(value)


def validate_config(cfg: Mapping[str, Any], checked: Sequence[OptionFlag]) -> dict[str, Any]:
    """The program's ``config.Validate``: check and normalise the keys of ``checked``, in order.

    ``checked`` are the log level and custom-kind flags, in the order the program checks them.
    Runs on the file's values even when a flag overrides them, as NSQ does.
    """
    out = dict(cfg)
    for opt in checked:
        key = opt.config_key
        if key not in out:
            continue
        text = go_v(out[key])
        check = opt.kind.check if isinstance(opt.kind, CustomKind) else parse_level
        try:
            value = check(text)
        except ValueError:
            raise ConfigError(f"failed parsing {key} {text}") from None
        if value is DROP:
            del out[key]
        else:
            out[key] = value
    return out


def _go_type(value: object) -> str:
    names = {bool: "bool", int: "int64", float: "float64", str: "string", list: "[]interface {}"}
    if isinstance(value, datetime.date | datetime.time):
        return "time.Time"
    return names.get(type(value), "map[string]interface {}")


def coerce(kind: Kind | CustomKind, value: Any) -> Any:
    """Turn a TOML value into the option's type as go-options' ``coerce`` does."""
    if kind is Kind.LOG_LEVEL or isinstance(kind, CustomKind):
        return value  # validate_config normalised these already
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind is Kind.STRING:
        if isinstance(value, str | bool | int | float):
            return go_v(value)
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
    table: Sequence[OptionFlag], flags: FlagSet, cfg: Mapping[str, Any], defaults: T
) -> T:
    """go-options ``Resolve``: each field from its flag if given, else the config, else default.

    ``cfg`` must have been through :func:`validate_config`. Returns a copy of ``defaults``;
    raises ConfigError for a config value that cannot be coerced.
    """
    options = copy.deepcopy(defaults)
    for opt in table:
        if flags.is_set(opt.flag):
            value = copy.copy(flags[opt.flag].value.value)
        elif opt.config_key in cfg:
            raw = cfg[opt.config_key]
            try:
                value = coerce(opt.kind, raw)
            except ValueError as exc:
                raise ConfigError(
                    f"failed to coerce config value {opt.config_key} = {go_v(raw)} - {exc}"
                ) from None
        else:
            continue
        setattr(options, opt.attr, value)
    return options


@dataclass(frozen=True, slots=True)
class Command(Generic[T]):
    """The outcome of parsing a program's command line."""

    options: T
    #: ``--version`` was given: print the version and exit (the config file is not read).
    show_version: bool
    flags: FlagSet
    #: Arguments after the flags (NSQ's programs ignore them).
    args: list[str]


@dataclass(frozen=True, slots=True)
class Program(Generic[T]):
    """What one program gives the machinery: its flags, its defaults and its start checks."""

    #: The flag set's name (``-h`` says ``Usage of <name>:``).
    name: str
    #: The option flags, in the program's order (``-h`` sorts them by name).
    table: tuple[OptionFlag, ...]
    #: The plain flags before the table: (name, default, usage); a bool default makes a bool flag.
    head: tuple[tuple[str, bool | str, str], ...]
    #: The program's default options.
    defaults: Callable[[], T]
    #: Config keys its ``config.Validate`` checks, in its order (the log level if not told).
    validated: tuple[str, ...] = ("log_level",)
    #: Checks made on the resolved options (they raise ConfigError); may adjust them.
    check: Callable[[T], None] | None = None

    def flag_set(self, name: str | None = None, defaults: T | None = None) -> FlagSet:
        """The program's flag set; ``defaults`` supply the defaults (the program's if None)."""
        base = self.defaults() if defaults is None else defaults
        flags = FlagSet(self.name if name is None else name)
        for flag, default, usage in self.head:
            if isinstance(default, bool):
                flags.add_bool(flag, default, usage)
            else:
                flags.add_string(flag, default, usage)
        for opt in self.table:
            flags.var(opt.flag, flag_value(opt.kind, getattr(base, opt.attr)), opt.usage)
        return flags

    def validate_config(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The program's ``config.Validate`` over a config file's values."""
        by_key = {opt.config_key: opt for opt in self.table}
        return validate_config(cfg, [by_key[key] for key in self.validated if key in by_key])

    def resolve(self, flags: FlagSet, cfg: Mapping[str, Any], defaults: T | None = None) -> T:
        """Options from ``flags`` and a validated ``cfg``, then the program's checks."""
        base = self.defaults() if defaults is None else defaults
        options = resolve_options(self.table, flags, cfg, base)
        if self.check is not None:
            self.check(options)
        return options

    def parse(
        self, argv: Sequence[str], *, defaults: T | None = None, flags: FlagSet | None = None
    ) -> Command[T]:
        """Parse a command line (without the program name) as the program does.

        ``flags`` may be a flag set from :meth:`flag_set` (built with the same ``defaults``)
        with extra flags added by the caller. Raises goflags' FlagError and HelpRequested, and
        ConfigError.
        """
        base = self.defaults() if defaults is None else defaults
        flag_set = self.flag_set(defaults=base) if flags is None else flags
        rest = flag_set.parse(list(argv))
        if flag_set["version"].value.value:
            return Command(copy.deepcopy(base), True, flag_set, rest)
        path = flag_set["config"].value.value
        cfg = self.validate_config(load_config_file(path)) if path else {}
        return Command(self.resolve(flag_set, cfg, base), False, flag_set, rest)
