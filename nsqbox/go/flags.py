"""Go-style command-line flags: the syntax, value types and error texts of Go's ``flag`` package.

Real NSQ tools, and the scripts and test harnesses written for them, pass flags the Go way:
``-flag``, ``--flag``, ``-flag=value``, ``-flag value`` (not for booleans), ``--`` to end flags,
and parsing that stops at the first argument that is not a flag. :class:`FlagSet` accepts exactly
that and refuses what Go refuses, with Go's messages, so ``nsqbox nsqd`` is a drop-in ``nsqd``.

The scalar parsers (:func:`parse_int`, :func:`parse_bool`, :func:`parse_float`,
:func:`parse_duration`) and :func:`go_quote` live in :mod:`nsqbox.go.syntax`.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from .syntax import (
    StrconvError,
    format_duration,
    format_float,
    go_quote,
    parse_bool,
    parse_duration,
    parse_float,
    parse_int,
)

__all__ = [
    "BoolValue",
    "DurationValue",
    "Flag",
    "FlagError",
    "FlagSet",
    "FlagValue",
    "FloatArrayValue",
    "FloatValue",
    "FuncValue",
    "HelpRequested",
    "IntValue",
    "StringArrayValue",
    "StringValue",
    "parse_or_exit",
]

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


def parse_or_exit(parse: Callable[[], T], *, synopsis: str = "") -> T | int:
    """Run ``parse`` (a command line's parsing); what it returns, or the exit status for Go's flags.

    Go's ``flag.ExitOnError``, which every NSQ program uses: ``-h``/``-help``
    (:class:`HelpRequested`) writes the usage to stderr and exits 0; a flag that does not
    parse (:class:`FlagError`) writes Go's message, then the usage, and exits 2. Here the
    status is returned instead, an int, for the command's ``main`` to return; ``parse``
    itself must not return an int. ``synopsis`` (a command's subcommands) goes before the
    usage. Any other exception ``parse`` raises (a configuration error) propagates.
    """
    before = f"{synopsis.rstrip()}\n" if synopsis else ""
    try:
        return parse()
    except HelpRequested as exc:
        sys.stderr.write(before + exc.usage)
        return 0
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n{before}{exc.usage}")
        return 2
