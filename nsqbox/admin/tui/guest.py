"""``nsqbox up --tui``: the box's trio services as a guest of the TUI's asyncio loop.

Textual owns the thread and runs asyncio; trio runs inside it through
``trio.lowlevel.start_guest_run`` (:class:`TrioGuest`): trio's tasks run as asyncio callbacks on
the same thread, and only trio's I/O wait happens in a helper thread. :class:`BoxApp` starts
:func:`~nsqbox.box.serve_box` that way when it mounts, points the views at the box's lookupd
once everything listens, and — the trap — cancels the guest run and waits for its done callback
before it finishes unmounting. Leaving the guest run alive would leave trio's run state behind
on the thread, and a later ``trio.run()`` there would fail with "run() from inside a run()".

While the app runs, the servers' log lines (at ``--log-level``) go to a buffer shown by the Logs
view (``L``) instead of stderr, where they would tear the screen; the last ones are printed if
the box fails.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO, cast

import outcome
import trio
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, RichLog

from ...logs import LEVELS, ROOT_LOGGER, NSQFormatter, parse_level
from .app import AdminApp
from .backend import open_model_backend

if TYPE_CHECKING:
    from ...box import BoxAddresses, BoxOptions

__all__ = ["BoxApp", "LogBuffer", "TrioGuest", "run_box_tui"]


class TrioGuest:
    """One trio function run as a guest of the running asyncio loop; cancel and await it."""

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._done: asyncio.Future[outcome.Outcome[Any]] | None = None
        self._cancelled = False
        #: Called (on the asyncio thread) with the run's outcome when it ends.
        self.on_done: Callable[[outcome.Outcome[Any]], None] | None = None

    def start(self, async_fn: Callable[[], Awaitable[object]]) -> None:
        """Start ``async_fn()`` under trio, on the running asyncio loop."""
        if self._done is not None:
            raise RuntimeError("a TrioGuest runs once")
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        trio.lowlevel.start_guest_run(
            self._main,
            async_fn,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=self._finished,
            # asyncio owns the signal wakeup fd (it installs signal handlers through it)
            host_uses_signal_set_wakeup_fd=True,
        )

    async def _main(self, async_fn: Callable[[], Awaitable[object]]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            if self._cancelled:
                scope.cancel()
            await async_fn()

    def _finished(self, result: outcome.Outcome[Any]) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(result)
        if self.on_done is not None:
            self.on_done(result)

    @property
    def running(self) -> bool:
        """Whether the guest run started and has not ended."""
        return self._done is not None and not self._done.done()

    def cancel(self) -> None:
        """Ask the guest run to stop (its function sees trio.Cancelled)."""
        self._cancelled = True
        if self._token is not None and self._scope is not None:
            scope = self._scope
            with suppress(trio.RunFinishedError):
                self._token.run_sync_soon(scope.cancel)

    async def stop(self) -> outcome.Outcome[Any] | None:
        """Cancel, and wait until the guest run has completely finished; its outcome."""
        if self._done is None:
            return None
        self.cancel()
        return await asyncio.shield(self._done)


class LogBuffer(io.TextIOBase):
    """A text stream keeping the last ``limit`` lines written to it (the servers' log)."""

    def __init__(self, limit: int = 5000) -> None:
        super().__init__()
        self.lines: deque[str] = deque(maxlen=limit)
        #: How many lines were ever written (a view follows new lines with it).
        self.written = 0

    def writable(self) -> bool:
        """It is."""
        return True

    def write(self, text: str) -> int:
        """Keep each complete line."""
        for line in text.splitlines():
            if line:
                self.lines.append(line)
                self.written += 1
        return len(text)

    def since(self, seen: int) -> list[str]:
        """The lines written after the first ``seen`` (as many as are still kept)."""
        new = min(self.written - seen, len(self.lines))
        return list(self.lines)[len(self.lines) - new :] if new > 0 else []


class LogScreen(Screen[None]):
    """The box's log, following new lines."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]
    DEFAULT_CSS = "LogScreen RichLog { height: 1fr; }"

    def __init__(self, buffer: LogBuffer) -> None:
        super().__init__()
        self.buffer = buffer
        self._seen = 0

    def compose(self) -> ComposeResult:
        """Header, log, footer."""
        yield Header(icon="◆")
        yield RichLog(max_lines=5000, wrap=True, markup=False, highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        """Show what is there and follow."""
        self.sub_title = "logs"
        self._follow()
        self.set_interval(0.5, self._follow)

    def _follow(self) -> None:
        log = self.query_one(RichLog)
        for line in self.buffer.since(self._seen):
            log.write(line)
        self._seen = self.buffer.written


class BoxApp(AdminApp):
    """The admin TUI with the whole box (lookupd, nsqds, admin) running inside it."""

    BINDINGS = [Binding("L", "logs", "Logs")]

    def __init__(
        self, options: BoxOptions, *, logs: LogBuffer | None = None, **kwargs: Any
    ) -> None:
        super().__init__(None, **kwargs)
        self.options = options
        self.logs = logs or LogBuffer()
        self._log_handler = logging.StreamHandler(cast(TextIO, self.logs))
        self._log_level = logging.NOTSET
        self.guest = TrioGuest()
        self.guest.on_done = self._box_done
        #: Where the box listens, once it does.
        self.addresses: BoxAddresses | None = None
        #: Why the box stopped on its own (it failed to start, or crashed), if it did.
        self.failure: BaseException | None = None

    def on_mount(self) -> None:
        """Send the servers' log to the buffer, start the box; the views connect once it listens."""
        from ...box import LOG_PREFIXES

        nsqd = self.options.nsqd
        self._log_handler.setFormatter(NSQFormatter(nsqd.log_prefix, LOG_PREFIXES))
        logger = logging.getLogger(ROOT_LOGGER)
        self._log_level = logger.level
        logger.addHandler(self._log_handler)
        logger.setLevel(LEVELS[parse_level(nsqd.log_level)])
        self.guest.start(self._serve)

    async def on_unmount(self) -> None:
        """Stop the box and wait until trio has completely finished; restore logging."""
        try:
            await self.guest.stop()
        finally:
            logger = logging.getLogger(ROOT_LOGGER)
            logger.removeHandler(self._log_handler)
            logger.setLevel(self._log_level)

    async def _serve(self) -> None:
        from ...box import serve_box

        async with trio.open_nursery() as nursery:
            addresses: BoxAddresses = await nursery.start(serve_box, self.options)
            self._box_started(addresses)

    def _box_started(self, addresses: BoxAddresses) -> None:
        self.addresses = addresses
        lookupd = dialable(addresses.ready()["lookupd_http_address"])
        nsqd = self.options.nsqd
        self.connect(
            partial(
                open_model_backend,
                lookupd_http_addresses=[lookupd],
                connect_timeout=nsqd.http_client_connect_timeout,
                request_timeout=nsqd.http_client_request_timeout,
            )
        )
        lines = addresses.banner("").splitlines()
        banner = "\n".join(line.lstrip(": ") for line in lines if "Ctrl-C" not in line)
        self.notify(f"{banner}\nq quits (and stops the box)", title="nsqbox up", timeout=8)

    def _box_done(self, result: outcome.Outcome[Any]) -> None:
        if isinstance(result, outcome.Error) and not isinstance(result.error, trio.Cancelled):
            error: BaseException = result.error
            while isinstance(error, BaseExceptionGroup):
                error = error.exceptions[0]
            self.failure = error
            self.exit(return_code=1)

    def action_logs(self) -> None:
        """Show the box's log."""
        self.push_screen(LogScreen(self.logs))


def dialable(address: str) -> str:
    """``host:port`` a local client can dial: a wildcard host becomes loopback."""
    host, _, port = address.rpartition(":")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"{host}:{port}"


def run_box_tui(options: BoxOptions, *, read_only: bool = False, interval: float = 2.0) -> int:
    """``nsqbox up --tui``: run the box inside the TUI until the TUI quits; the exit status."""
    from ...cli import fatal

    app = BoxApp(options, read_only=read_only, interval=interval)
    app.run()
    if app.failure is not None:
        sys.stderr.writelines(line + "\n" for line in list(app.logs.lines)[-20:])
        if app.addresses is None:
            return fatal(f"failed to start nsqbox - {app.failure}")
        return fatal(f"nsqbox stopped - {app.failure}")
    return app.return_code or 0
