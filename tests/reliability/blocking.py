"""Blocking socket helpers for synchronous (hypothesis) tests against threaded servers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

#: Longest any single socket operation may take before the server counts as hung.
IO_TIMEOUT = 15.0


class ServerHung(AssertionError):
    """The server neither answered nor closed the connection in time."""


def exchange(address: tuple[str, int], data: bytes, *, timeout: float = IO_TIMEOUT) -> bytes:
    """Send ``data``, close our side, and return everything the server sends until it closes.

    The server may hang up early (a fatal error): what it sent is still returned.
    """
    with socket.create_connection(address, timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # EPIPE, ECONNRESET, ENOTCONN: it hung up on us already
            pass
        received = bytearray()
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise ServerHung(
                    f"no answer and no close within {timeout}s after {len(data)} bytes "
                    f"(got {bytes(received[:200])!r})"
                ) from None
            if not chunk:
                break
            received += chunk
        return bytes(received)


def wait_for(predicate: Callable[[], object], *, timeout: float = IO_TIMEOUT) -> None:
    """Poll ``predicate`` until it holds; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        pause.wait(0.005)
