"""Waiting for server state from inside an asyncio loop (pynsq on tornado, ansq), so the
loop, and the client on it, keeps running while the test waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

#: The most a wait takes before the test fails (only reached when something is broken).
TIMEOUT = 20.0


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` while the loop keeps running; fail after ``TIMEOUT`` seconds."""
    try:
        async with asyncio.timeout(TIMEOUT):
            while not condition():  # noqa: ASYNC110 (server state has no event to await)
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"timed out after {TIMEOUT}s waiting for {what}")
