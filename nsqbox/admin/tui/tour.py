"""A tour of the views on the demo cluster, as SVG screenshots (for docs and snapshot tests).

:func:`render` runs the app headless on :mod:`.demo`'s fixed cluster, in UTC, walks to one view
the way a person would (keys, selections) and returns ``App.export_screenshot()``: the same
picture on every machine, so the snapshot tests compare it with a stored file and
``scripts/screenshots.py`` writes it under ``screenshots/``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from functools import partial
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input

from ...snapshot.confined import default_save_name
from .app import AdminApp
from .base import ClusterScreen
from .demo import DEMO_TIME, DemoBackend, open_demo_backend
from .faults import FaultsScreen
from .journey import JourneyScreen
from .messages import MessagesScreen
from .snapshot_save import SaveSnapshotScreen
from .tail import TailScreen, TailSource
from .troubles import TroublesScreen
from .widgets import StatsTable

__all__ = ["SIZE", "VIEWS", "render", "render_all"]

#: The terminal size of every screenshot.
SIZE = (130, 34)

#: Every view the tour shows, with what it is.
VIEWS: dict[str, str] = {
    "topics": "Topics: every topic, summed over its nodes",
    "topic": "Topic: rate plot, per-node rows and channels",
    "channel": "Channel: per-node rows and clients",
    "nodes": "Nodes: every nsqd, with tombstones and errors",
    "node": "Node: one nsqd's topics",
    "faults": "Faults: the faults in force on every node, and the nodes",
    "tail": "Tail: live messages through an ephemeral channel",
    "messages": "Messages: what a channel holds, listed without taking anything",
    "message": "One message opened: details and its body as pretty JSON",
    "journey": "Journey: what happened to one message, on every node, in broker time",
    "troubles": "Troubles: a channel's messages in trouble and the ones its clients gave up on",
    "confirm": "A destructive action asks first",
    "help": "Help: the keys of the view",
    "save": "Save a snapshot: the box saves every nsqd's state in its directory",
}

_TAIL = (
    (b'{"order": 1041, "total": 99.5}', 1),
    (b'{"order": 1042, "total": 12.0}', 1),
    (b'{"order": 1039, "total": 7.25}', 3),
    (b'{"order": 1043, "total": 310.0, "note": "gift wrap"}', 1),
)


async def _settle(pilot: Pilot[Any], app: AdminApp) -> None:
    """Wait until the view shows the (only) snapshot and nothing is left to draw."""
    for _ in range(500):  # a bound, not a timing: each pass yields to the app
        screen = app.screen
        drawn = not isinstance(screen, ClusterScreen) or screen.drawn is app.snapshot
        if app.snapshot is not None and drawn:
            break
        await pilot.pause(0.01)
    else:
        raise TimeoutError("the demo snapshot was not drawn")
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def _select(app: AdminApp, selector: str, key: str) -> None:
    if not app.screen.query_one(selector, StatsTable).select(key):
        raise LookupError(f"no row {key!r} in {selector}")


async def _walk(view: str, pilot: Pilot[Any], app: AdminApp) -> None:
    if view not in VIEWS:
        raise ValueError(f"no view {view!r} (views: {', '.join(VIEWS)})")
    await _settle(pilot, app)
    channel = view in ("channel", "messages", "message", "journey", "troubles")
    if channel or view in ("topic", "tail", "confirm"):
        _select(app, "#topics", "orders")
    if channel or view == "topic":
        await pilot.press("enter")
        await _settle(pilot, app)
    if channel:
        _select(app, "#channels", "billing")
        await pilot.press("enter")
    if view in ("messages", "message", "journey"):
        await _messages(pilot, app, open_one=view == "message")
    if view == "journey":
        _select(app, "#messages", "3")
        await pilot.press("j")
        await _loaded(pilot, app, JourneyScreen)
    if view == "troubles":
        await _settle(pilot, app)
        await pilot.press("exclamation_mark")
        await _loaded(pilot, app, TroublesScreen)
        await pilot.press("tab")  # the given-up table: republishing is offered
    if view in ("nodes", "node"):
        await pilot.press("n")
        await _settle(pilot, app)
    if view == "node":
        _select(app, "#nodes", "10.0.0.2:4151")
        await pilot.press("enter")
    if view == "faults":
        await _faults(pilot, app)
    if view == "tail":
        await _tail(pilot, app)
    if view == "confirm":
        await pilot.press("ctrl+d")
    if view == "help":
        await pilot.press("question_mark")
    if view == "save":
        await _save(pilot, app)
    await _settle(pilot, app)


async def _faults(pilot: Pilot[Any], app: AdminApp) -> None:
    await pilot.press("f")
    await _settle(pilot, app)
    for _ in range(500):  # a bound, not a timing: each pass yields to the app
        if isinstance(app.screen, FaultsScreen) and app.screen.loads:
            return
        await pilot.pause(0.01)
    raise TimeoutError("the demo faults were not drawn")


async def _loaded(
    pilot: Pilot[Any], app: AdminApp, kind: type[JourneyScreen] | type[TroublesScreen]
) -> None:
    for _ in range(500):  # a bound, not a timing: each pass yields to the app
        screen = app.screen
        if isinstance(screen, kind) and screen.loads:
            return
        await pilot.pause(0.01)
    raise TimeoutError(f"the demo {kind.__name__} was not drawn")


async def _messages(pilot: Pilot[Any], app: AdminApp, *, open_one: bool) -> None:
    await _settle(pilot, app)
    await pilot.press("m")
    await _settle(pilot, app)
    screen = app.screen
    for _ in range(500):  # a bound, not a timing: each pass yields to the app
        if isinstance(screen, MessagesScreen) and screen.loads:
            break
        await pilot.pause(0.01)
    else:
        raise TimeoutError("the demo messages were not listed")
    if open_one:
        _select(app, "#messages", "1")
        await pilot.press("enter")


async def _save(pilot: Pilot[Any], app: AdminApp) -> None:
    await pilot.press("ctrl+s")
    for _ in range(500):  # a bound, not a timing: each pass yields to the app
        if isinstance(app.screen, SaveSnapshotScreen):
            break
        await pilot.pause(0.01)
    else:
        raise TimeoutError("the save form did not open")
    # the name proposed is the time now: the demo's time instead, for the same picture
    name = default_save_name(datetime.fromtimestamp(DEMO_TIME, UTC))
    field = app.screen.query_one("#name", Input)
    field.cursor_blink = False  # a blinking cursor would be in one picture and not the next
    field.value = name


async def _tail(pilot: Pilot[Any], app: AdminApp) -> None:
    tail = TailScreen("orders", [TailSource("10.0.0.1:4151", "10.0.0.1:4150")], live=False)
    tail.channel = "nsqbox_tui_424242#ephemeral"
    await app.push_screen(tail)
    for i, (body, attempts) in enumerate(_TAIL):
        node = "10.0.0.1:4151" if i % 2 == 0 else "10.0.0.2:4151"
        when = int((DEMO_TIME - 3 + i * 0.731) * 1e9)
        tail.post_message(TailScreen.Received(node, when, attempts, body))
    await pilot.pause()


async def render(view: str, *, size: tuple[int, int] = SIZE) -> str:
    """The SVG screenshot of ``view`` (a key of :data:`VIEWS`) on the demo cluster."""
    app = AdminApp(partial(open_demo_backend, DemoBackend()), interval=3600, tz=UTC)
    async with app.run_test(size=size) as pilot:
        await _walk(view, pilot, app)
        return app.export_screenshot(title=f"nsqbox tui: {view}")


def render_all(size: tuple[int, int] = SIZE) -> dict[str, str]:
    """Every view's SVG (runs its own asyncio loops)."""
    return {view: asyncio.run(render(view, size=size)) for view in VIEWS}
