"""Trio as a guest of the running asyncio loop (:class:`TrioGuest`): how a Textual app hosts trio.

Textual owns the thread and runs asyncio; trio runs inside it through
``trio.lowlevel.start_guest_run``: trio's tasks run as asyncio callbacks on the same thread, and
only trio's I/O wait happens in a helper thread. The trap: a guest run left alive when the app
exits leaves trio's run state behind on the thread, and a later ``trio.run()`` there fails with
"run() from inside a run()" — so an app cancels the guest run and awaits :meth:`TrioGuest.stop`
before it finishes unmounting. (``nsqbox up --tui``, :mod:`nsqbox.run.up_tui`, runs the box so.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import outcome
import trio

__all__ = ["TrioGuest"]


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
