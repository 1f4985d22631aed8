"""The status line shows broker time when the box's clock is manual (issue #24)."""

from __future__ import annotations

import time
from typing import Any

from textual.pilot import Pilot

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.widgets import StatusLine
from nsqbox.broker.clock import BrokerClock
from nsqbox.testing.handle import NSQBox

from .conftest import make_app, run_app, wait_until


def _status(app: AdminApp) -> str:
    return app.screen.query_one(StatusLine).text


def test_a_manual_clock_is_on_the_status_line(nsq: NSQBox) -> None:
    app = make_app(nsq)
    clock = BrokerClock(manual=True)
    clock.offset = 400 * 86400.0  # far enough to show in the date
    app.broker_clock = clock
    shifted = time.strftime("%Y-%m-%d", time.gmtime(time.time() + clock.offset))

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(
            pilot, lambda: "updated" in _status(app), "a refresh", lambda: _status(app)
        )
        assert "broker time" in _status(app)
        assert shifted in _status(app)

    run_app(app, body)


def test_real_time_is_not_on_the_status_line(nsq: NSQBox) -> None:
    app = make_app(nsq)
    app.broker_clock = BrokerClock()

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(
            pilot, lambda: "updated" in _status(app), "a refresh", lambda: _status(app)
        )
        assert "broker time" not in _status(app)

    run_app(app, body)
