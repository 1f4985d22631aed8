"""The nsqbox command line (in-process and as a real process) and nsqd-style logging.

Rules: localhost only, port 0, a fail_after on every wait for a child process.
"""

from __future__ import annotations

import io
import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import nsqbox
from nsqbox import cli
from nsqbox.process.logs import configure_logging, parse_level, set_level, unconfigure_logging
from tests.helpers import RawConn

TIMEOUT = 30
NSQBOX = [sys.executable, "-m", "nsqbox"]
CONSOLE_SCRIPT = Path(sys.executable).with_name("nsqbox")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NSQBOX, *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, check=False
    )


# --- the command table and top-level flags --------------------------------------------------------


def test_version_as_a_process() -> None:
    result = run("--version")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"nsqbox {nsqbox.__version__} (NSQ 1.3.0 protocol)\n",
        "",
    )


def test_nsqd_help_as_a_process() -> None:
    command = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else NSQBOX
    result = subprocess.run(
        [*command, "nsqd", "--help"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0
    assert result.stderr.startswith("Usage of nsqbox nsqd:\n")
    assert "  -tcp-address string\n" in result.stderr
    assert '(default "127.0.0.1:4150")' in result.stderr


def test_version_does_not_import_the_server() -> None:
    code = (
        "import sys; from nsqbox.cli import main; main(['--version']); print(sorted(sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=True
    )
    modules = result.stdout.splitlines()[-1]
    assert "'trio'" not in modules
    assert "'nsqbox.nsqd.server'" not in modules


def test_no_command_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert capsys.readouterr().err.startswith("usage: nsqbox <command> [flags]\n")


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("up", "nsqd", "lookupd", "admin", "tui", "pub", "tail", "stat", "fault"):
        assert re.search(rf"^  {name} +\S", out, re.MULTILINE), name


def test_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["frobnicate"]) == 2
    assert capsys.readouterr().err.startswith("nsqbox: unknown command 'frobnicate'\n")


def test_planned_command_not_there_yet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(cli.SUMMARIES, "later", "a command still to come")
    monkeypatch.setitem(cli.SUBCOMMANDS, "later", "nsqbox.no_such_module:main")
    assert cli.main(["later", "-n", "1"]) == 2
    assert capsys.readouterr().err == "nsqbox: 'later' is not available yet\n"


def test_every_registered_command_loads() -> None:
    for name, target in cli.SUBCOMMANDS.items():
        assert callable(cli._load(target)), name
        assert name in cli.SUMMARIES


def test_a_broken_import_inside_a_command_is_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nsqbox_test_broken_cmd.py").write_text("import nsqbox_test_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="nsqbox_test_no_such_dependency"):
        cli._load("nsqbox_test_broken_cmd:main")
    assert cli._load("nsqbox_test_missing_cmd:main") is None


# --- nsqd and up without a server ----------------------------------------------------------------


def test_nsqd_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nsqd", "-version"]) == 0
    # nsqd's shape, which scripts parse: "<name> v<semver> (built w/<one token>)"
    assert re.fullmatch(
        r"nsqd v1\.3\.0 \(built w/cpython3\.\d+\.\d+\S*\)\n", capsys.readouterr().out
    )


def test_up_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["up", "--version"]) == 0
    assert capsys.readouterr().out == cli.version_line() + "\n"


def test_bad_flag_prints_go_message_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nsqd", "--mem-queue-size=lots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        'invalid value "lots" for flag -mem-queue-size: parse error\nUsage of nsqbox nsqd:\n'
    )


def test_up_has_ready_json_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["up", "-h"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("Usage of nsqbox up:\n")
    assert "  -ready-json\n" in err
    assert '(default "./nsqbox-data")' in err


def test_stray_argument_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nsqd", "-snappy", "false"]) == 2
    assert "unexpected argument 'false'" in capsys.readouterr().err


def test_invalid_options_are_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nsqd", "--max-deflate-level=0"]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"\[nsqd\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} FATAL: "
        r"failed to instantiate nsqd - --max-deflate-level must be \[1,9\]\n",
        err,
    )


def test_port_in_use_is_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status = cli.main(
            [
                "nsqd",
                f"--tcp-address=127.0.0.1:{port}",
                "--http-address=",
                f"--data-path={tmp_path}",
            ]
        )
    assert status == 1
    err = capsys.readouterr().err
    expected = f"nsqd's TCP address 127.0.0.1:{port} is in use (another nsqd or nsqbox up?)"
    assert f"FATAL: failed to instantiate nsqd - {expected}\n" in err


@pytest.mark.parametrize(
    ("flag", "what"),
    [
        ("--tcp-address", "nsqd's TCP address"),
        ("--http-address", "nsqd's HTTP address"),
        ("--nsqlookupd-tcp-address", "nsqlookupd's TCP address"),
        ("--nsqadmin-http-address", "nsqadmin's HTTP address"),
    ],
)
def test_up_names_the_service_whose_port_is_taken(tmp_path: Path, flag: str, what: str) -> None:
    """A second ``nsqbox up`` (or anything on one of its ports): which service, which address."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))  # a port of our own, held while the box tries it
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        done = run("up", "--ephemeral-ports", f"{flag}={address}", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    service = what.partition("'")[0]
    last = done.stderr.splitlines()[-1]
    assert last.startswith("[nsqbox] "), last  # the box's line, not one service's
    assert last.endswith(
        f" FATAL: failed to start nsqbox - {what} {address} is in use "
        f"(another {service} or nsqbox up?)"
    ), done.stderr


def test_format_address() -> None:
    assert cli.format_address(("127.0.0.1", 4150)) == "127.0.0.1:4150"
    assert cli.format_address(("::1", 4150)) == "[::1]:4150"


# --- a real server in a child process ------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _refused(port: int) -> bool:
    """Whether nothing listens on ``port`` (a connect refused, or reset mid-handshake)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    return False


def _ping(port: int) -> bool:
    """Whether ``GET /ping`` on ``port`` answers 200."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as conn:
            conn.sendall(b"GET /ping HTTP/1.0\r\n\r\n")
            return conn.recv(64).startswith(b"HTTP/1.1 200 ")
    except (ConnectionRefusedError, ConnectionResetError):
        return False


@pytest.mark.parametrize("round_", range(3))
def test_nsqd_ports_open_and_close_together(tmp_path: Path, round_: int) -> None:
    """As nsqd: both listeners bound before either serves, and closed together at exit.

    A harness (nsq-ruby's nsq-cluster) waits for the HTTP port and then connects to TCP at
    once; when it stops nsqd it waits for HTTP to go away and expects TCP gone too. Clients
    held open make the shutdown busy, as a harness's are.
    """
    tcp, http = _free_port(), _free_port()
    args = [f"--tcp-address=127.0.0.1:{tcp}", f"--http-address=127.0.0.1:{http}", "-data-path=."]
    process = subprocess.Popen([*NSQBOX, "nsqd", *args], stderr=subprocess.DEVNULL, cwd=tmp_path)
    held: list[socket.socket] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while not _ping(http):
            assert process.poll() is None, "nsqd exited"
            assert time.monotonic() < deadline, "the HTTP port never answered"
            time.sleep(0.01)  # a poll's pause, not what the test asserts
        # HTTP answers: TCP takes a connection at once (no sleep, no retry).
        held = [socket.create_connection(("127.0.0.1", tcp), timeout=TIMEOUT) for _ in range(20)]
        for conn in held:
            conn.sendall(b"  V2")
        held.append(socket.create_connection(("127.0.0.1", http), timeout=TIMEOUT))

        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + TIMEOUT
        while not _refused(http):
            assert time.monotonic() < deadline, "the HTTP port never went away"
        # HTTP refuses: TCP refuses too, in the same instant.
        assert _refused(tcp)
        assert process.wait(TIMEOUT) == 0
    finally:
        for conn in held:
            conn.close()
        process.kill()
        process.wait(TIMEOUT)


async def _read_line(stream: trio.abc.ReceiveStream, buffer: bytearray) -> bytes:
    with trio.fail_after(TIMEOUT):
        while b"\n" not in buffer:
            chunk = await stream.receive_some(4096)
            if not chunk:
                raise EOFError(bytes(buffer))
            buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


async def _stop(process: trio.Process, signum: signal.Signals) -> int:
    process.send_signal(signum)
    with trio.fail_after(TIMEOUT):
        return await process.wait()


async def test_up_ready_json_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    args = ["up", "--ready-json", "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"]
    with (tmp_path / "stderr.txt").open("wb") as err:
        process = await trio.lowlevel.open_process(
            [*NSQBOX, *args], stdout=subprocess.PIPE, stderr=err, cwd=tmp_path
        )
        try:
            assert process.stdout is not None
            ready = json.loads(await _read_line(process.stdout, bytearray()))
            assert {"nsqd_http_address", "nsqd_tcp_address"} <= set(ready)
            host, port = ready["nsqd_tcp_address"].rsplit(":", 1)
            assert host == "127.0.0.1"
            assert ready["nsqd_http_address"].startswith("127.0.0.1:")
            assert (tmp_path / "nsqbox-data").is_dir()  # up's default data path, created

            conn = await RawConn.open((host, int(port)))
            await conn.pub("cli_test", b"hello")
            await conn.aclose()

            assert await _stop(process, signal.SIGTERM) == 0
        finally:
            process.kill()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert f"nsqbox up: nsqd: TCP {ready['nsqd_tcp_address']}, HTTP " in stderr
    # nsqd on port 0: the box's lookupd and admin took port 0 too
    for key in ("lookupd_tcp_address", "lookupd_http_address", "admin_http_address"):
        assert not ready[key].endswith((":4160", ":4161", ":4171")), ready


async def test_nsqd_ready_json(tmp_path: Path) -> None:
    args = ["nsqd", "--ready-json", "--tcp-address=127.0.0.1:0", "--http-address=", "-data-path=."]
    process = await trio.lowlevel.open_process(
        [*NSQBOX, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path
    )
    try:
        assert process.stdout is not None
        ready = json.loads(await _read_line(process.stdout, bytearray()))
        assert sorted(ready) == ["nsqd_http_address", "nsqd_tcp_address"]
        assert ready["nsqd_http_address"] is None
        assert await _stop(process, signal.SIGTERM) == 0
    finally:
        process.kill()


async def test_nsqd_banner_and_sigint(tmp_path: Path) -> None:
    args = ["nsqd", "-tcp-address", "127.0.0.1:0", "-http-address=", f"-data-path={tmp_path}"]
    process = await trio.lowlevel.open_process(
        [*NSQBOX, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path
    )
    try:
        assert process.stderr is not None
        buffer = bytearray()
        line = b""
        while not line.startswith(b"nsqbox nsqd: running"):
            line = await _read_line(process.stderr, buffer)
        assert re.fullmatch(
            rb"nsqbox nsqd: running nsqd \(TCP 127\.0\.0\.1:\d+, HTTP off\); data in .*; "
            rb"Ctrl-C stops",
            line,
        )
        assert await _stop(process, signal.SIGINT) == 0
    finally:
        process.kill()


# --- logging -------------------------------------------------------------------------------------

LINE = r"\[nsqd\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} "


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    try:
        yield stream
    finally:
        unconfigure_logging()


def test_log_lines_look_like_nsqds(log_stream: io.StringIO) -> None:
    configure_logging("info", "[nsqd] ", stream=log_stream)
    log = logging.getLogger("nsqbox.nsqd.test")
    log.debug("hidden")
    log.info("TOPIC(%s): created", "t")
    log.warning("careful")
    log.critical("bye")
    lines = log_stream.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(LINE + r"INFO: TOPIC\(t\): created", lines[0])
    assert re.fullmatch(LINE + r"WARNING: careful", lines[1])
    assert re.fullmatch(LINE + r"FATAL: bye", lines[2])


def test_log_level_changes_at_run_time(log_stream: io.StringIO) -> None:
    configure_logging("error", "[nsqd] ", stream=log_stream)
    log = logging.getLogger("nsqbox.x")
    log.warning("hidden")
    set_level("DEBUG")
    log.debug("shown")
    assert log_stream.getvalue().endswith("DEBUG: shown\n")
    assert "hidden" not in log_stream.getvalue()


def test_prefix_per_service(log_stream: io.StringIO) -> None:
    configure_logging(
        "info", "[nsqd] ", stream=log_stream, prefixes={"nsqbox.lookupd": "[nsqlookupd] "}
    )
    logging.getLogger("nsqbox.lookupd.tcp").info("a")
    logging.getLogger("nsqbox.lookupdx").info("b")
    lines = log_stream.getvalue().splitlines()
    assert lines[0].startswith("[nsqlookupd] ")
    assert lines[1].startswith("[nsqd] ")


def test_configuring_again_replaces_the_handler(log_stream: io.StringIO) -> None:
    other = io.StringIO()
    configure_logging("info", "[a] ", stream=other)
    configure_logging("info", "[b] ", stream=log_stream)
    logging.getLogger("nsqbox").info("once")
    assert other.getvalue() == ""
    assert log_stream.getvalue().startswith("[b] ")


def test_parse_level() -> None:
    assert parse_level("WARN") == "warn"
    with pytest.raises(ValueError, match=r"^invalid log level 'loud' \(debug, info"):
        parse_level("loud")


def test_library_logging_is_quiet_by_default() -> None:
    code = "import logging, nsqbox.process.logs; logging.getLogger('nsqbox.x').error('noise')"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=True
    )
    assert result.stderr == ""
