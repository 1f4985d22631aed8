"""Go's syntax for strings, integers, floats, booleans and durations, as ``strconv`` and ``time``.

:func:`go_quote` is ``strconv.Quote`` (``%q``); :func:`parse_int`, :func:`parse_bool` and
:func:`parse_float` are ``strconv``'s parsers with ``*strconv.NumError``'s messages;
:func:`parse_duration` and :func:`format_duration` are ``time.ParseDuration`` and
``Duration.String``. Flags, config files, error texts and the HTTP APIs all use these, so each
exists once. No imports beyond the standard library.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

__all__ = [
    "StrconvError",
    "format_duration",
    "format_duration_ns",
    "format_float",
    "go_quote",
    "parse_bool",
    "parse_count",
    "parse_duration",
    "parse_duration_ns",
    "parse_float",
    "parse_int",
]


# --- strconv ------------------------------------------------------------------------------------


def go_quote(s: str | bytes) -> str:
    """Quote ``s`` as Go's ``strconv.Quote`` (``%q``) does.

    Bytes that are not valid UTF-8 (given as bytes, or smuggled into a str by
    ``os.fsdecode``'s surrogateescape) become ``\\xNN``.
    """
    if isinstance(s, bytes):
        s = s.decode("utf-8", "surrogateescape")
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


#: The most digits :func:`parse_count` reads (int64's 19).
MAX_COUNT_DIGITS = 19


def parse_count(text: str, most: int = (1 << 63) - 1, least: int = 0) -> int:
    """A whole number from a request or a peer: ASCII digits only, ``least`` to ``most``.

    :func:`parse_int` in base 10, without a sign: Python's ``int()`` also takes ``'١٢'``
    (Arabic-Indic digits), ``'1_000'``, spaces and thousands of digits; Go's strconv and
    this take none of them. ValueError (a :class:`StrconvError` for bad syntax) otherwise.
    """
    if not text or len(text) > MAX_COUNT_DIGITS or not (text.isascii() and text.isdigit()):
        raise StrconvError("ParseInt", text[:32])
    value = parse_int(text, 10)
    if not least <= value <= most:
        raise ValueError(f"{value} is not between {least} and {most}")
    return value


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
