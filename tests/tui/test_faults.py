"""The Faults view against a real cluster: start a fault, see a client refused, lift it.

Keys are pressed as a person would; what the fault does is checked where a client sees it
(nsqd's HTTP ``/pub`` answering 503) and in nsqd's own ``/nsqbox/faults``. Every test lifts
whatever it left on the shared cluster.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Input, Select

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.backend import open_model_backend
from nsqbox.admin.tui.fault_form import AddFaultScreen
from nsqbox.admin.tui.faults import NO_CONTROL, FaultsScreen
from nsqbox.admin.tui.modals import ConfirmScreen
from nsqbox.admin.tui.widgets import StatsTable
from nsqbox.testing.handle import NSQBox
from tests.admin.conftest import start_controlled

from .conftest import INTERVAL, TIMEOUT, make_app, on_screen, run_app, wait_until


@pytest.fixture
def clean(nsq: NSQBox) -> Iterator[NSQBox]:
    """The cluster, with every fault lifted afterwards (also when the test fails)."""
    try:
        yield nsq
    finally:
        nsq.faults.lift_all()


async def pub(node: str, topic: str) -> int:
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
        response = await client.post(f"http://{node}/pub", params={"topic": topic}, content=b"m")
    return response.status_code


async def open_faults(pilot: Pilot[Any], app: AdminApp) -> FaultsScreen:
    await pilot.press("f")
    await wait_until(pilot, lambda: isinstance(app.screen, FaultsScreen), "the Faults view")
    screen = app.screen
    assert isinstance(screen, FaultsScreen)
    await wait_until(pilot, lambda: screen.loads > 0, "the fault listing")
    return screen


def test_add_a_fault_see_a_publish_fail_and_lift_it(clean: NSQBox) -> None:
    node0, node1 = (str(a) for a in clean.nsqd_http_addresses)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        screen = await open_faults(pilot, app)
        faults = screen.query_one("#faults", StatsTable)
        nodes = screen.query_one("#fault-nodes", StatsTable)
        assert faults.keys == []
        await wait_until(pilot, lambda: {node0, node1} <= set(nodes.keys), "both nsqds listed")

        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, AddFaultScreen), "the form")
        form = app.screen
        form.query_one("#node", Select).value = node0
        form.query_one("#topic", Input).value = "orders"
        form.query_one("#count", Input).value = "5"
        form.query_one("#kind", Input).focus()
        await pilot.press("enter")  # the kind is fail_publishes already
        await wait_until(pilot, lambda: len(app.results) == 1, "the fault started")
        assert app.results[0].ok, app.results[0]
        assert app.results[0].label == (f"fault fail_publishes (topic=orders count=5) on {node0}")
        assert await pub(node0, "orders") == 503  # a client is refused
        assert await pub(node1, "orders") == 200  # on that node only
        [active] = clean.faults.active()
        assert (active.kind, active.topic, active.remaining) == ("fail_publishes", "orders", 4)

        key = f"{node0}/{active.id}"
        listed = ("fail_publishes", "topic=orders", "4 commands")

        def shown() -> bool:
            return key in faults.keys and faults.cells(key)[2:5] == listed

        await wait_until(pilot, shown, "the fault listed", lambda: faults.keys)
        assert faults.select(key)
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: len(app.results) == 2, "the fault lifted")
        assert app.results[1].ok, app.results[1]
        assert await pub(node0, "orders") == 200
        assert clean.faults.active() == []
        await wait_until(pilot, lambda: faults.keys == [], "the fault gone from the view")

    run_app(make_app(clean), body)


def test_left_says_the_unit_and_the_end(clean: NSQBox) -> None:
    stall = clean.faults.stall(topic="nowhere", count=2, duration=600)
    key = f"{clean.nsqd_http_address}/{stall.info.id}"
    assert stall.info.until is not None

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        screen = await open_faults(pilot, app)
        faults = screen.query_one("#faults", StatsTable)
        await wait_until(pilot, lambda: key in faults.keys, "the stall listed")
        left = str(faults.cells(key)[4])
        until = datetime.fromtimestamp(stall.info.until, UTC).strftime("%H:%M:%S")  # make_app's tz
        assert re.fullmatch(rf"2 connections or (10m00s|9m\d\ds) \(until {until}\)", left), left

    with stall:
        run_app(make_app(clean), body)


async def problem_shown(pilot: Pilot[Any], form: Screen[Any], problem: str) -> None:
    """Let the app run until the form's problem line says ``problem``: the Input's Submitted
    message reaches the form after the key, so on a busy machine after ``press`` returned."""

    def shown() -> str:
        return str(form.query_one("#problem").render())

    await wait_until(pilot, lambda: shown() == problem, f"the problem {problem!r}", seen=shown)


def test_the_form_refuses_what_no_node_would_take(clean: NSQBox) -> None:
    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await open_faults(pilot, app)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, AddFaultScreen), "the form")
        form = app.screen
        for field, value, problem in (
            ("kind", "Fail!", "invalid fault kind 'Fail!'"),
            ("topic", "bad topic", "invalid topic name 'bad topic'"),
            ("duration", "soon", "invalid duration 'soon' (30s, 2m, 1h)"),
            ("other", "novalue", "other parameters are key=value, not 'novalue'"),
        ):
            box = form.query_one(f"#{field}", Input)
            saved, box.value = box.value, value
            box.focus()
            await pilot.press("enter")
            await problem_shown(pilot, form, problem)
            box.value = saved
        await pilot.press("escape")
        await on_screen(pilot, app, FaultsScreen)
        assert app.results == []
        assert clean.faults.active() == []

    run_app(make_app(clean), body)


def test_read_only_and_no_node_control(clean: NSQBox) -> None:
    fault = clean.faults.fail_publishes(topic="kept")

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        screen = await open_faults(pilot, app)
        faults = screen.query_one("#faults", StatsTable)
        await wait_until(pilot, lambda: len(faults.keys) == 1, "the fault listed")
        actions = {b.binding.action for b in screen.active_bindings.values()}
        assert actions.isdisjoint({"add_fault", "lift", "lift_all"})
        await pilot.press("a", "ctrl+d", "X", "R", "K")
        await on_screen(pilot, app, FaultsScreen)
        assert app.results == []
        assert [f.id for f in clean.faults.active()] == [fault.info.id]

    run_app(make_app(clean, read_only=True), body)

    async def writable(pilot: Pilot[Any], app: AdminApp) -> None:
        screen = await open_faults(pilot, app)
        note = str(screen.query_one("#faults-note").render())
        assert note == NO_CONTROL
        assert "--admin-http-address" in note
        assert screen.check_action("node", ("restart",)) is None  # dimmed: no node control
        await pilot.press("R")
        await on_screen(pilot, app, FaultsScreen)
        await pilot.press("X")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: len(app.results) == 1, "every fault lifted")
        assert app.results[0].ok, app.results[0]
        assert clean.faults.active() == []

    run_app(make_app(clean), writable)


@contextmanager
def controlled_admin(data: Path) -> Iterator[tuple[str, str]]:
    """An nsqd under node control and an admin service given it, on a trio loop in a thread
    (:func:`tests.admin.conftest.start_controlled`): (admin URL, nsqd HTTP address)."""
    started: queue.Queue[tuple[str, str, trio.lowlevel.TrioToken] | BaseException] = queue.Queue()
    stop = trio.Event()

    async def main() -> None:
        try:
            async with trio.open_nursery() as nursery:
                admin, node = await start_controlled(nursery, data)
                started.put((admin, node, trio.lowlevel.current_trio_token()))
                await stop.wait()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            started.put(exc)
            raise

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    answer = started.get(timeout=TIMEOUT)
    if isinstance(answer, BaseException):
        raise answer
    admin, node, token = answer
    try:
        yield admin, node
    finally:
        trio.from_thread.run_sync(stop.set, trio_token=token)
        thread.join(TIMEOUT)


def test_crash_and_start_a_node_through_the_admin_service(tmp_path: Path) -> None:
    with controlled_admin(tmp_path) as (admin, node):

        async def ping() -> int | None:
            async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
                try:
                    return (await client.get(f"http://{node}/ping")).status_code
                except httpx.TransportError:
                    return None

        async def body(pilot: Pilot[Any], app: AdminApp) -> None:
            screen = await open_faults(pilot, app)
            nodes = screen.query_one("#fault-nodes", StatsTable)
            await wait_until(pilot, lambda: node in nodes.keys, "the node listed")
            assert nodes.select(node)
            assert nodes.cells(node)[4] == "running"
            await pilot.press("K")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await wait_until(pilot, lambda: len(app.results) == 1, "the crash")
            assert app.results[0].ok, app.results[0]
            assert await ping() is None
            await wait_until(pilot, lambda: nodes.cells(node)[4] == "DOWN", "shown down")
            await pilot.press("S")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await wait_until(pilot, lambda: len(app.results) == 2, "the start")
            assert app.results[1].ok, app.results[1]
            assert await ping() == 200
            await pilot.press("S")  # started already: the control refuses, the app reports it
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await wait_until(pilot, lambda: len(app.results) == 3, "the refused start")
            assert app.results[2].errors == ("NODE_CONTROL_FAILED: nsqd 0 is running",)

        factory = partial(open_model_backend, nsqd_http_addresses=[node], admin_http_address=admin)
        run_app(AdminApp(factory, interval=INTERVAL), body)
