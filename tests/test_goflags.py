"""Go flag semantics: syntax, value types, error texts (Go 1.21 flag, strconv and time)."""

from __future__ import annotations

import math

import pytest

from nsqbox.go.flags import (
    FlagError,
    FlagSet,
    FuncValue,
    HelpRequested,
)
from nsqbox.go.syntax import (
    StrconvError,
    format_duration,
    format_duration_ns,
    format_float,
    go_quote,
    parse_bool,
    parse_duration,
    parse_duration_ns,
    parse_float,
    parse_int,
)

MS = 1_000_000
SEC = 1_000 * MS


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("5s", 5 * SEC),
        ("300ms", 300 * MS),
        ("-1.5h", -5400 * SEC),
        ("2h45m", (2 * 3600 + 45 * 60) * SEC),
        ("1h2m3.5s", 3723 * SEC + 500 * MS),
        ("1ns", 1),
        ("1us", 1000),
        ("1\u00b5s", 1000),
        ("1\u03bcs", 1000),
        (".5s", 500 * MS),
        ("1.s", SEC),
        ("1.0000000000000000000000001s", SEC),
        ("9223372036854775807ns", 2**63 - 1),
        ("-9223372036854775808ns", -(2**63)),
        ("2562047h47m16.854775807s", 2**63 - 1),
    ],
)
def test_parse_duration_accepts_go_syntax(text: str, ns: int) -> None:
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("1", 'time: missing unit in duration "1"'),
        ("1h1", 'time: missing unit in duration "1h1"'),
        ("x", 'time: invalid duration "x"'),
        (".s", 'time: invalid duration ".s"'),
        ("-", 'time: invalid duration "-"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("3 s", 'time: unknown unit " s" in duration "3 s"'),
        ("\u00b5s", 'time: invalid duration "\\xc2\\xb5s"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("2562048h", 'time: invalid duration "2562048h"'),
    ],
)
def test_parse_duration_errors_have_go_texts(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^time: ") as info:
        parse_duration_ns(text)
    assert str(info.value) == message


def test_parse_duration_returns_seconds() -> None:
    assert parse_duration("1m30s") == 90.0
    assert parse_duration("250ms") == 0.25


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1500, "1.5\u00b5s"),
        (25 * MS, "25ms"),
        (250 * MS, "250ms"),
        (SEC, "1s"),
        (60 * SEC, "1m0s"),
        (90 * SEC, "1m30s"),
        (3600 * SEC, "1h0m0s"),
        (3723 * SEC + 500 * MS, "1h2m3.5s"),
        (-1500, "-1.5\u00b5s"),
        (2**63 - 1, "2562047h47m16.854775807s"),
    ],
)
def test_format_duration_is_go_duration_string(ns: int, text: str) -> None:
    assert format_duration_ns(ns) == text
    assert parse_duration_ns(text) == ns


def test_format_duration_takes_seconds() -> None:
    assert format_duration(0.1) == "100ms"
    assert format_duration(900.0) == "15m0s"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("+5", 5),
        ("-7", -7),
        ("0x1f", 31),
        ("0X1F", 31),
        ("0o17", 15),
        ("017", 15),
        ("0b101", 5),
        ("1_000", 1000),
        ("0x_1f", 31),
        ("-9223372036854775808", -(2**63)),
    ],
)
def test_parse_int_base_zero(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "invalid syntax"),
        ("-", "invalid syntax"),
        ("08", "invalid syntax"),
        ("0x", "invalid syntax"),
        ("_1", "invalid syntax"),
        ("1__0", "invalid syntax"),
        ("1_", "invalid syntax"),
        (" 5", "invalid syntax"),
        ("1.5", "invalid syntax"),
        ("9223372036854775808", "value out of range"),
        ("99999999999999999999x", "value out of range"),
    ],
)
def test_parse_int_errors(text: str, reason: str) -> None:
    with pytest.raises(StrconvError) as info:
        parse_int(text)
    assert str(info.value) == f"strconv.ParseInt: parsing {go_quote(text)}: {reason}"


def test_parse_int_base_ten_rejects_prefixes_and_underscores() -> None:
    assert parse_int("010", 10) == 10
    for text in ("0x10", "1_0"):
        with pytest.raises(StrconvError):
            parse_int(text, 10)


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_parse_bool_true(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_parse_bool_false(text: str) -> None:
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["yes", "tRUE", "", "2", "on"])
def test_parse_bool_rejects_other_spellings(text: str) -> None:
    with pytest.raises(StrconvError) as info:
        parse_bool(text)
    assert str(info.value) == f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5", 1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("0x1p-2", 0.25),
        ("1_000.5", 1000.5),
        ("-Inf", -math.inf),
        ("infinity", math.inf),
    ],
)
def test_parse_float(text: str, value: float) -> None:
    assert parse_float(text) == value


@pytest.mark.parametrize(
    ("text", "out_of_range"),
    [(" 1", False), ("abc", False), ("+nan", False), ("0x10", False), ("1e400", True)],
)
def test_parse_float_errors(text: str, out_of_range: bool) -> None:
    with pytest.raises(StrconvError) as info:
        parse_float(text)
    assert info.value.out_of_range is out_of_range


def test_parse_float_nan() -> None:
    assert math.isnan(parse_float("NaN"))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (1.5, "1.5"),
        (100.0, "100"),
        (0.99, "0.99"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (math.inf, "+Inf"),
        (-2.5e-7, "-2.5e-07"),
    ],
)
def test_format_float_is_go_g_shortest(value: float, text: str) -> None:
    assert format_float(value) == text


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("abc", '"abc"'),
        ('a"b\\', '"a\\"b\\\\"'),
        ("\n\t", '"\\n\\t"'),
        ("\x01", '"\\x01"'),
        ("\u00b5", '"\u00b5"'),
        ("\udcff", '"\\xff"'),  # an undecodable argv byte (surrogateescape)
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


# --- FlagSet -------------------------------------------------------------------------------------


def make_flags() -> FlagSet:
    flags = FlagSet("prog")
    flags.add_string("name", "dflt", "a `word` to use")
    flags.add_int("count", 3, "how many")
    flags.add_bool("on", False, "switch")
    flags.add_float("ratio", 0.5, "a ratio")
    flags.add_duration("wait", 60.0, "how long")
    flags.add_string_array("addr", "repeatable")
    flags.add_float_array("pct", "percentiles")
    return flags


@pytest.mark.parametrize(
    "args",
    [
        ["-count=7"],
        ["--count=7"],
        ["-count", "7"],
        ["--count", "7"],
        ["-count", "0x7"],
    ],
)
def test_value_flag_spellings(args: list[str]) -> None:
    flags = make_flags()
    assert flags.parse(args) == []
    assert flags["count"].value.value == 7
    assert flags.is_set("count")


def test_values_of_every_type() -> None:
    flags = make_flags()
    rest = flags.parse(["-name=x", "-ratio", "2.5", "--wait=1m30s", "-on", "-pct=0.5,0.99"])
    assert rest == []
    assert [flags[n].value.value for n in ("name", "ratio", "wait", "on", "pct")] == [
        "x",
        2.5,
        90.0,
        True,
        [0.99, 0.5],
    ]
    assert flags.set_names == ["name", "ratio", "wait", "on", "pct"]
    assert not flags.is_set("count")
    assert flags["count"].value.value == 3  # the default stays


def test_bool_flag_takes_value_only_with_equals() -> None:
    flags = make_flags()
    assert flags.parse(["-on", "false", "-count=1"]) == ["false", "-count=1"]
    assert flags["on"].value.value is True
    assert not flags.is_set("count")


@pytest.mark.parametrize(
    ("arg", "value"), [("-on=false", False), ("--on=T", True), ("-on=0", False)]
)
def test_bool_flag_with_value(arg: str, value: bool) -> None:
    flags = make_flags()
    flags.parse([arg])
    assert flags["on"].value.value is value


def test_parsing_stops_at_first_non_flag() -> None:
    flags = make_flags()
    assert flags.parse(["-count=1", "file", "-on"]) == ["file", "-on"]
    assert not flags.is_set("on")


def test_double_dash_ends_flags_and_is_dropped() -> None:
    flags = make_flags()
    assert flags.parse(["-on", "--", "-count=2"]) == ["-count=2"]
    assert flags["count"].value.value == 3


def test_single_dash_is_an_argument() -> None:
    assert make_flags().parse(["-", "-on"]) == ["-", "-on"]


def test_a_value_may_start_with_a_dash() -> None:
    flags = make_flags()
    flags.parse(["-count", "-5", "-name", "-x"])
    assert flags["count"].value.value == -5
    assert flags["name"].value.value == "-x"


def test_repeated_scalar_flag_last_wins() -> None:
    flags = make_flags()
    flags.parse(["-count=1", "-count=2"])
    assert flags["count"].value.value == 2
    assert flags.set_names == ["count"]


def test_string_array_repeats_and_does_not_split_commas() -> None:
    flags = make_flags()
    flags.parse(["-addr=a:1,b:2", "--addr", "c:3"])
    assert flags["addr"].value.value == ["a:1,b:2", "c:3"]


def test_float_array_splits_commas_and_sorts_descending() -> None:
    flags = make_flags()
    flags.parse(["-pct=0.5,1.0", "-pct", "0.95"])
    assert flags["pct"].value.value == [1.0, 0.95, 0.5]


def test_empty_value_with_equals_is_a_value() -> None:
    flags = make_flags()
    assert flags.parse(["-name="]) == []
    assert flags["name"].value.value == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-nope"], "flag provided but not defined: -nope"),
        (["--nope=1"], "flag provided but not defined: -nope"),
        (["-count"], "flag needs an argument: -count"),
        (["-count=abc"], 'invalid value "abc" for flag -count: parse error'),
        (["-count", "1e3"], 'invalid value "1e3" for flag -count: parse error'),
        (
            ["-count=1" + "0" * 20],
            f'invalid value "1{"0" * 20}" for flag -count: value out of range',
        ),
        (["-wait=5"], 'invalid value "5" for flag -wait: parse error'),
        (["-ratio=x"], 'invalid value "x" for flag -ratio: parse error'),
        (["-on=yes"], 'invalid boolean value "yes" for -on: parse error'),
        (["-pct=0.5,x"], 'invalid value "0.5,x" for flag -pct: Could not parse: x'),
        (["---count=1"], "bad flag syntax: ---count=1"),
        (["-=1"], "bad flag syntax: -=1"),
    ],
)
def test_errors_have_go_messages(args: list[str], message: str) -> None:
    flags = make_flags()
    with pytest.raises(FlagError) as info:
        flags.parse(args)
    assert str(info.value) == message
    assert info.value.usage == flags.usage()


@pytest.mark.parametrize("arg", ["-h", "--h", "-help", "--help", "-help=1"])
def test_help_is_signalled_with_usage(arg: str) -> None:
    flags = make_flags()
    with pytest.raises(HelpRequested) as info:
        flags.parse(["-count=1", arg, "-nope"])
    assert info.value.usage.startswith("Usage of prog:\n")


def test_defined_h_flag_is_not_help() -> None:
    flags = FlagSet("prog")
    host = flags.add_string("h", "", "host")
    flags.parse(["-h", "example"])
    assert host.value == "example"


def test_usage_matches_go_print_defaults() -> None:
    flags = make_flags()
    flags.add_bool("x", False, "one letter")
    flags.add_string("empty", "", "no default shown")
    assert flags.usage() == (
        "Usage of prog:\n"
        "  -addr value\n    \trepeatable\n"
        "  -count int\n    \thow many (default 3)\n"
        "  -empty string\n    \tno default shown\n"
        '  -name word\n    \ta word to use (default "dflt")\n'
        "  -on\n    \tswitch\n"
        "  -pct value\n    \tpercentiles\n"
        "  -ratio float\n    \ta ratio (default 0.5)\n"
        "  -wait duration\n    \thow long (default 1m0s)\n"
        "  -x\tone letter\n"
    )


def test_redefining_a_flag_is_an_error() -> None:
    flags = make_flags()
    with pytest.raises(ValueError, match="flag redefined: count"):
        flags.add_int("count", 1, "again")


def _level(text: str, current: int) -> int:
    if text == "true":
        return current + 1
    if text.isdigit():
        return int(text)
    raise ValueError(f"bad level {text!r}")


def test_custom_bool_flag_may_be_bare() -> None:
    flags = FlagSet("prog")
    value = flags.var("level", FuncValue(0, _level, str, is_bool_flag=True, zero_text="0"), "lvl")
    assert flags.parse(["-level", "x"]) == ["x"]
    assert value.value == 1
    flags.parse(["--level=5"])
    assert value.value == 5
    assert flags.usage() == "Usage of prog:\n  -level\n    \tlvl\n"  # no placeholder, no default


def test_custom_bool_flag_errors() -> None:
    flags = FlagSet("prog")
    flags.var("level", FuncValue(0, _level, str, is_bool_flag=True), "lvl")
    with pytest.raises(FlagError) as info:
        flags.parse(["-level=x"])
    assert str(info.value) == "invalid boolean value \"x\" for -level: bad level 'x'"


def test_custom_flag_error_keeps_setter_text() -> None:
    flags = FlagSet("prog")
    flags.var("level", FuncValue(0, _level, str), "lvl")
    with pytest.raises(FlagError) as info:
        flags.parse(["-level", "x"])
    assert str(info.value) == "invalid value \"x\" for flag -level: bad level 'x'"
    assert flags.lookup("nope") is None
    assert "level" in flags
