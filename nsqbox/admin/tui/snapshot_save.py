"""Saving a snapshot of the box from the TUI: ``ctrl+s`` (or the command palette) asks for a
file name, then the box's admin service saves the snapshot (``POST /api/snapshot?file=NAME``).

The TUI writes nothing itself. The box cuts every nsqd at once and writes the file on its own
machine (for a TUI in a browser tab, the server's, not the browser's) in the directory it
reports (the working directory it was started in), under a name that is a file name and not
a path (:func:`~nsqbox.snapshot.confined.check_save_name`: checked here to say in the form what
is wrong, and again by the admin service), never over an existing file. The name proposed is
``nsqbox-<time>.jsonl.gz`` (:func:`~nsqbox.snapshot.confined.default_save_name`).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from textual.app import ComposeResult
from textual.widgets import Input, Label

from ...snapshot.confined import SaveNameError, check_save_name
from .modals import FIRST_FOCUS, MODAL_CSS, FormScreen
from .safe import safe

__all__ = ["SaveSnapshotScreen", "saved_text"]


class SaveSnapshotScreen(FormScreen[PurePosixPath | None]):
    """Name the snapshot file the box saves (``directory``: where, when the box said); the
    name (a one-part path: a string is the form's problem line), or None."""

    DEFAULT_CSS = MODAL_CSS.format(name="SaveSnapshotScreen")
    AUTO_FOCUS = f".{FIRST_FOCUS}"
    OK = "Save"

    def __init__(self, name: str, directory: str | None) -> None:
        super().__init__("Save a snapshot of the box")
        self.proposed = name
        self.directory = directory

    def fields(self) -> ComposeResult:
        """What is saved, where, and the file's name."""
        yield Label("Every nsqd's topics, channels and messages, in one consistent cut.")
        if self.directory:
            yield Label(safe(f"File name (the box saves it in {self.directory})"))
        else:
            yield Label("File name (the box saves it in its working directory)")
        yield Input(self.proposed, placeholder="name.jsonl.gz", id="name", classes=FIRST_FOCUS)

    def answer(self) -> PurePosixPath | str:
        """The name, or what is wrong with it."""
        try:
            return PurePosixPath(check_save_name(self.value("name")))
        except SaveNameError as exc:
            return str(exc)


def saved_text(file: str, directory: str, messages: int, topics: int, channels: int) -> str:
    """The notification after a save: what went where."""
    where = f"{directory.rstrip('/')}/{file}" if directory else file
    return (
        f"{messages:,} message{'' if messages == 1 else 's'} in {topics:,} "
        f"topic{'' if topics == 1 else 's'} and {channels:,} channel"
        f"{'' if channels == 1 else 's'} to {where}"
    )
