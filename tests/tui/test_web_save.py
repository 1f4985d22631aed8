"""Saving listed messages from a browser tab's TUI (``--web-session``): only under its save
directory (the box's data directory for ``nsqbox up --web``), against a real cluster.

The terminal TUI saves anywhere (``test_messages.py``); a web session is driven by whoever
holds the page, so a path outside the directory (or through a link out of it) is refused in
the form, and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Label

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.message_actions import SaveScreen, confined
from nsqbox.admin.tui.messages import MessagesScreen
from nsqbox.testing.handle import NSQBox

from .conftest import HTTP, make_app, run_app, wait_until
from .test_messages import listed, open_messages


async def save_form(pilot: Pilot[Any], app: AdminApp, path: str) -> SaveScreen:
    """Press ``s``, type ``path``, press Enter; the form (still open if it refused)."""
    await pilot.press("s")
    await wait_until(pilot, lambda: isinstance(app.screen, SaveScreen), "the save form")
    form = app.screen
    assert isinstance(form, SaveScreen)
    form.query_one("#path", Input).value = path
    await pilot.press("enter")
    await pilot.pause()
    return form


def problem(form: SaveScreen) -> str:
    return str(form.query_one("#problem", Label).render())


def test_a_web_session_saves_only_under_its_directory(nsq: NSQBox, tmp_path: Path) -> None:
    http = HTTP(nsq)
    data = tmp_path / "data"
    data.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    bashrc = home / ".bashrc"
    bashrc.write_text("# mine\n")
    (data / "out").symlink_to(home)  # a link out of the directory

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await http.post(0, "/topic/create", topic="websave")
        await http.post(0, "/channel/create", topic="websave", channel="c")
        await http.publish(0, "websave", b"echo owned")
        await open_messages(pilot, app, "websave", "c")
        await listed(pilot, app)
        for outside in (str(bashrc), "../home/.bashrc", "out/.bashrc", str(data)):
            form = await save_form(pilot, app, outside)
            assert app.screen is form, outside  # refused: the form stays
            assert "a web session saves only under" in problem(form), outside
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen), "back")
        # inside: a relative name lands in the directory (which the form proposes)
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, SaveScreen), "the save form")
        proposed = app.screen.query_one("#path", Input).value
        assert proposed.startswith(f"{data.resolve()}/")
        await pilot.press("escape")
        await save_form(pilot, app, "kept.jsonl")
        await wait_until(pilot, (data / "kept.jsonl").exists, "the file in the directory")

    run_app(make_app(nsq, web_session=True, save_dir=data), body)
    assert bashrc.read_text() == "# mine\n"
    [line] = (data / "kept.jsonl").read_text().splitlines()
    assert json.loads(line)["text"] == "echo owned"


def test_a_web_session_without_a_directory_saves_nothing(nsq: NSQBox) -> None:
    http = HTTP(nsq)

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await http.post(0, "/topic/create", topic="nosave")
        await http.post(0, "/channel/create", topic="nosave", channel="c")
        await http.publish(0, "nosave", b"x")
        await open_messages(pilot, app, "nosave", "c")
        screen = await listed(pilot, app)
        await pilot.press("s")
        await wait_until(
            pilot,
            lambda: any("--web-save-dir" in str(n.message) for n in app._notifications),
            "the refusal",
        )
        assert app.screen is screen  # no form

    run_app(make_app(nsq, web_session=True), body)


def test_confined(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    assert confined("a.jsonl", tmp_path) == base / "a.jsonl"
    assert confined(str(base / "sub" / "b.jsonl"), tmp_path) == base / "sub" / "b.jsonl"
    assert isinstance(confined("../x", tmp_path), str)
    assert isinstance(confined("/etc/passwd", tmp_path), str)
    assert isinstance(confined(".", tmp_path), str)
