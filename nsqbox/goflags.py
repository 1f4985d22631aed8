"""Go-style command-line flags: the syntax, value types and error texts of Go's ``flag`` package.

Real NSQ tools, and the scripts and test harnesses written for them, pass flags the Go way:
``-flag``, ``--flag``, ``-flag=value``, ``-flag value`` (not for booleans), ``--`` to end flags,
and parsing that stops at the first argument that is not a flag. :class:`FlagSet` accepts exactly
that and refuses what Go refuses, with Go's messages, so ``nsqbox nsqd`` is a drop-in ``nsqd``.

The scalar parsers (:func:`parse_int`, :func:`parse_bool`, :func:`parse_float`,
:func:`parse_duration`) follow Go's ``strconv`` and ``time.ParseDuration``; the config-file loader
uses them too, because go-options coerces TOML strings with the same functions.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Generic, TypeVar

T = TypeVar("T")


class FlagError(Exception):
    """A command line Go's flag package would refuse. ``str()`` is Go's message.

    ``usage`` holds the flag set's usage text, which Go prints after the message.
    """

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class HelpRequested(Exception):
    """``-h``/``-help`` (any number of dashes) was given and is not a defined flag."""

    def __init__(self, usage: str) -> None:
        super().__init__("flag: help requested")
        self.usage = usage


# --- strconv ------------------------------------------------------------------------------------


def go_quote(s: str) -> str:
    """Quote ``s`` as Go's ``strconv.Quote`` (``%q``) does."""
    out = ['"']
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    named["\v"] = "\\v"
    for ch in s:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in named:
            out.append(named[ch])
        elif 0xDC80 <= code <= 0xDCFF:
            # A byte that was not UTF-8, smuggled through os.fsdecode's surrogateescape.
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


class StrconvError(ValueError):
    """A ``strconv`` parse failure, worded as Go's ``*strconv.NumError``."""

    def __init__(self, func: str, text: str, *, out_of_range: bool = False) -> None:
        reason = "value out of range" if out_of_range else "invalid syntax"
        super().__init__(f"strconv.{func}: parsing {go_quote(text)}: {reason}")
        self.out_of_range = out_of_range

    @property
    def flag_reason(self) -> str:
        """What the flag package says instead (its ``numError`` drops the details)."""
        return "value out of range" if self.out_of_range else "parse error"


def _underscore_ok(s: str) -> bool:
    """Go's rule: ``_`` only between digits, or between a base prefix and a digit."""
    saw = "^"  # ^ start, 0 digit or prefix, _ underscore, ! anything else
    if s[:1] in ("+", "-"):
        s = s[1:]
    i = 0
    hexa = False
    if len(s) >= 2 and s[0] == "0" and s[1].lower() in "box":
        i, saw, hexa = 2, "0", s[1].lower() == "x"
    for ch in s[i:]:
        if ch.isascii() and (ch.isdigit() or (hexa and ch.lower() in "abcdef")):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def parse_int(text: str, base: int = 0, bit_size: int = 64) -> int:
    """Go's ``strconv.ParseInt``; base 0 honours ``0x``, ``0o``, ``0b``, a leading ``0``, ``_``."""
    if not text:
        raise StrconvError("ParseInt", text)
    s = text
    negative = s[0] == "-"
    if s[0] in "+-":
        s = s[1:]
    if not s:
        raise StrconvError("ParseInt", text)
    digits = s
    if base == 0:
        base = 10
        if s[0] == "0":
            prefix = s[1:2].lower()
            if len(s) >= 3 and prefix in ("b", "o", "x"):
                base = {"b": 2, "o": 8, "x": 16}[prefix]
                digits = s[2:]
            else:
                base, digits = 8, s[1:]
        underscores = "_" in digits
        digits = digits.replace("_", "")
        if underscores and not _underscore_ok(text):
            raise StrconvError("ParseInt", text)
    value = 0
    for ch in digits:
        d = int(ch, 36) if ch.isascii() and ch.isalnum() else 99
        if d >= base:
            raise StrconvError("ParseInt", text)
        value = value * base + d
        if value >= 1 << 64:  # Go stops at the first uint64 overflow, before later junk
            raise StrconvError("ParseInt", text, out_of_range=True)
    limit = 1 << (bit_size - 1)
    if value > limit or (value == limit and not negative):
        raise StrconvError("ParseInt", text, out_of_range=True)
    return -value if negative else value


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: 1 t T TRUE true True, 0 f F FALSE false False."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise StrconvError("ParseBool", text)


def parse_float(text: str) -> float:
    """Go's ``strconv.ParseFloat(s, 64)``: decimal or hex (``0x1p-2``), ``_``, inf, nan."""
    body = text[1:] if text[:1] in ("+", "-") else text
    lowered = body.lower()
    if lowered in ("inf", "infinity"):
        return -math.inf if text[0] == "-" else math.inf
    if lowered == "nan" and body == text:
        return math.nan
    # Python's float() also takes spaces, a signed "nan" and more; Go does not, so only
    # digits, signs, '.', '_', exponents and hex letters get through to it.
    if not body or not set(text) <= _FLOAT_CHARS:
        raise StrconvError("ParseFloat", text)
    if "_" in text and not _underscore_ok(text):
        raise StrconvError("ParseFloat", text)
    cleaned = text.replace("_", "")
    try:
        if lowered.startswith("0x"):
            if "p" not in lowered:  # Go insists on a binary exponent in a hex float
                raise StrconvError("ParseFloat", text)
            value = float.fromhex(cleaned)
        else:
            value = float(cleaned)
    except OverflowError:
        raise StrconvError("ParseFloat", text, out_of_range=True) from None
    except ValueError:
        raise StrconvError("ParseFloat", text) from None
    if math.isinf(value):  # float() rounds overflow to inf where Go reports ErrRange
        raise StrconvError("ParseFloat", text, out_of_range=True)
    return value


_FLOAT_CHARS = frozenset("0123456789abcdefABCDEFxXpP._+-")


def format_float(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'g', -1, 64)``, which ``%v`` uses: ``1e+06``, ``0.5``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite, checked above
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # value = 0.<digits> * 10**point
    neg = "-" if sign else ""
    exp = point - 1
    if exp < -4 or exp >= 6:  # shortest 'g' switches to %e outside [1e-4, 1e6)
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{neg}{digits}{'0' * (point - len(digits))}"
    return f"{neg}{digits[:point]}.{digits[point:]}"


# --- time.Duration ------------------------------------------------------------------------------

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # U+00B5 micro sign
    "\u03bcs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NS = 1 << 63
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def _time_quote(s: str) -> str:
    """``time``'s own quoting: non-ASCII and control characters become ``\\x`` byte escapes."""
    out = ['"']
    for ch in s:
        if ch < " " or ord(ch) >= 0x80:
            raw = ch.encode("utf-8", "surrogateescape")
            out.extend(f"\\x{b:02x}" for b in raw)
        else:
            out.append("\\" + ch if ch in '"\\' else ch)
    out.append('"')
    return "".join(out)


def parse_duration_ns(text: str) -> int:
    """Go's ``time.ParseDuration``, in integer nanoseconds, with Go's error texts."""
    quoted = _time_quote(text)
    invalid = ValueError(f"time: invalid duration {quoted}")
    negative = text[:1] == "-"
    s = text[1:] if text[:1] in ("+", "-") else text
    if s == "0":
        return 0
    if not s:
        raise invalid
    total, pos = 0, 0
    while pos < len(s):
        part = _DURATION_PART.match(s, pos)
        assert part is not None  # every group may be empty, so it always matches
        whole_digits, frac_digits, unit_text = part.groups()
        if not whole_digits and not frac_digits:
            raise invalid  # no digits at all, as in ".s" or "x"
        if not unit_text:
            raise ValueError(f"time: missing unit in duration {quoted}")
        unit = _UNITS_NS.get(unit_text)
        if unit is None:
            raise ValueError(f"time: unknown unit {_time_quote(unit_text)} in duration {quoted}")
        whole = int(whole_digits or "0")
        if whole > _MAX_NS // unit:
            raise invalid
        frac, scale = 0, 1
        for digit in frac_digits or "":
            # Go keeps the fraction in a uint64 and silently drops digits that do not fit.
            longer = frac * 10 + int(digit)
            if frac > (_MAX_NS - 1) // 10 or longer > _MAX_NS:
                break
            frac, scale = longer, scale * 10
        # Go computes the fractional part in float64 too, so fractions of hours round alike.
        total += whole * unit + int(float(frac) * (float(unit) / scale))
        if total > _MAX_NS:
            raise invalid
        pos = part.end()
    if negative:
        return -total
    if total == _MAX_NS:
        raise invalid
    return total


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration``, returned in seconds (trio's unit)."""
    return parse_duration_ns(text) / 1e9


def _frac(value: int, prec: int) -> str:
    digits = str(value).rjust(prec, "0").rstrip("0")
    return "." + digits if digits else ""


def format_duration_ns(ns: int) -> str:
    """Go's ``time.Duration.String()``: ``1h0m0s``, ``1m30s``, ``250ms``, ``1.5µs``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000_000_000:
        unit, prec = ("ns", 0) if u < 1_000 else ("\u00b5s", 3) if u < 1_000_000 else ("ms", 6)
        whole, frac = divmod(u, 10**prec)
        return f"{sign}{whole}{_frac(frac, prec)}{unit}"
    secs, frac = divmod(u, 1_000_000_000)
    tail = f"{secs % 60}{_frac(frac, 9)}s"
    if secs >= 3600:
        return f"{sign}{secs // 3600}h{secs // 60 % 60}m{tail}"
    if secs >= 60:
        return f"{sign}{secs // 60}m{tail}"
    return f"{sign}{tail}"


def format_duration(seconds: float) -> str:
    """:func:`format_duration_ns` for a duration held in seconds."""
    return format_duration_ns(round(seconds * 1e9))


# --- flag values --------------------------------------------------------------------------------


class FlagValue(ABC, Generic[T]):
    """A flag's current value and how to set it from text (Go's ``flag.Value`` + ``Getter``).

    ``set`` raises ValueError whose text follows the colon in Go's "invalid value" message.
    """

    #: The placeholder in usage lines (Go's UnquoteUsage): ``-name int``.
    type_name: ClassVar[str] = "value"
    #: Go's ``IsBoolFlag()``: the flag may be given bare, meaning "true".
    is_bool_flag: bool = False
    #: What ``string()`` of this type's zero value is; defaults equal to it are not shown.
    zero_text: str = ""

    def __init__(self, value: T) -> None:
        self.value = value

    @abstractmethod
    def set(self, text: str) -> None:
        """Parse ``text`` into the value (Go's ``Set``)."""

    @abstractmethod
    def string(self) -> str:
        """The value as Go's ``String()`` prints it (shown as the default in usage)."""


class StringValue(FlagValue[str]):
    """``flag.String``."""

    type_name = "string"

    def set(self, text: str) -> None:
        self.value = text

    def string(self) -> str:
        return self.value


class IntValue(FlagValue[int]):
    """``flag.Int`` / ``flag.Int64``: ParseInt base 0, 64 bits."""

    type_name = "int"
    zero_text = "0"

    def set(self, text: str) -> None:
        try:
            self.value = parse_int(text, 0, 64)
        except StrconvError as exc:
            raise ValueError(exc.flag_reason) from None

    def string(self) -> str:
        return str(self.value)


class BoolValue(FlagValue[bool]):
    """``flag.Bool``: may be given bare; a value only with ``=``."""

    is_bool_flag = True
    zero_text = "false"

    def set(self, text: str) -> None:
        try:
            self.value = parse_bool(text)
        except StrconvError as exc:
            raise ValueError(exc.flag_reason) from None

    def string(self) -> str:
        return "true" if self.value else "false"


class FloatValue(FlagValue[float]):
    """``flag.Float64``."""

    type_name = "float"
    zero_text = "0"

    def set(self, text: str) -> None:
        try:
            self.value = parse_float(text)
        except StrconvError as exc:
            raise ValueError(exc.flag_reason) from None

    def string(self) -> str:
        return format_float(self.value)


class DurationValue(FlagValue[float]):
    """``flag.Duration``, held in seconds."""

    type_name = "duration"
    zero_text = "0s"

    def set(self, text: str) -> None:
        try:
            self.value = parse_duration(text)
        except ValueError:
            raise ValueError("parse error") from None  # the flag package hides the detail

    def string(self) -> str:
        return format_duration(self.value)


class StringArrayValue(FlagValue[list[str]]):
    """nsq's ``app.StringArray``: repeatable, one item per use (commas are not split)."""

    def set(self, text: str) -> None:
        self.value.append(text)

    def string(self) -> str:
        return ",".join(self.value)


class FloatArrayValue(FlagValue[list[float]]):
    """nsq's ``app.FloatArray``: repeatable and comma-separated, kept sorted high to low."""

    def set(self, text: str) -> None:
        for item in text.split(","):
            try:
                self.value.append(parse_float(item))
            except StrconvError:
                raise ValueError(f"Could not parse: {item}") from None
        self.value.sort(reverse=True)

    def string(self) -> str:
        return ",".join(f"{v:f}" for v in self.value)


class FuncValue(FlagValue[T]):
    """A custom flag: ``parse(text, current) -> new`` raising ValueError, ``show(value) -> str``.

    ``is_bool_flag=True`` lets it be given bare (set with "true"), as nsqd's ``--tls-required``.
    """

    def __init__(
        self,
        value: T,
        parse: Callable[[str, T], T],
        show: Callable[[T], str],
        *,
        is_bool_flag: bool = False,
        zero_text: str = "",
    ) -> None:
        super().__init__(value)
        self._parse = parse
        self._show = show
        self.is_bool_flag = is_bool_flag
        self.zero_text = zero_text

    def set(self, text: str) -> None:
        self.value = self._parse(text, self.value)

    def string(self) -> str:
        return self._show(self.value)


# --- the flag set -------------------------------------------------------------------------------

_V = TypeVar("_V", bound=FlagValue[Any])


@dataclass(slots=True)
class Flag:
    """One defined flag: its name, help text, value and the default as text."""

    name: str
    usage: str
    value: FlagValue[Any]
    default_text: str

    def usage_lines(self) -> str:
        """This flag's entry in ``-h`` output, laid out as Go's ``PrintDefaults``."""
        value, usage = self.value, self.usage
        placeholder = "" if value.is_bool_flag else value.type_name
        start = usage.find("`")
        end = usage.find("`", start + 1) if start >= 0 else -1
        if end > start >= 0:  # a back-quoted word in the usage names the placeholder
            placeholder = usage[start + 1 : end]
            usage = usage[:start] + placeholder + usage[end + 1 :]
        head = f"  -{self.name}" + (f" {placeholder}" if placeholder else "")
        text = head + ("\t" if len(head) <= 4 else "\n    \t") + usage.replace("\n", "\n    \t")
        if self.default_text != value.zero_text:
            shown = self.default_text
            if isinstance(value, StringValue):
                shown = go_quote(shown)
            text += f" (default {shown})"
        return text


class FlagSet:
    """A named set of flags, parsed with Go's ``flag`` package rules (ContinueOnError)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._flags: dict[str, Flag] = {}
        self._set: list[str] = []

    def var(self, name: str, value: _V, usage: str) -> _V:
        """Define a flag backed by ``value``; its current value is the default."""
        if name in self._flags:
            raise ValueError(f"{self.name} flag redefined: {name}")
        self._flags[name] = Flag(name, usage, value, value.string())
        return value

    def add_string(self, name: str, default: str, usage: str) -> StringValue:
        """Define a string flag."""
        return self.var(name, StringValue(default), usage)

    def add_int(self, name: str, default: int, usage: str) -> IntValue:
        """Define an integer flag."""
        return self.var(name, IntValue(default), usage)

    def add_bool(self, name: str, default: bool, usage: str) -> BoolValue:
        """Define a boolean flag."""
        return self.var(name, BoolValue(default), usage)

    def add_float(self, name: str, default: float, usage: str) -> FloatValue:
        """Define a float flag."""
        return self.var(name, FloatValue(default), usage)

    def add_duration(self, name: str, default: float, usage: str) -> DurationValue:
        """Define a duration flag (seconds)."""
        return self.var(name, DurationValue(default), usage)

    def add_string_array(self, name: str, usage: str) -> StringArrayValue:
        """Define a repeatable string flag, empty by default."""
        return self.var(name, StringArrayValue([]), usage)

    def add_float_array(self, name: str, usage: str) -> FloatArrayValue:
        """Define a repeatable, comma-separated float flag, empty by default."""
        return self.var(name, FloatArrayValue([]), usage)

    def lookup(self, name: str) -> Flag | None:
        """The flag called ``name``, or None."""
        return self._flags.get(name)

    def __getitem__(self, name: str) -> Flag:
        return self._flags[name]

    def __contains__(self, name: object) -> bool:
        return name in self._flags

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was given on the command line (Go's ``Visit``)."""
        return name in self._set

    @property
    def set_names(self) -> list[str]:
        """Names of the flags given on the command line, in first-seen order."""
        return list(self._set)

    def usage(self) -> str:
        """Go's default usage text: a header, then each flag sorted by name."""
        header = f"Usage of {self.name}:" if self.name else "Usage:"
        lines = [self._flags[n].usage_lines() for n in sorted(self._flags)]
        return "\n".join([header, *lines]) + "\n"

    def parse(self, args: Sequence[str]) -> list[str]:
        """Parse ``args`` (without the program name); return the arguments after the flags.

        Raises FlagError (Go's message, ``usage`` attached) or HelpRequested.
        """
        rest = list(args)
        while rest:
            arg = rest[0]
            if len(arg) < 2 or arg[0] != "-":
                break
            dashes = 2 if arg[1] == "-" else 1
            if arg == "--":
                return rest[1:]
            name = arg[dashes:]
            if not name or name[0] in "-=":
                raise FlagError(f"bad flag syntax: {arg}", self.usage())
            rest = rest[1:]
            value: str | None = None
            eq = name.find("=", 1)
            if eq > 0:
                name, value = name[:eq], name[eq + 1 :]
            flag = self._flags.get(name)
            if flag is None:
                if name in ("help", "h"):
                    raise HelpRequested(self.usage())
                raise FlagError(f"flag provided but not defined: -{name}", self.usage())
            if flag.value.is_bool_flag:
                text, template = (
                    ("true", f"invalid boolean flag {name}: {{err}}")
                    if value is None
                    else (value, f"invalid boolean value {go_quote(value)} for -{name}: {{err}}")
                )
            else:
                if value is None:
                    if not rest:
                        raise FlagError(f"flag needs an argument: -{name}", self.usage())
                    value, rest = rest[0], rest[1:]
                text = value
                template = f"invalid value {go_quote(value)} for flag -{name}: {{err}}"
            try:
                flag.value.set(text)
            except ValueError as exc:
                raise FlagError(template.format(err=exc), self.usage()) from None
            if name not in self._set:
                self._set.append(name)
        return rest
