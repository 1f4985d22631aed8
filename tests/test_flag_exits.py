"""How a command line that Go's ``flag`` package would refuse ends: one ``parse_or_exit``.

Go's ``flag.ExitOnError`` (every NSQ program's): ``-h`` prints the usage to stderr and exits 0;
a flag that does not parse prints Go's message, then the usage, and exits 2. Every nsqbox
command reaches that through :func:`nsqbox.go.flags.parse_or_exit`; the last test runs the real
nsqd and nsqlookupd beside nsqbox's when they are at hand, to show the expectation is Go's.
"""

from __future__ import annotations

import subprocess

import pytest

from nsqbox import cli
from nsqbox.go.flags import FlagSet, IntValue, parse_or_exit
from tests.test_process_parity import TIMEOUT, nsqbox, real


def flag_set() -> FlagSet:
    flags = FlagSet("prog")
    flags.var("n", IntValue(1), "a number")
    return flags


def test_a_good_command_line_is_returned_and_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = flag_set()
    assert parse_or_exit(lambda: flags.parse(["-n", "5", "rest"])) == ["rest"]
    assert flags["n"].value.value == 5
    assert capsys.readouterr() == ("", "")


def test_a_bad_flag_exits_2_with_gos_message_then_the_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = flag_set()
    assert parse_or_exit(lambda: flags.parse(["-bogus"])) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "flag provided but not defined: -bogus\n" + flags.usage()
    assert flags.usage().startswith("Usage of prog:\n  -n int\n")


def test_a_bad_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    flags = flag_set()
    assert parse_or_exit(lambda: flags.parse(["-n=x"])) == 2
    err = capsys.readouterr().err
    assert err.startswith('invalid value "x" for flag -n: parse error\nUsage of prog:\n')


@pytest.mark.parametrize("arg", ["-h", "--help", "-help"])
def test_help_exits_0_with_the_usage_on_stderr(
    arg: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = flag_set()
    assert parse_or_exit(lambda: flags.parse([arg])) == 0
    assert capsys.readouterr() == ("", flags.usage())


def test_the_synopsis_goes_before_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    flags = flag_set()
    assert parse_or_exit(lambda: flags.parse(["-x"]), synopsis="usage: prog CMD\n\n") == 2
    assert capsys.readouterr().err == (
        "flag provided but not defined: -x\nusage: prog CMD\n" + flags.usage()
    )
    assert parse_or_exit(lambda: flags.parse(["-h"]), synopsis="usage: prog CMD") == 0
    assert capsys.readouterr().err == "usage: prog CMD\n" + flags.usage()


def test_other_errors_propagate() -> None:
    def parse() -> int:
        raise ValueError("not a flag error")

    with pytest.raises(ValueError, match="not a flag error"):
        parse_or_exit(parse)


#: Every command that parses Go flags, with the header its usage starts with.
COMMANDS = [
    ("nsqd", "Usage of nsqbox nsqd:\n"),
    ("up", "Usage of nsqbox up:\n"),
    ("lookupd", "Usage of nsqlookupd:\n"),
    ("admin", "Usage of nsqbox admin:\n"),
    ("tui", "Usage of nsqbox tui:\n"),
    ("pub", "usage: nsqbox pub [--topic] TOPIC [MESSAGE ...] [flags]\n"),
    ("tail", "Usage of nsqbox tail:\n"),
    ("stat", "usage: nsqbox stat "),
    ("fault", "usage: nsqbox fault "),
    ("clock", "usage: nsqbox clock "),
]


@pytest.mark.parametrize(("command", "header"), COMMANDS, ids=[c for c, _ in COMMANDS])
def test_every_command_exits_as_go_flag_does(
    command: str, header: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([command, "-bogus"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, _, usage = err.partition("\n")
    assert first == "flag provided but not defined: -bogus"
    assert usage.startswith(header)
    assert cli.main([command, "-h"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(header)
    assert err == usage  # -h prints exactly the usage a bad flag prints after its message


@pytest.mark.parametrize("program", ["nsqd", "nsqlookupd"])
@pytest.mark.parametrize("side", ["nsqbox", "real"])
def test_the_processes_exit_as_real_nsq_does(program: str, side: str) -> None:
    argv = nsqbox(program) if side == "nsqbox" else real(program)
    bad = subprocess.run(
        [*argv, "-bogus"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.splitlines()[0] == "flag provided but not defined: -bogus"
    assert bad.stderr.splitlines()[1].startswith("Usage of ")
    assert bad.stderr.splitlines()[2].startswith("  -")
    help_ = subprocess.run(
        [*argv, "-h"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert (help_.returncode, help_.stdout) == (0, "")
    assert help_.stderr.splitlines()[0].startswith("Usage of ")
    assert help_.stderr == bad.stderr.partition("\n")[2]
