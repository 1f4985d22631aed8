"""``nsqbox up --tui``: the box's trio services as a guest of the TUI's asyncio loop.

The trap it must avoid: a guest run left alive when the app exits keeps trio's run state on
the thread, and the next ``trio.run()`` there fails. Each test ends by running trio again.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import httpx
import trio
from textual.pilot import Pilot
from textual.widgets import RichLog

from nsqbox.admin.tui.guest import TrioGuest
from nsqbox.admin.tui.logs import LogBuffer, LogScreen
from nsqbox.admin.tui.nodes import NodesScreen
from nsqbox.admin.tui.widgets import StatsTable, StatusLine
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxOptions
from nsqbox.run.up_tui import BoxApp, dialable

from .conftest import TIMEOUT, on_screen, run_app, wait_until


def box_options(tmp_path: Path) -> BoxOptions:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(tmp_path), node_id=0, log_level="info"))
    options.use_ephemeral_ports()
    return options


def trio_still_runs() -> None:
    """A trio run on this thread works: no guest run was left behind."""
    assert trio.run(trio.sleep, 0) is None


def test_the_box_runs_inside_the_tui_and_stops_with_it(tmp_path: Path) -> None:
    app = BoxApp(box_options(tmp_path), interval=0.5)
    seen: dict[str, Any] = {}

    async def body(pilot: Pilot[Any], app: BoxApp) -> None:
        await wait_until(pilot, lambda: app.addresses is not None, "the box to listen")
        assert app.addresses is not None
        nsqd_http = app.addresses.ready()["nsqd_http_address"]
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            response = await client.post(
                f"http://{nsqd_http}/pub", params={"topic": "orders"}, content=b"hi"
            )
            assert response.status_code == 200
        topics = app.screen.query_one("#topics", StatsTable)
        await wait_until(pilot, lambda: topics.keys == ["orders"], "the topic", lambda: topics.keys)
        await pilot.press("n")
        await on_screen(pilot, app, NodesScreen)
        nodes = app.screen.query_one("#nodes", StatsTable)
        await wait_until(pilot, lambda: len(nodes.keys) == 1, "the box's nsqd")
        await pilot.press("L")  # the servers' log, not on the terminal
        await wait_until(pilot, lambda: app.logs.written > 0, "log lines")
        assert any("[nsqd]" in line or "TCP" in line for line in app.logs.lines)
        seen["guest"] = app.guest
        assert app.guest.running

    run_app(app, body)
    assert not seen["guest"].running
    assert app.failure is None
    trio_still_runs()


class QuietBoxApp(BoxApp):
    """A BoxApp that records its notifications (a notification draws over the table)."""

    def __init__(self, options: BoxOptions) -> None:
        super().__init__(options, interval=0.5)
        self.notified: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.notified.append(message)
        super().notify(message, **kwargs)


def test_at_the_default_level_the_log_opens_on_the_start_up_and_the_addresses_stay_put(
    tmp_path: Path,
) -> None:
    """``nsqbox up``'s level is warn, which a healthy start never reaches: the Logs view still
    shows the start-up lines (info) and the banner, then follows warn; where the box listens
    is a status line, not a notification over the table."""
    options = BoxOptions()
    assert options.nsqd.log_level == "warn"  # nsqbox up's default
    options.nsqd.data_path = str(tmp_path)
    options.use_ephemeral_ports()
    app = QuietBoxApp(options)

    async def body(pilot: Pilot[Any], app: QuietBoxApp) -> None:
        await wait_until(pilot, lambda: app.addresses is not None, "the box to listen")
        assert app.addresses is not None
        ready = app.addresses.ready()
        nsqd_tcp, nsqd_http = ready["nsqd_tcp_address"], ready["nsqd_http_address"]
        lines = list(app.logs.lines)
        assert any(f"INFO: TCP: listening on {nsqd_tcp}" in line for line in lines), lines
        assert f"nsqbox up: nsqd: TCP {nsqd_tcp}, HTTP {nsqd_http}; data in {tmp_path}" in lines
        assert lines[-1] == "nsqbox up: the log shows warn and above from here (--log-level)"
        status = app.screen.query_one(StatusLine)
        port = nsqd_http.rpartition(":")[2]
        notice = f"box: nsqd TCP {nsqd_tcp}, HTTP :{port} · lookupd TCP "
        await wait_until(pilot, lambda: notice in status.text, "the notice", lambda: status.text)
        assert status.text.splitlines()[1].endswith(
            f"admin HTTP {ready['admin_http_address']} · q stops the box"
        )
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            response = await client.post(
                f"http://{nsqd_http}/pub", params={"topic": "orders"}, content=b"hi"
            )
            assert response.status_code == 200
        # nsqd logged the new topic (info) before it answered: past start-up, warn holds
        assert not any("orders" in line for line in app.logs.lines)
        await pilot.press("L")
        await on_screen(pilot, app, LogScreen)
        log = app.screen.query_one(RichLog)
        await wait_until(pilot, lambda: len(log.lines) >= len(lines), "the log drawn")
        drawn = [strip.text for strip in log.lines]
        assert any(f"TCP: listening on {nsqd_tcp}" in line for line in drawn)
        assert app.notified == []

    run_app(app, body)
    assert app.failure is None
    trio_still_runs()


def test_a_box_that_cannot_start_ends_the_app(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        options = box_options(tmp_path)
        options.lookupd_http_address = f"127.0.0.1:{taken.getsockname()[1]}"
        app = BoxApp(options)

        async def body(pilot: Pilot[Any], app: BoxApp) -> None:
            await wait_until(pilot, lambda: app.failure is not None, "the failure")

        run_app(app, body)
    assert isinstance(app.failure, OSError)
    assert app.return_code == 1
    trio_still_runs()


def test_trio_guest_runs_cancels_and_reports() -> None:
    async def main() -> None:
        guest = TrioGuest()
        started = asyncio.Event()

        async def forever() -> None:
            started.set()  # trio's task runs on this thread: it can touch asyncio objects
            await trio.sleep_forever()

        guest.start(forever)
        await started.wait()
        assert guest.running
        result = await guest.stop()
        assert result is not None
        assert result.unwrap() is None
        assert not guest.running

    asyncio.run(main())
    trio_still_runs()


def test_log_buffer_and_dialable_addresses() -> None:
    logs = LogBuffer(limit=2)
    logs.write("one\ntwo\n")
    assert logs.since(0) == ["one", "two"]
    logs.write("three\n")
    assert (list(logs.lines), logs.written, logs.since(2)) == (["two", "three"], 3, ["three"])
    assert dialable("0.0.0.0:4161") == "127.0.0.1:4161"
    assert dialable("[::]:4161") == "[::1]:4161"
    assert dialable("10.0.0.1:4161") == "10.0.0.1:4161"
