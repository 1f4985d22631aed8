"""The TUI saves a snapshot of the box (``ctrl+s``, the command palette) and shows on its status
line when and from which file the box was loaded (issue #34), against a real box.

``nsqbox up --tui`` (:class:`BoxApp`) runs a box started with ``--load``; the save goes through
the box's admin service (``POST /api/snapshot?file=NAME``), which writes the file in its own
directory: the test reads the file back. A later load into the running box (``--replace``)
shows on the status line at the next refresh.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import trio
from textual.pilot import Pilot
from textual.widgets import Input, Label

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.snapshot_save import SaveSnapshotScreen
from nsqbox.admin.tui.widgets import StatusLine
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxOptions
from nsqbox.run.up_tui import BoxApp
from nsqbox.snapshot.files import SnapshotWriter, check_snapshot, open_for_writing
from nsqbox.snapshot.format import Header
from nsqbox.snapshot.transfer import load
from nsqbox.testing.handle import NSQBox

from .conftest import TIMEOUT, make_app, run_app, wait_until

LOADED = re.compile(r"loaded from bug\.jsonl at \d\d:\d\d:\d\d(?! \(replace\))")


def write_snapshot(path: Path, bodies: list[bytes]) -> None:
    """A one-node snapshot: topic ``orders``, channel ``billing`` holding ``bodies``."""
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(0, 1))
        writer.topic(0, "orders", False)
        writer.channel(0, "orders", "billing", False)
        for i, body in enumerate(bodies):
            msg_id = f"18ab2f15e04{i:05x}".encode()
            writer.message(0, "orders", "billing", msg_id, 1_795_833_104_000_000_000, 0, body)
        writer.finish()


def status(app: AdminApp) -> str:
    return app.screen.query_one(StatusLine).text


def titles(app: AdminApp) -> list[str]:
    """The command palette's entries for the current view."""
    return [command.title for command in app.get_system_commands(app.screen)]


async def fill_form(pilot: Pilot[Any], app: AdminApp, name: str) -> SaveSnapshotScreen:
    """ctrl+s, type ``name``, Enter; the form (still open if it refused)."""
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: isinstance(app.screen, SaveSnapshotScreen), "the form")
    form = app.screen
    assert isinstance(form, SaveSnapshotScreen)
    form.query_one("#name", Input).value = name
    await pilot.press("enter")
    await pilot.pause()
    return form


def test_the_tui_saves_a_snapshot_and_shows_where_the_box_was_loaded_from(
    tmp_path: Path,
) -> None:
    bug, other, saves = tmp_path / "bug.jsonl", tmp_path / "other.jsonl", tmp_path / "saves"
    write_snapshot(bug, [b"one", b"two"])
    write_snapshot(other, [b"three"])
    saves.mkdir()
    nsqd = NSQDOptions(data_path=str(tmp_path / "data"), node_id=0)
    options = BoxOptions(nsqd=nsqd, load_path=str(bug), snapshot_dir=str(saves))
    options.use_ephemeral_ports()
    app = BoxApp(options, interval=0.5)

    async def body(pilot: Pilot[Any], app: BoxApp) -> None:
        await wait_until(pilot, lambda: LOADED.search(status(app)), "the load", lambda: status(app))
        assert "Save snapshot" in titles(app)  # the command palette offers it
        # the form proposes nsqbox-<time>.jsonl.gz, says where the box saves, refuses a path
        form = await fill_form(pilot, app, "../up.jsonl")
        assert app.screen is form
        assert "not a path" in str(form.query_one("#problem", Label).render())
        await pilot.press("escape")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, SaveSnapshotScreen), "the form")
        proposed = app.screen.query_one("#name", Input)
        assert re.fullmatch(r"nsqbox-\d{8}-\d{6}\.jsonl\.gz", proposed.value), proposed.value
        where = [str(label.render()) for label in app.screen.query(Label)]
        assert f"File name (the box saves it in {saves})" in where
        await pilot.press("escape")

        await fill_form(pilot, app, "saved.jsonl")
        await wait_until(pilot, lambda: len(app.results) == 1, "the save", lambda: app.results)
        assert app.results[-1].ok, app.results
        summary = check_snapshot(saves / "saved.jsonl")
        assert (summary.topics, summary.channels, summary.messages) == (1, 1, 2)
        # the same name again: the box refuses to overwrite it
        await fill_form(pilot, app, "saved.jsonl")
        await wait_until(pilot, lambda: len(app.results) == 2, "the refusal")
        assert app.results[-1].errors == ("FILE_EXISTS",)
        assert summary == check_snapshot(saves / "saved.jsonl")

        # a later load into the running box, replacing what it holds, shows at the next refresh
        assert app.addresses is not None
        nsqd_http = app.addresses.ready()["nsqd_http_address"]

        def load_other() -> None:
            with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
                load(client, other, [nsqd_http], replace=True)

        await asyncio.to_thread(load_other)
        replaced = re.compile(r"loaded from other\.jsonl at \d\d:\d\d:\d\d \(replace\)")
        await wait_until(pilot, lambda: replaced.search(status(app)), "the second load")

    run_app(app, body)
    assert app.failure is None
    assert trio.run(trio.sleep, 0) is None  # the guest run is gone


def test_without_an_admin_service_the_save_says_why(nsq: NSQBox) -> None:
    app = make_app(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: app.refresh_count > 0, "a refresh")
        assert "loaded from" not in status(app)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, SaveSnapshotScreen), "the form")
        where = [str(label.render()) for label in app.screen.query(Label)]
        assert "File name (the box saves it in its working directory)" in where
        await pilot.press("enter")  # the name proposed
        await wait_until(pilot, lambda: app.results, "the outcome")
        [result] = app.results
        assert "needs nsqbox's admin service" in result.errors[0]

    run_app(app, body)


def test_a_read_only_tui_offers_no_save(nsq: NSQBox) -> None:
    app = make_app(nsq, read_only=True)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: app.refresh_count > 0, "a refresh")
        assert "Save snapshot" not in titles(app)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, SaveSnapshotScreen)
        assert app.results == []

    run_app(app, body)
