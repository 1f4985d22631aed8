"""``nsqbox tui``'s command line (the app itself is driven in the other tests)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.cli import (
    DEFAULT_LOOKUPD_HTTP,
    TUIOptions,
    UsageError,
    build_app,
    main,
    parse_tui_args,
    tui_argv,
    tui_command,
)
from nsqbox.go.flags import FlagError


def test_defaults_to_the_boxs_lookupd() -> None:
    assert parse_tui_args([]) == TUIOptions(lookupd_http_addresses=(DEFAULT_LOOKUPD_HTTP,))


def test_flags_go_style() -> None:
    options = parse_tui_args(
        [
            "-lookupd-http-address=10.0.0.9:4161",
            "--lookupd-http-address",
            "10.0.0.8:4161",
            "--read-only",
            "--interval=500ms",
            "--http-client-request-timeout=1s",
            "--admin-http-address=10.0.0.9:4171",
        ]
    )
    assert options == TUIOptions(
        lookupd_http_addresses=("10.0.0.9:4161", "10.0.0.8:4161"),
        read_only=True,
        interval=0.5,
        request_timeout=1.0,
        admin_http_address="10.0.0.9:4171",
    )
    nsqds = parse_tui_args(["--nsqd-http-address", "127.0.0.1:4151"])
    assert nsqds is not None
    assert (nsqds.lookupd_http_addresses, nsqds.nsqd_http_addresses) == ((), ("127.0.0.1:4151",))


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (
            ["--nsqd-http-address=a:1", "--lookupd-http-address=b:2"],
            UsageError,
            "not both",
        ),
        (["--interval=0s"], UsageError, "must be positive"),
        (["extra"], UsageError, "unexpected argument 'extra'"),
        (["--nope"], FlagError, "flag provided but not defined: -nope"),
        (["--web", "--web-port=70000"], UsageError, r"--web-port must be in \[0, 65535\]"),
    ],
    ids=["both", "interval", "argument", "unknown", "web-port"],
)
def test_bad_command_lines(argv: list[str], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_tui_args(argv)


def test_main_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert re.fullmatch(r"nsqbox tui v1\.3\.0 \(built w/\S+\)\n", capsys.readouterr().out)
    assert main(["-h"]) == 0
    assert "-lookupd-http-address" in capsys.readouterr().err
    assert main(["--interval=-1s"]) == 2
    assert "must be positive" in capsys.readouterr().err
    assert main(["--bogus"]) == 2


def test_build_app() -> None:
    app = build_app(TUIOptions(nsqd_http_addresses=("127.0.0.1:4151",), read_only=True))
    assert isinstance(app, AdminApp)
    assert (app.read_only, app.interval) == (True, 2.0)


def test_web_flags_and_the_command_each_tab_runs() -> None:
    options = parse_tui_args(
        [
            "--web",
            "--web-host=0.0.0.0",
            "--web-port=0",
            "--nsqd-http-address=10.0.0.1:4151",
            "--nsqd-http-address=10.0.0.2:4151",
            "--read-only",
            "--interval=1.5s",
            "--http-client-connect-timeout=250ms",
            "--allowed-host=box.internal",
            "--allowed-host=nsq.example",
            "--web-save-dir=saved",
        ]
    )
    assert options is not None
    assert (options.web, options.web_host, options.web_port) == (True, "0.0.0.0", 0)
    assert options.allowed_hosts == ("box.internal", "nsq.example")
    assert parse_tui_args([]) == TUIOptions(
        lookupd_http_addresses=(DEFAULT_LOOKUPD_HTTP,), web=False, web_port=4172
    )
    # the tabs' TUIs get the same flags, the web ones aside
    argv = tui_argv(options)
    assert not any(a.startswith("--web") for a in argv)
    again = parse_tui_args(argv)
    assert again is not None
    assert again == TUIOptions(
        nsqd_http_addresses=("10.0.0.1:4151", "10.0.0.2:4151"),
        read_only=True,
        interval=1.5,
        connect_timeout=0.25,
    )
    # each tab's TUI knows it is a web session, and where it may save (an absolute path)
    assert shlex.split(tui_command(options)) == [
        *(sys.executable, "-m", "nsqbox", "tui", *argv),
        "--web-session",
        f"--web-save-dir={Path('saved').absolute()}",
    ]


def test_each_tab_gets_every_flag_but_the_web_ones() -> None:
    given = [
        "--lookupd-http-address=10.0.0.1:4161",
        "--lookupd-http-address=10.0.0.2:4161",
        "--read-only",
        "--admin-http-address=10.0.0.1:4171",
        "--interval=3s",
        "--http-client-connect-timeout=250ms",
        "--http-client-request-timeout=7s",
    ]
    options = parse_tui_args(["--web", "--web-port=0", *given])
    assert options is not None
    argv = shlex.split(tui_command(options))[4:]
    assert sorted(argv) == sorted([*given, "--web-session"])
    again = parse_tui_args(argv)
    assert again is not None
    assert again == TUIOptions(
        lookupd_http_addresses=("10.0.0.1:4161", "10.0.0.2:4161"),
        read_only=True,
        admin_http_address="10.0.0.1:4171",
        interval=3.0,
        connect_timeout=0.25,
        request_timeout=7.0,
        web_session=True,
    )
    # every field of TUIOptions but the web ones is given above, none at its default
    web = {"web", "web_host", "web_port", "allowed_hosts", "web_save_dir"}
    defaults = TUIOptions()
    assert all(
        getattr(again, f) != getattr(defaults, f)
        for f in TUIOptions.__dataclass_fields__
        if f not in web and f != "nsqd_http_addresses"
    )
