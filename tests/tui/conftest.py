"""Fixtures for the TUI tests: a real cluster in a thread, and helpers to drive the app.

Textual runs on asyncio while pytest-trio's trio mode makes every ``async def`` test a trio
test, so the TUI tests are plain (sync) tests that call :func:`run_app`, which runs the app
under ``asyncio.run`` with ``App.run_test()`` and hands the pilot to an async body. Every wait
is on a condition, bounded by :data:`TIMEOUT`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC
from functools import partial
from typing import Any, TypeVar

import httpx
import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.backend import open_model_backend
from nsqbox.admin.tui.widgets import StatsTable
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.handle import NSQBox

#: The bound on every wait (reached only when something is broken).
TIMEOUT = 10.0
#: Seconds between the app's refreshes in the tests against real servers.
INTERVAL = 0.5
#: The terminal size of every test (and snapshot).
SIZE = (130, 34)

A = TypeVar("A", bound=App[Any])


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadBox]:
    """Two nsqds (reporting p99 end-to-end latency) and a lookupd, in a thread."""
    spec = ClusterSpec(nsqd=2, nsqd_options={"e2e_processing_latency_percentiles": [0.99]})
    box = ThreadBox(spec, str(tmp_path_factory.mktemp("tui-cluster")))
    yield box
    box.stop()


@pytest.fixture
def nsq(cluster: ThreadBox) -> Iterator[NSQBox]:
    """A handle on the cluster; every topic is deleted after the test."""
    with NSQBox(cluster, timeout=TIMEOUT) as handle:
        yield handle


def make_app(nsq: NSQBox, **kwargs: Any) -> AdminApp:
    """An app reading ``nsq``'s cluster through its lookupd, refreshing every INTERVAL."""
    factory = partial(open_model_backend, lookupd_http_addresses=[str(nsq.lookupd_http_address)])
    kwargs.setdefault("interval", INTERVAL)
    kwargs.setdefault("tz", UTC)
    return AdminApp(factory, **kwargs)


def run_app(app: A, body: Callable[[Pilot[Any], A], Awaitable[None]]) -> None:
    """Run ``app`` headless under asyncio and ``await body(pilot, app)`` in it."""

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await body(pilot, app)

    asyncio.run(main())


async def wait_until(
    pilot: Pilot[Any],
    predicate: Callable[[], object],
    what: str,
    seen: Callable[[], object] | None = None,
) -> None:
    """Let the app run until ``predicate()`` is true; AssertionError after TIMEOUT.

    ``seen()`` says what there was instead, in the error.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not predicate():
        if loop.time() > deadline:
            detail = f"; saw {seen()!r}" if seen is not None else ""
            raise AssertionError(f"timed out waiting for {what}{detail}")
        await pilot.pause(0.02)


async def on_screen(pilot: Pilot[Any], app: App[Any], kind: type[Screen[Any]]) -> None:
    """Wait until ``app`` shows a ``kind`` screen: a key's message may open it a turn or more
    after ``pilot.press`` returned (the screen posts, the app pushes)."""
    await wait_until(pilot, lambda: isinstance(app.screen, kind), kind.__name__, lambda: app.screen)


async def until_true(pilot: Pilot[Any], check: Callable[[], Awaitable[bool]], what: str) -> None:
    """:func:`wait_until` for an async check (an HTTP request, say)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


class HTTP:
    """The cluster's HTTP APIs, as an operator's tools read them."""

    def __init__(self, nsq: NSQBox) -> None:
        self.nsq = nsq

    async def get(self, address: str, path: str, **params: str) -> Any:
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            response = await client.get(f"http://{address}{path}", params=params)
        response.raise_for_status()
        return response.json()

    async def post(self, node: int, path: str, **params: str) -> None:
        """POST to nsqd ``node`` (``/channel/create``...)."""
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            address = self.nsq.nsqd_http_addresses[node]
            response = await client.post(f"http://{address}{path}", params=params)
        response.raise_for_status()

    async def publish(self, node: int, topic: str, body: bytes) -> None:
        """``/pub`` on nsqd ``node``."""
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            address = self.nsq.nsqd_http_addresses[node]
            url = f"http://{address}/pub"
            response = await client.post(url, params={"topic": topic}, content=body)
        response.raise_for_status()

    async def topics(self, node: int) -> dict[str, dict[str, Any]]:
        """``{topic: row}`` of nsqd ``node``'s /stats, channels keyed by name."""
        doc = await self.get(self.nsq.nsqd_http_addresses[node], "/stats", format="json")
        out = {}
        for topic in doc["topics"] or []:
            topic["channels"] = {c["channel_name"]: c for c in topic["channels"] or []}
            out[topic["topic_name"]] = topic
        return out

    async def lookupd(self, path: str, **params: str) -> Any:
        return await self.get(str(self.nsq.lookupd_http_address), path, **params)


async def open_topic(pilot: Pilot[Any], app: AdminApp, topic: str) -> StatsTable:
    """Select ``topic`` in the Topics view and return its table."""
    table = app.screen.query_one("#topics", StatsTable)
    await wait_until(pilot, lambda: topic in table.keys, f"topic {topic}", lambda: table.keys)
    table.select(topic)
    await pilot.pause()
    return table
