"""``nsqbox tail`` and a terminal: escape sequences in bodies shown, not obeyed; the warning
on a topic with no channel.

The tail runs as a child process whose stdout is a pty (the terminal case), a pipe, or a pty
with ``--raw``, against a real ``nsqbox up`` child.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nsqbox import cli
from nsqbox.testing.waiting import poll
from tests.tools.box_process import NSQBOX, TIMEOUT, BoxProcess, running_box

BODIES = [
    b"\x1b]52;c;cGF5bG9hZA==\x07",  # OSC 52: write the clipboard
    b"\x1b]0;owned\x07 \x1b]8;;http://evil/\x1b\\ok\x1b]8;;\x1b\\",  # OSC 0, OSC 8
    b"\x1b[6n \xc2\x9b31m \x9b plain caf\xc3\xa9",  # CSI 6n, C1 CSI (UTF-8 and a lone byte)
]
SHOWN = [
    b"\\x1b]52;c;cGF5bG9hZA==\\x07",
    b"\\x1b]0;owned\\x07 \\x1b]8;;http://evil/\\x1b\\ok\\x1b]8;;\\x1b\\",
    b"\\x1b[6n \\x9b31m \\x9b plain caf\xc3\xa9",
]


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory)


def publish(box: BoxProcess, topic: str, bodies: list[bytes]) -> None:
    address = box.ready["nsqd_http_addresses"][0]
    for body in bodies:
        response = httpx.post(
            f"http://{address}/pub", params={"topic": topic}, content=body, timeout=TIMEOUT
        )
        response.raise_for_status()


def tail_on_pty(*args: str) -> tuple[bytes, bytes]:
    """Run ``nsqbox tail <args>`` with a pty as stdout; what it printed (pty line ends
    undone) and its stderr."""
    master, slave = os.openpty()
    try:
        process = subprocess.Popen(
            [*NSQBOX, "tail", *args], stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        os.close(slave)
        slave = -1
        out = b""
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert time.monotonic() < deadline, f"tail did not finish; printed {out!r}"
            readable, _, _ = select.select([master], [], [], 0.2)
            if readable:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif process.poll() is not None:
                break
        assert process.wait(TIMEOUT) == 0
        assert process.stderr is not None
        err = process.stderr.read()
        process.stderr.close()
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return out.replace(b"\r\n", b"\n"), err


def test_tail_on_a_terminal_shows_control_characters(box: BoxProcess) -> None:
    publish(box, "t_term", BODIES)
    address = f"--nsqd-tcp-address={box.ready['nsqd_tcp_addresses'][0]}"
    out, _ = tail_on_pty(address, "--channel=c", "-n=3", "t_term")
    assert out.endswith(b"\n")
    assert sorted(out.splitlines()) == sorted(SHOWN)
    assert b"\x1b" not in out
    assert b"\x9b" not in out.replace(b"\\x9b", b"")


def test_tail_piped_or_raw_writes_bodies_as_they_are(box: BoxProcess) -> None:
    publish(box, "t_raw", BODIES * 2)
    address = f"--nsqd-tcp-address={box.ready['nsqd_tcp_addresses'][0]}"
    piped = subprocess.run(
        [*NSQBOX, "tail", address, "--channel=c", "-n=3", "t_raw"],
        capture_output=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert piped.stdout.endswith(b"\n")
    assert sorted(piped.stdout.splitlines()) == sorted(BODIES)
    out, _ = tail_on_pty(address, "--channel=c", "-n=3", "--raw", "t_raw")
    # the pty's own line discipline turns \n into \r\n (undone); the bodies are untouched
    assert sorted(out.splitlines()) == sorted(BODIES)  # (the order is nsqd's)


def wait_for_lookupd(box: BoxProcess, topic: str) -> None:
    """Until lookupd lists an nsqd for ``topic`` (registration is asynchronous)."""
    url = box.url("lookupd_http_address", "/lookup")

    def listed() -> tuple[bool, None]:
        return httpx.get(url, params={"topic": topic}, timeout=TIMEOUT).status_code == 200, None

    poll(listed, TIMEOUT, lambda _: f"lookupd never listed {topic}")


def test_tail_warns_on_a_topic_with_no_channel_as_the_tui_does(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(box, "t_first", [b"1", b"2", b"3", b"4", b"5", b"6"])
    wait_for_lookupd(box, "t_first")
    lookupd = f"--lookupd-http-address={box.ready['lookupd_http_address']}"
    assert cli.main(["tail", lookupd, "-n", "3", "t_first"]) == 0
    out, err = capsys.readouterr()
    assert out == "1\n2\n3\n"
    assert err == (
        "nsqbox tail: WARNING: topic t_first has no channel: tailing it would consume its "
        "6 buffered messages; tailing it anyway, as nsq_tail does (-n 3 prints 3 of them: the "
        "other 3 are taken too)\n"
    )

    # with a channel the tail's own gets only what comes next: no warning
    nsqd = box.ready["nsqd_http_addresses"][0]
    params = {"topic": "t_first", "channel": "kept"}
    httpx.post(f"http://{nsqd}/channel/create", params=params, timeout=TIMEOUT).raise_for_status()
    tail = subprocess.Popen(
        [*NSQBOX, "tail", lookupd, "-n", "1", "t_first"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stats = f"http://{nsqd}/stats"

        def subscribed() -> tuple[bool, None]:  # the tail's ephemeral channel is there
            topics = httpx.get(stats, params={"format": "json"}, timeout=TIMEOUT).json()["topics"]
            return any(
                c["channel_name"].startswith("tail")
                for t in topics
                if t["topic_name"] == "t_first"
                for c in t["channels"]
            ), None

        poll(subscribed, TIMEOUT, lambda _: "the tail never subscribed")
        publish(box, "t_first", [b"next"])
        out_bytes, err_bytes = tail.communicate(timeout=TIMEOUT)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait(TIMEOUT)
    assert (tail.returncode, out_bytes, err_bytes) == (0, b"next\n", b"")


def adjacent_free_ports() -> int:
    """A port P with P and P + 1 free on 127.0.0.1 just now (nsqd's own 4150/4151 layout)."""
    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two adjacent free ports")


@pytest.fixture
def nsqd_on_adjacent_ports(tmp_path: Path) -> Iterator[int]:
    """``nsqbox nsqd`` with its HTTP port right after its TCP port; yields the TCP port."""
    for _ in range(3):  # another process may take a port between the check and the bind
        port = adjacent_free_ports()
        process = subprocess.Popen(
            [
                *NSQBOX,
                "nsqd",
                f"--tcp-address=127.0.0.1:{port}",
                f"--http-address=127.0.0.1:{port + 1}",
                f"--data-path={tmp_path}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + TIMEOUT
            while process.poll() is None:
                try:
                    httpx.get(f"http://127.0.0.1:{port + 1}/ping", timeout=TIMEOUT)
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "nsqd never answered"
                    time.sleep(0.05)
                    continue
                yield port
                return
        finally:
            process.terminate()
            process.wait(TIMEOUT)
    raise AssertionError("nsqd could not bind two adjacent ports")


def test_tail_with_an_nsqd_tcp_address_checks_the_next_port(
    nsqd_on_adjacent_ports: int, capsys: pytest.CaptureFixture[str]
) -> None:
    port = nsqd_on_adjacent_ports
    for body in (b"a", b"b", b"c", b"d"):
        httpx.post(
            f"http://127.0.0.1:{port + 1}/pub", params={"topic": "t"}, content=body, timeout=TIMEOUT
        ).raise_for_status()
    assert cli.main(["tail", f"--nsqd-tcp-address=127.0.0.1:{port}", "-n=2", "t"]) == 0
    out, err = capsys.readouterr()
    assert out == "a\nb\n"
    assert err == (
        "nsqbox tail: WARNING: topic t has no channel: tailing it would consume its "
        "4 buffered messages; tailing it anyway, as nsq_tail does (-n 2 prints 2 of them: the "
        "other 2 are taken too)\n"
    )
