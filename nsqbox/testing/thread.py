"""Run an nsqd on its own trio loop in a background thread.

Third-party clients (pynsq on tornado, gnsq on gevent, ansq on asyncio) run
their own event loops; they need a server that lives outside of them::

    with ThreadedNSQD() as box:
        writer = nsq.Writer([box.tcp_address])

(The pytest plugin's boxes add nsqlookupd, clusters and a per-test handle; see
:mod:`nsqbox.testing.plugin`.)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import TypeVar

from ..nsqd.domain.nsqd import NSQD
from ..nsqd.domain.options import NSQDOptions
from ..nsqd.server import NSQDAddresses, serve_nsqd
from .portal import LoopThread

T = TypeVar("T")

__all__ = ["ThreadedNSQD"]


class ThreadedNSQD:
    """An nsqd (127.0.0.1, port 0 unless told otherwise) served from a daemon thread."""

    def __init__(self, options: NSQDOptions | None = None, *, start_timeout: float = 10) -> None:
        base = options or NSQDOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
        self.options = replace(base)
        self._tmpdir: str | None = None
        if not self.options.data_path:
            # never spill into the caller's working directory
            self._tmpdir = self.options.data_path = tempfile.mkdtemp(prefix="nsqbox-")
        self._start_timeout = start_timeout
        self._loop: LoopThread[NSQDAddresses] = LoopThread("nsqbox-nsqd")
        self._addresses: NSQDAddresses | None = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> ThreadedNSQD:
        """Start the thread and wait until the server listens."""
        try:
            self._addresses = self._loop.start(
                serve_nsqd, self.options, timeout=self._start_timeout
            )
        except TimeoutError:
            self.stop()
            raise TimeoutError("nsqd did not start") from None
        except Exception as exc:
            self.stop()
            raise RuntimeError("nsqd failed to start") from exc
        return self

    def stop(self) -> None:
        """Shut the server down cleanly and join the thread."""
        self._loop.stop()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> ThreadedNSQD:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses and access --------------------------------------------------
    @property
    def addresses(self) -> NSQDAddresses:
        """The bound addresses (after start)."""
        assert self._addresses is not None, "not started"
        return self._addresses

    @property
    def tcp_address(self) -> str:
        """``127.0.0.1:PORT`` of the TCP protocol."""
        host, port = self.addresses.tcp
        return f"{host}:{port}"

    @property
    def http_address(self) -> str:
        """``127.0.0.1:PORT`` of the HTTP API."""
        assert self.addresses.http is not None, "HTTP disabled"
        host, port = self.addresses.http
        return f"{host}:{port}"

    def call(self, fn: Callable[[NSQD], T]) -> T:
        """Run ``fn(nsqd)`` on the server's own thread (safe access to its state).

        Works from any other thread, including one that runs trio or asyncio.
        """
        nsqd = self.addresses.nsqd
        return self._loop.call(lambda: fn(nsqd))

    def __repr__(self) -> str:
        return f"ThreadedNSQD({self.tcp_address if self._addresses else 'not started'})"
