"""A trio loop in a daemon thread, and blocking calls into it from any other thread.

:class:`LoopThread` runs one service (an async function taking ``task_status``) on its
own ``trio.run``. Other threads reach the service's objects with :meth:`LoopThread.call`
(a sync function, run between two trio tasks) and :meth:`LoopThread.call_async`.

Unlike ``trio.from_thread.run``, these calls also work from a thread that is itself
running trio or asyncio (a pytest-trio test, an ``asyncio.run``): they block that thread
only for the call itself, which is microseconds for a state read.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

T = TypeVar("T")
S = TypeVar("S")

__all__ = ["LoopThread"]

#: Upper bound for one call into the loop (a call that takes longer means a hung server).
CALL_TIMEOUT = 60.0


class _Outcome(Generic[T]):
    __slots__ = ("error", "value")

    def __init__(self, value: T | None = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    def unwrap(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # set when error is None


class LoopThread(Generic[S]):
    """Serve ``service`` on a trio loop in a daemon thread until :meth:`stop`.

    ``service(*args, task_status=...)`` reports a value through ``task_status.started``;
    :meth:`start` returns it.
    """

    def __init__(self, name: str = "nsqbox") -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._started: queue.SimpleQueue[_Outcome[S]] = queue.SimpleQueue()
        self._error: BaseException | None = None

    def start(
        self, service: Callable[..., Awaitable[object]], *args: object, timeout: float = 10.0
    ) -> S:
        """Start the thread and the service; the service's started value."""
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(
            target=self._run, args=(service, args), name=self.name, daemon=True
        )
        self._thread.start()
        try:
            outcome = self._started.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise TimeoutError(f"{self.name}: not started after {timeout:g}s") from None
        if outcome.error is not None:
            self.stop()
        return outcome.unwrap()

    def _run(self, service: Callable[..., Awaitable[object]], args: tuple[object, ...]) -> None:
        try:
            trio.run(self._main, service, args)
        except BaseException as exc:  # reported to start(), or kept for stop()
            self._error = exc
            self._started.put(_Outcome(error=exc))

    async def _main(
        self, service: Callable[..., Awaitable[object]], args: tuple[object, ...]
    ) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                value = await nursery.start(service, *args)
            except BaseException as exc:  # the service's own error, not the nursery's group
                self._started.put(_Outcome(error=exc))
                raise
            self._started.put(_Outcome(value))

    @property
    def running(self) -> bool:
        """True while the loop runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel everything on the loop and join the thread (idempotent)."""
        thread, self._thread = self._thread, None
        nursery, token = self._nursery, self._token
        if nursery is not None and token is not None:
            try:
                token.run_sync_soon(nursery.cancel_scope.cancel)
            except trio.RunFinishedError:
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # -- calls from other threads -----------------------------------------------
    def _submit(self, callback: Callable[[], None]) -> None:
        if self._token is None:
            raise RuntimeError(f"{self.name} is not running")
        try:
            self._token.run_sync_soon(callback)
        except trio.RunFinishedError:
            raise RuntimeError(f"{self.name} has stopped") from self._error

    def _in_loop(self) -> bool:
        return self._thread is threading.current_thread()

    def call(self, fn: Callable[[], T], *, timeout: float = CALL_TIMEOUT) -> T:
        """Run ``fn()`` on the loop's thread (between tasks) and return its result."""
        if self._in_loop():
            return fn()
        results: queue.SimpleQueue[_Outcome[T]] = queue.SimpleQueue()

        def callback() -> None:
            try:
                results.put(_Outcome(fn()))
            except BaseException as exc:  # handed to the caller
                results.put(_Outcome(error=exc))

        self._submit(callback)
        return self._wait(results, timeout)

    def call_async(self, fn: Callable[[], Awaitable[T]], *, timeout: float = CALL_TIMEOUT) -> T:
        """Run ``await fn()`` as a task on the loop and return its result."""
        if self._in_loop():
            raise RuntimeError("call_async() would deadlock on the loop's own thread")
        results: queue.SimpleQueue[_Outcome[T]] = queue.SimpleQueue()

        async def task() -> None:
            try:
                results.put(_Outcome(await fn()))
            except trio.Cancelled:
                results.put(_Outcome(error=RuntimeError(f"{self.name} stopped during the call")))
                raise
            except Exception as exc:  # handed to the caller
                results.put(_Outcome(error=exc))

        def callback() -> None:
            if self._nursery is None:
                results.put(_Outcome(error=RuntimeError(f"{self.name} is not running")))
            else:
                self._nursery.start_soon(task)

        self._submit(callback)
        return self._wait(results, timeout)

    def _wait(self, results: queue.SimpleQueue[_Outcome[T]], timeout: float) -> T:
        try:
            outcome = results.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.name}: no answer after {timeout:g}s") from None
        return outcome.unwrap()

    def __repr__(self) -> str:
        return f"LoopThread({self.name!r}, running={self.running})"
