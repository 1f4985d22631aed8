"""``nsqbox lookupd``: nsqlookupd's flags, config file, and a real run ended by SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.go.flags import FlagError, HelpRequested
from nsqbox.lookupd.config import ConfigError, parse_lookupd_args
from nsqbox.lookupd.options import LookupdOptions
from nsqbox.lookupd.server import main, version_string
from nsqbox.process.logs import unconfigure_logging


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    unconfigure_logging()  # main() configures nsqbox's logger as the CLI would


def test_defaults_bind_loopback() -> None:
    options = parse_lookupd_args([]).options
    assert options == LookupdOptions()
    assert (options.tcp_address, options.http_address) == ("127.0.0.1:4160", "127.0.0.1:4161")
    assert (options.inactive_producer_timeout, options.tombstone_lifetime) == (300.0, 45.0)
    assert options.effective_broadcast_address() == "127.0.0.1"


def test_go_and_gnu_flag_forms() -> None:
    command = parse_lookupd_args(
        [
            "-tcp-address=0.0.0.0:5160",
            "--http-address",
            "127.0.0.1:5161",
            "-verbose",
            "--broadcast-address=lookupd.example",
            "-inactive-producer-timeout",
            "1m30s",
            "--tombstone-lifetime=500ms",
            "-log-level=WARN",
            "extra",
        ]
    )
    options = command.options
    assert options.tcp_address == "0.0.0.0:5160"
    assert options.http_address == "127.0.0.1:5161"
    assert options.effective_broadcast_address() == "lookupd.example"
    assert options.inactive_producer_timeout == 90.0
    assert options.tombstone_lifetime == 0.5
    assert options.log_level == "warn"
    assert command.args == ["extra"]
    assert command.show_version is False


def test_config_file_and_precedence(tmp_path: Path) -> None:
    config = tmp_path / "nsqlookupd.cfg"
    config.write_text(
        'tcp_address = "127.0.0.1:6160"\n'
        'http_address = "127.0.0.1:6161"\n'
        'tombstone_lifetime = "10s"\n'
        "inactive_producer_timeout = 2500\n"  # go-options: an integer is milliseconds
        'log_level = "debug"\n'
        'unknown_key = "ignored"\n'
    )
    options = parse_lookupd_args([f"-config={config}", "--http-address=127.0.0.1:7161"]).options
    assert options.tcp_address == "127.0.0.1:6160"
    assert options.http_address == "127.0.0.1:7161"  # the flag wins
    assert options.tombstone_lifetime == 10.0
    assert options.inactive_producer_timeout == 2.5
    assert options.log_level == "debug"


def test_config_errors(tmp_path: Path) -> None:
    bad_level = tmp_path / "level.cfg"
    bad_level.write_text('log_level = "loud"\n')
    with pytest.raises(ConfigError, match="failed parsing log_level loud"):
        parse_lookupd_args([f"--config={bad_level}"])
    bad_duration = tmp_path / "duration.cfg"
    bad_duration.write_text('tombstone_lifetime = "soon"\n')
    with pytest.raises(ConfigError, match="failed to coerce config value tombstone_lifetime"):
        parse_lookupd_args([f"--config={bad_duration}"])
    with pytest.raises(ConfigError, match="failed to load config file"):
        parse_lookupd_args([f"--config={tmp_path / 'missing.cfg'}"])


def test_flag_errors() -> None:
    with pytest.raises(FlagError, match="flag provided but not defined: -nope"):
        parse_lookupd_args(["-nope"])
    with pytest.raises(FlagError, match='invalid value "x" for flag -tombstone-lifetime'):
        parse_lookupd_args(["-tombstone-lifetime=x"])
    with pytest.raises(HelpRequested) as info:
        parse_lookupd_args(["-h"])
    assert "-inactive-producer-timeout duration" in info.value.usage


def test_main_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-version"]) == 0
    assert capsys.readouterr().out == version_string() + "\n"
    assert version_string().startswith("nsqlookupd v1.3.0 ")
    assert main(["--nope"]) == 2
    assert "flag provided but not defined: -nope" in capsys.readouterr().err
    assert main(["-help"]) == 0
    assert "Usage of nsqlookupd:" in capsys.readouterr().err
    assert main(["-verbose", "false"]) == 2
    assert "unexpected argument 'false'" in capsys.readouterr().err


def test_main_start_failures_are_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-tcp-address=127.0.0.1:0", "-http-address=nonsense"]) == 1
    err = capsys.readouterr().err
    assert "[nsqlookupd] " in err
    assert "FATAL: failed to instantiate nsqlookupd - address nonsense: missing port" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main([f"-tcp-address=127.0.0.1:{port}", "-http-address=127.0.0.1:0"]) == 1
    assert "FATAL: failed to instantiate nsqlookupd - " in capsys.readouterr().err


async def test_main_serves_until_sigterm() -> None:
    code = "import sys; from nsqbox.lookupd.server import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, "-tcp-address=127.0.0.1:0", "--http-address", "127.0.0.1:0"]
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            proc: trio.Process = await nursery.start(
                partial(trio.run_process, argv, stderr=subprocess.PIPE, check=False)
            )
            assert proc.stderr is not None
            log = b""
            while b"HTTP: listening on" not in log:
                chunk = await proc.stderr.receive_some()
                assert chunk, log
                log += chunk
            address = log.split(b"HTTP: listening on ")[1].split(b"\n")[0].decode()
            async with httpx.AsyncClient() as http:
                response = await http.get(f"http://{address}/ping")
            assert response.text == "OK"
            assert b"[nsqlookupd] " in log
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
