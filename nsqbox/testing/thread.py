"""Run an nsqd on its own trio loop in a background thread.

Third-party clients (pynsq on tornado, gnsq on gevent, ansq on asyncio) run
their own event loops; they need a server that lives outside of them::

    with ThreadedNSQD() as box:
        writer = nsq.Writer([box.tcp_address])
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import TypeVar

import trio

from ..nsqd.nsqd import NSQD
from ..nsqd.options import NSQDOptions
from ..nsqd.server import NSQDAddresses, serve_nsqd

T = TypeVar("T")


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
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._addresses: NSQDAddresses | None = None
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> ThreadedNSQD:
        """Start the thread and wait until the server listens."""
        self._thread = threading.Thread(target=self._run, name="nsqbox-nsqd", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._start_timeout):
            raise TimeoutError("nsqd did not start")
        if self._error is not None:
            raise RuntimeError("nsqd failed to start") from self._error
        return self

    def stop(self) -> None:
        """Shut the server down cleanly and join the thread."""
        if self._token is not None and self._cancel is not None:
            cancel = self._cancel
            try:
                self._token.run_sync_soon(cancel.cancel)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
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

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to start() or kept for inspection
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._cancel = scope
            async with trio.open_nursery() as nursery:
                self._addresses = await nursery.start(serve_nsqd, self.options)
                self._ready.set()

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
        """Run ``fn(nsqd)`` on the server's own thread (safe access to its state)."""
        nsqd = self.addresses.nsqd

        async def run() -> T:
            return fn(nsqd)

        assert self._token is not None
        return trio.from_thread.run(run, trio_token=self._token)

    def __repr__(self) -> str:
        return f"ThreadedNSQD({self.tcp_address if self._addresses else 'not started'})"
