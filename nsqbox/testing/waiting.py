"""Waiting without blocking the wrong loop: polls, worker threads, and a guard.

A blocking wait on a thread that runs an event loop would also stop the app under
test (on that loop), so the blocking helpers refuse to run there and name their
``await`` twin instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from .state import WaitTimeout

T = TypeVar("T")
#: What a blocking wait calls between polls (``time.sleep``, or ``gevent.sleep``).
Sleep = Callable[[float], object]

__all__ = ["Sleep", "in_worker_thread", "poll", "preview", "refuse_in_async"]


def _running_async_library() -> str | None:
    try:
        import sniffio
    except ImportError:  # pragma: no cover - trio depends on sniffio
        return None
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


def refuse_in_async(method: str, twin: str) -> None:
    """Raise when a blocking wait is called on a thread that runs an event loop.

    Blocking there would also stop the app under test (on the same loop) and
    turn a passing test into a timeout.
    """

    __tracebackhide__ = True  # failures point at the test's line
    library = _running_async_library()
    if library is not None:
        raise RuntimeError(
            f"nsqbox: {method}() blocks, and this thread runs {library}; "
            f"use 'await {twin}(...)' (or pass sleep= to cooperate with your loop)"
        )


async def in_worker_thread(fn: Callable[[], T]) -> T:
    """Run blocking ``fn`` in a worker thread of the running trio or asyncio loop."""

    __tracebackhide__ = True  # failures point at the test's line
    library = _running_async_library()
    if library == "trio":
        import trio

        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
    if library == "asyncio":
        import asyncio

        return await asyncio.to_thread(fn)
    raise RuntimeError(f"nsqbox's async methods need trio or asyncio (running: {library})")


def poll(
    check: Callable[[], tuple[bool, T]],
    timeout: float,
    message: Callable[[T], str],
    sleep: Sleep | None = None,
) -> T:
    """Call ``check`` until it says done; WaitTimeout(``message(last value)``) at timeout."""

    __tracebackhide__ = True  # failures point at the test's line
    deadline = time.monotonic() + timeout
    delay = 0.0005
    nap = sleep or time.sleep
    while True:
        done, value = check()
        if done:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(message(value))
        nap(min(delay, remaining))
        delay = min(delay * 2, 0.02)


def preview(bodies: list[bytes], limit: int = 5) -> str:
    """The first few bodies, shortened, for an error message."""
    shown = ", ".join(repr(b[:60]) for b in bodies[:limit])
    more = f", ... ({len(bodies) - limit} more)" if len(bodies) > limit else ""
    return f"[{shown}{more}]"
