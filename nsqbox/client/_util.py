"""Small trio helpers shared by the producer and the consumer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["open_service_nursery"]


@asynccontextmanager
async def open_service_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery for an ``open_*`` context manager's background tasks.

    trio wraps everything leaving a nursery in an ExceptionGroup; the user's
    ``async with open_consumer(...)`` block runs inside this one, so a lone
    exception (theirs, or a single task's) is re-raised as itself, as
    trio-websocket does, instead of surprising them with a group.
    """
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
