"""A tool that cannot reach its peer says which address and why, once each.

Each command is run against a closed port (a socket bound on port 0 on 127.0.0.1, then
closed): nothing listens there, so connecting is refused at once.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox import cli
from nsqbox.net.unreachable import unreachable_reason
from nsqbox.snapshot.files import SnapshotWriter, open_for_writing
from nsqbox.snapshot.format import Header
from tests.tools.box_process import nsqbox


@pytest.fixture
def closed() -> str:
    """``127.0.0.1:PORT`` where nothing listens (a port just bound and closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


def said_once(err: str, address: str, words: str) -> None:
    """``err`` is one line that ends with ``words`` and names ``address`` exactly once."""
    lines = err.strip().splitlines()
    assert any(line.endswith(words) for line in lines), err
    line = next(line for line in lines if line.endswith(words))
    assert line.count(address) == 1, line
    assert "all attempts" not in err
    assert "Errno" not in err
    assert "Traceback" not in err


def test_the_reason_under_trio_and_httpx_failures(closed: str) -> None:
    host, _, port = closed.rpartition(":")

    async def connect() -> BaseException:
        with pytest.raises(OSError, match="all attempts to connect") as info:
            await trio.open_tcp_stream(host, int(port))
        return info.value

    refused = trio.run(connect)
    assert unreachable_reason(refused) == "connection refused"
    with pytest.raises(httpx.ConnectError) as info:
        httpx.get(f"http://{closed}/", timeout=5.0)
    assert unreachable_reason(info.value) == "connection refused"
    assert unreachable_reason(TimeoutError()) == "timed out"
    assert unreachable_reason(ValueError("[Errno 5] Odd thing")) == "odd thing"
    assert unreachable_reason(RuntimeError()) == "RuntimeError"


@pytest.mark.parametrize("flag", ["--nsqd-http-address", "--lookupd-http-address"])
def test_journey_names_the_address_once(
    closed: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["journey", "0" * 16, f"{flag}={closed}"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    said_once(err, closed, f"cannot reach {closed}: connection refused")


def test_trace_names_the_address_once(closed: str) -> None:
    traced = nsqbox("trace", "t", f"--nsqd-http-address={closed}")
    err = traced.stderr.decode()
    assert traced.returncode == 1, err
    said_once(err, closed, f"nsqbox trace: cannot reach {closed}: connection refused")
    assert err.rstrip().endswith("no nsqd to follow")


def sample(path: Path) -> None:
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(0, nodes=1))
        writer.topic(0, "t", False)
        writer.finish()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["save", "--admin-http-address"],
            "cannot reach the admin service at {}: connection refused",
        ),
        (
            ["save", "--nsqd-http-address"],
            "snapshot save failed: cannot reach {}: connection refused",
        ),
        (
            ["load", "--admin-http-address"],
            "cannot reach the admin service at {}: connection refused",
        ),
        (
            ["load", "--nsqd-http-address"],
            "snapshot load failed: cannot reach {}: connection refused",
        ),
    ],
    ids=["save-admin", "save-nsqd", "load-admin", "load-nsqd"],
)
def test_snapshot_names_the_address_once(
    closed: str,
    tmp_path: Path,
    args: list[str],
    words: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command, flag = args
    path = tmp_path / ("in.jsonl" if command == "load" else "out.jsonl")
    if command == "load":
        sample(path)
    status = cli.main(["snapshot", command, str(path), f"{flag}={closed}"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    said_once(err, closed, words.format(closed))
    if command == "save":
        assert not path.exists()


def test_fault_list_names_the_address_once(closed: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["fault", "list", f"--admin-http-address={closed}"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    said_once(err, closed, "connection refused")
    assert f"cannot reach the admin service at {closed}" in err


def test_journey_tells_a_node_that_answers_nothing_or_not_http_from_one_it_cannot_reach(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a listener takes the connection: the node was reached, so not "cannot reach"
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        args = ["journey", "0" * 16, f"--nsqd-http-address={address}"]
        # it never answers: no answer within the request timeout
        assert cli.main([*args, "--http-client-request-timeout=0.5s"]) == 1
        said_once(capsys.readouterr().err, address, f"{address}: no answer within 0.5s")
    with socket.socket() as garbage:
        garbage.bind(("127.0.0.1", 0))
        garbage.listen()
        garbage.settimeout(10)
        address = f"127.0.0.1:{garbage.getsockname()[1]}"

        def answer_garbage() -> None:  # what is not HTTP (as an nsqd's TCP port answers)
            conn, _ = garbage.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"\x00\x00\x00\x12not http at all\r\n\r\n")

        answering = threading.Thread(target=answer_garbage)
        answering.start()
        try:
            assert cli.main(["journey", "0" * 16, f"--nsqd-http-address={address}"]) == 1
        finally:
            answering.join(10)
        err = capsys.readouterr().err
        assert f"nsqbox journey: {address}: a broken answer (" in err
        assert "cannot reach" not in err
