"""The machinery of the differential test: servers, raw clients and what is compared.

Each server runs as a subprocess on ports it picks itself (read from its
"listening on" log lines). A case is sent over a fresh connection and its reply
reduced to a plain, comparable value (:data:`Reply`) with the volatile parts
(dates, the server's own ports) masked:

* TCP: every frame received, in order, as ``"<type> <data>"``, then ``CLOSED``.
  After the frames a case expects, the client sends one unknown command: a
  connection still open answers ``E_INVALID`` and closes, so whether the case
  itself closed the connection shows without waiting for anything.
* HTTP: the status line, the headers but ``Date`` (names lower-cased, sorted,
  ``Content-Length`` checked against the body and dropped) and the body.

``python -m tests.compat.differential`` runs every case against the real
binaries (``NSQ_BIN``) and prints the replies as the data module
:mod:`tests.compat.differential_expected`.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.reliability.blocking import wait_for

REPO: Final = Path(__file__).resolve().parents[2]
NSQ_BIN: Final = Path(os.environ.get("NSQ_BIN", REPO.parent / "shared" / "nsq" / "bin"))
#: Guard for every wait (start-up, a reply): a broken server fails, never hangs.
TIMEOUT: Final = 20.0
#: The limits both nsqds run with (the byte-exact error table assumes them).
NSQD_FLAGS: Final = (
    "--max-msg-size=1024",
    "--max-body-size=4096",
    # nsqbox's default broadcast address is the loopback bind host, nsqd's the
    # hostname (a documented difference); the same one shows the same prefix.
    "--broadcast-address=127.0.0.1",
)
#: Sent after a case's frames: an open connection answers E_INVALID and closes.
PROBE: Final = b"DIFFPROBE\n"

#: A reply reduced to comparable text (see the module doc).
Reply = tuple[str, ...]


@dataclass(frozen=True)
class Server:
    """A running server: its addresses and the ports to mask in replies."""

    tcp: tuple[str, int]
    http: tuple[str, int]

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.tcp[1], self.http[1])


def real_binary(program: str) -> Path | None:
    """The real NSQ ``program`` if it can be run, else None."""
    binary = NSQ_BIN / program
    return binary if os.access(binary, os.X_OK) else None


def nsqbox_argv(program: str) -> list[str]:
    return [sys.executable, "-m", "nsqbox", "nsqd" if program == "nsqd" else "lookupd"]


@contextmanager
def running(argv: Sequence[str], program: str, workdir: Path) -> Iterator[Server]:
    """Run ``argv`` on 127.0.0.1 ports of its choosing until the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    flags = ["--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"]
    if program == "nsqd":
        flags += [f"--data-path={workdir}", "--https-address=127.0.0.1:0", *NSQD_FLAGS]
    log_path = workdir / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*argv, *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
    try:
        found: list[re.Match[str]] = []

        def listening() -> bool:
            text = log_path.read_text(errors="replace")
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} did not start:\n{text}")
            found[:] = [
                m
                for m in (
                    re.search(r"TCP: listening on 127\.0\.0\.1:(\d+)", text),
                    re.search(r"HTTP: listening on 127\.0\.0\.1:(\d+)", text),
                )
                if m
            ]
            return len(found) == 2

        wait_for(listening, timeout=TIMEOUT)
        tcp, http = found
        yield Server(("127.0.0.1", int(tcp.group(1))), ("127.0.0.1", int(http.group(1))))
    finally:
        # kill, not TERM: real nsqd ignores a TERM that comes before its handler is
        # installed, and nothing here depends on a clean stop
        proc.kill()
        proc.wait()


# -- TCP ------------------------------------------------------------------------

_SIZE: Final = struct.Struct(">i")
_FRAME_HEAD: Final = struct.Struct(">ii")
_FRAME_NAMES: Final = {0: "RESPONSE", 1: "ERROR", 2: "MESSAGE"}


def tcp_reply(server: Server, steps: Sequence[bytes], command: bytes, frames: int) -> Reply:
    """Send each setup step (one frame back each), then ``command`` and read ``frames``.

    Then the probe; the reply is every frame seen, then ``CLOSED``.
    """
    out: list[str] = []
    with socket.create_connection(server.tcp, timeout=TIMEOUT) as sock:
        reader = _Reader(sock)
        try:
            sock.sendall(b"  V2")
            for step in steps:
                sock.sendall(step)
                out.append(reader.frame())
            sock.sendall(command)
            for _ in range(frames):
                out.append(reader.frame())
            sock.sendall(PROBE)
            while True:
                out.append(reader.frame())
        except _Closed:
            out.append("CLOSED")
        except (BrokenPipeError, ConnectionResetError):
            # a send after the server hung up (a reset can beat the FIN)
            out.append("CLOSED")
    return tuple(out)


class _Closed(Exception):
    pass


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _need(self, n: int) -> bytes:
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if self.buf:
                    raise AssertionError(f"connection closed inside a frame: {self.buf!r}")
                raise _Closed
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def frame(self) -> str:
        size, kind = _FRAME_HEAD.unpack(self._need(8))
        data = self._need(size - 4)
        if kind == 2:  # a message: mask its timestamp and id
            data = b"TIMESTAMP" + data[8:10] + b"ID" + data[26:]
        return f"{_FRAME_NAMES.get(kind, kind)} {data!r}"


def body(data: bytes) -> bytes:
    """A V2 command body: its size, then the data."""
    return _SIZE.pack(len(data)) + data


# -- HTTP -----------------------------------------------------------------------


def http_reply(server: Server, requests: Sequence[bytes]) -> Reply:
    """Each raw request on its own connection (it asks to close); the replies in order."""
    out: list[str] = []
    for request in requests:
        with socket.create_connection(server.http, timeout=TIMEOUT) as sock:
            sock.sendall(request)
            received = b""
            while True:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                received += chunk
        out += _http_parts(received, server.ports, head_request=request.startswith(b"HEAD "))
    return tuple(out)


def _http_parts(received: bytes, ports: Sequence[int], *, head_request: bool) -> list[str]:
    head, sep, content = received.partition(b"\r\n\r\n")
    if not sep:
        return [f"NO ANSWER {received!r}"]
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "date":
            continue
        if name == "content-length":
            # the body's own length (a HEAD answer has none); ports masked may change it
            assert head_request or int(value) == len(content), (value, content)
            if head_request:
                headers.append(f"{name}: {value}")
            continue
        headers.append(f"{name}: {_mask(value, ports)}")
    return [lines[0], *sorted(headers), f"body {_mask(content.decode('latin-1'), ports)!r}"]


def _mask(text: str, ports: Sequence[int]) -> str:
    for port in ports:
        text = text.replace(str(port), "PORT")
    return text


def request(method: str, target: str, body: bytes = b"", *, head: bytes = b"") -> bytes:
    """A raw HTTP/1.1 request that asks the server to close after answering."""
    length = b"Content-Length: %d\r\n" % len(body) if body or method in ("POST", "PUT") else b""
    return (
        f"{method} {target} HTTP/1.1\r\nHost: x\r\n".encode()
        + head
        + length
        + b"Connection: close\r\n\r\n"
        + body
    )


# -- recording ------------------------------------------------------------------


def main() -> None:
    """Print the real binaries' replies to every case as the expected-data module."""
    from tests.compat.differential_cases import CASES, run_case

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        servers = {}
        for program in ("nsqd", "nsqlookupd"):
            binary = real_binary(program)
            if "--nsqbox" in sys.argv:  # nsqbox's replies instead, to compare by eye
                argv = nsqbox_argv(program)
            elif binary is None:
                raise SystemExit(f"no real {program} in {NSQ_BIN}")
            else:
                argv = [str(binary)]
            servers[program] = stack.enter_context(running(argv, program, Path(tmp) / program))
        print("# ruff: noqa: E501")
        print('"""nsqd v1.3.0\'s replies to the differential cases (generated, see')
        print('tests/compat/differential.py: python -m tests.compat.differential)."""')
        print()
        print("from __future__ import annotations")
        print()
        print("EXPECTED: dict[str, tuple[str, ...]] = {")
        for case in CASES:
            print(f"    {case.id!r}: {run_case(case, servers)!r},")
        print("}")


if __name__ == "__main__":
    main()
