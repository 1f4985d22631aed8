"""Capture: the messages published to a topic while a ``with`` block runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType

from .state import CapturedMessage, CaptureSource, WaitTimeout
from .waiting import Sleep, in_worker_thread, poll, preview, refuse_in_async

__all__ = ["Capture"]


class Capture:
    """The messages published to a topic while a ``with`` block ran.

    Inside the block :attr:`messages` is what arrived so far; after it, everything.
    ``len(capture)``, iteration and :attr:`bodies` give the bodies in publish order.
    """

    def __init__(
        self,
        topic: str,
        open_source: Callable[[], CaptureSource],
        timeout: float,
        *,
        poll_in_loop: Callable[[Callable[[], bool], float], Awaitable[bool]] | None = None,
    ) -> None:
        self.topic = topic
        self.timeout = timeout
        self._open_source = open_source
        self._source: CaptureSource | None = None
        self._final: list[CapturedMessage] | None = None
        self._lost = False
        self._poll_in_loop = poll_in_loop

    # -- the block -----------------------------------------------------------------
    def __enter__(self) -> Capture:
        if self._source is not None:
            raise RuntimeError("a Capture can be entered once")
        self._source = self._open_source()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """End the capture (the ``with`` block does this)."""
        if self._source is not None and self._final is None:
            self._final = self._source.close()
            self._lost = self._source.lost

    @property
    def lost(self) -> bool:
        """Whether messages published during the capture may be missing from it: a
        crash of a node took records the capture had not read yet (a tap survives
        restarts and crashes, so this stays False unless its node could not keep it)."""
        if self._final is not None or self._source is None:
            return self._lost
        return self._source.lost

    @property
    def mode(self) -> str:
        """``"tap"`` (in-process: inside nsqd) or ``"channel"`` (an ephemeral channel)."""
        if self._source is None:
            raise RuntimeError("the capture has not started (use it in a with block)")
        return self._source.mode

    # -- results -------------------------------------------------------------------
    @property
    def messages(self) -> list[CapturedMessage]:
        """Every captured message (ids, timestamps, the nsqd and DPUB delay)."""
        if self._final is not None:
            return list(self._final)
        if self._source is None:
            return []
        return self._source.messages()

    @property
    def bodies(self) -> list[bytes]:
        """The captured bodies, in publish order."""
        return [m.body for m in self.messages]

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.bodies)

    def __repr__(self) -> str:
        state = "done" if self._final is not None else "open" if self._source else "new"
        lost = ", lost some" if self.lost else ""
        return f"Capture({self.topic!r}, {state}, {len(self)} message(s){lost})"

    # -- waiting inside the block -------------------------------------------------
    def _check(self, count: int) -> tuple[bool, list[bytes]]:
        bodies = self.bodies
        return len(bodies) >= count, bodies

    def _message(self, count: int, limit: float) -> Callable[[list[bytes]], str]:
        return lambda bodies: (
            f"nsqbox: timed out after {limit:g}s waiting for {count} message(s) published "
            f"to topic {self.topic!r}; captured {len(bodies)}: {preview(bodies)}"
        )

    def wait_for(
        self, n: int, *, timeout: float | None = None, sleep: Sleep | None = None
    ) -> list[bytes]:
        """Wait until at least ``n`` messages were captured; the bodies so far."""

        __tracebackhide__ = True  # failures point at the test's line
        if sleep is None:
            refuse_in_async("Capture.wait_for", "capture.await_for")
        limit = self.timeout if timeout is None else timeout
        return poll(lambda: self._check(n), limit, self._message(n, limit), sleep)

    async def await_for(
        self,
        n: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see NSQBox.await_for)
    ) -> list[bytes]:
        """:meth:`wait_for` from async code."""

        __tracebackhide__ = True  # failures point at the test's line
        limit = self.timeout if timeout is None else timeout
        if self._poll_in_loop is not None:  # a trio-native box: the tap lives on this loop
            if not await self._poll_in_loop(lambda: self._check(n)[0], limit):
                raise WaitTimeout(self._message(n, limit)(self.bodies))
            return self.bodies
        return await in_worker_thread(
            lambda: poll(lambda: self._check(n), limit, self._message(n, limit))
        )
