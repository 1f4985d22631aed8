"""What can be done with listed messages: republish a copy of one, save the list to a file.

Both ask first. :func:`republish` asks for a topic (and the nsqd to publish through), then
confirms, then publishes a copy of the body through nsqd's ``/pub`` — a new message with a new
id, the way people replay a dead letter; the message itself stays where it is.
:func:`save_messages` asks for a path (and before overwriting a file), then writes one JSON
line per message (:func:`~.peeked.json_line`). ``--read-only`` refuses both: republishing
changes the cluster, and saving writes on the machine the TUI runs on (with ``--web``, the
server's machine, not the browser's). So a browser tab's TUI (``--web-session``) saves only
under its save directory (:func:`confined`: the box's data directory for ``nsqbox up --web``,
or ``--web-save-dir``), and not at all without one; the terminal TUI saves anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Input, Label

from ...wire.names import is_valid_name
from . import format as fmt
from .base import AdminHost
from .modals import (
    MODAL_CSS,
    VALID_NAME,
    ConfirmScreen,
    FormScreen,
    PublishRequest,
    node_select,
    pick_node,
)
from .peeked import Listed, json_line

__all__ = [
    "RepublishScreen",
    "SaveScreen",
    "confined",
    "republish",
    "save_messages",
    "write_messages",
]


class RepublishScreen(FormScreen[PublishRequest | None]):
    """Name the topic (and the nsqd) a copy of ``message`` goes to; a PublishRequest or None."""

    DEFAULT_CSS = MODAL_CSS.format(name="RepublishScreen")
    OK = "Republish"

    def __init__(self, message: Listed, nodes: Sequence[str], topic: str) -> None:
        super().__init__(f"Republish a copy of message {message.id}")
        self.message = message
        self.nodes = list(nodes)
        self.node = pick_node(self.nodes, message.node)
        self.topic = topic

    def fields(self) -> ComposeResult:
        """What is copied, the nsqd, the topic."""
        yield Label(f"{fmt.plural(self.message.size, 'byte')}, now {self.message.where}")
        yield Label("Through nsqd")
        yield node_select(self.nodes, self.node)
        yield Label("To topic")
        yield Input(self.topic, placeholder="topic", id="topic", validators=[VALID_NAME])

    def on_mount(self) -> None:
        """The topic has the focus."""
        self.query_one("#topic", Input).focus()

    def answer(self) -> PublishRequest | str:
        """The request, or what is wrong."""
        node, topic = self.chosen_node(), self.value("topic")
        if not node:
            return "no nsqd to publish through"
        if not is_valid_name(topic):
            return f"invalid topic name {topic!r}"
        return PublishRequest(node, topic, self.message.body)


def confined(raw: str, save_dir: Path) -> Path | str:
    """``raw`` (relative: to ``save_dir``) as a path inside ``save_dir``, links followed; or
    why it is refused."""
    base = save_dir.resolve()
    path = (base / Path(raw).expanduser()).resolve()
    if not path.is_relative_to(base) or path == base:
        return f"a web session saves only under {base}"
    return path


class SaveScreen(FormScreen[Path | None]):
    """Name the file the listed messages are written to; its path or None.

    With ``save_dir`` (a web session), the file must be inside it.
    """

    DEFAULT_CSS = MODAL_CSS.format(name="SaveScreen")
    OK = "Save"

    def __init__(self, count: int, path: str, save_dir: Path | None = None) -> None:
        super().__init__(f"Save {fmt.plural(count, 'listed message')}")
        self.count = count
        self.path = path
        self.save_dir = save_dir

    def fields(self) -> ComposeResult:
        """What is written, and the path."""
        yield Label("One JSON object per line: id, node, state, attempts, timestamp, size,")
        yield Label("body (base64), text (when UTF-8), truncated.")
        if self.save_dir is None:
            yield Label("File (on the machine the TUI runs on)")
        else:
            yield Label(f"File (on the server, under {self.save_dir})", markup=False)
        yield Input(self.path, placeholder="path", id="path")

    def on_mount(self) -> None:
        """The path has the focus."""
        self.query_one("#path", Input).focus()

    def answer(self) -> Path | str:
        """The path, or what is wrong with it."""
        raw = self.value("path")
        if not raw:
            return "a file name is needed"
        if self.save_dir is not None:
            inside = confined(raw, self.save_dir)
            if isinstance(inside, str):
                return inside
            path = inside
        else:
            path = Path(raw).expanduser()
        if path.is_dir():
            return f"{path} is a directory"
        if not path.parent.is_dir():
            return f"no directory {path.parent}"
        return path


def republish(
    screen: Screen[Any], host: AdminHost, message: Listed, nodes: Sequence[str], topic: str
) -> None:
    """Ask for a topic, confirm, then publish a copy of ``message`` there."""
    if host.read_only:
        screen.notify("read-only: not republishing", severity="warning")
        return
    if message.truncated:
        screen.notify(
            f"only the first {len(message.body):,} of its {message.size:,} bytes were listed: "
            "not republishing a part of it",
            severity="error",
        )
        return

    def asked(request: PublishRequest | None) -> None:
        if request is None:
            return
        label = f"republish message {message.id} to topic {request.topic}"

        def confirmed(yes: bool | None) -> None:
            if yes:
                host.perform(label, lambda b: b.publish(request.node, request.topic, request.body))

        text = (
            f"A copy of its {fmt.plural(message.size, 'byte')} is published to topic "
            f"{request.topic} through {request.node}: a new message, with a new id. The "
            f"message itself stays {message.where} on {message.node}."
        )
        screen.app.push_screen(
            ConfirmScreen(f"Republish to {request.topic}?", text, "Republish", danger=False),
            confirmed,
        )

    screen.app.push_screen(RepublishScreen(message, nodes, topic), asked)


def write_messages(path: Path, messages: Sequence[Listed]) -> None:
    """Write ``messages`` to ``path``, one JSON line each (OSError if it cannot)."""
    with path.open("w", encoding="utf-8") as out:
        out.writelines(json_line(m) + "\n" for m in messages)


def save_messages(
    screen: Screen[Any],
    host: AdminHost,
    messages: Sequence[Listed],
    path: str,
) -> None:
    """Ask for a path (``path`` proposed), confirm an overwrite, write ``messages`` there."""
    if host.read_only:
        screen.notify("read-only: not saving", severity="warning")
        return
    if not messages:
        screen.notify("no message listed: nothing to save", severity="warning")
        return
    save_dir = host.save_dir if host.web_session else None
    if host.web_session and save_dir is None:
        screen.notify(
            "a web session saves only under a directory given with --web-save-dir",
            title="not saving",
            severity="warning",
        )
        return
    listed = list(messages)

    def write(target: Path) -> None:
        if save_dir is not None and isinstance(refused := confined(str(target), save_dir), str):
            screen.notify(refused, title="not saved", severity="error", markup=False)
            return
        try:
            write_messages(target, listed)
        except OSError as exc:
            screen.notify(
                f"{target}: {exc}", title="save failed", severity="error", timeout=15, markup=False
            )
            return
        screen.notify(
            f"{fmt.plural(len(listed), 'message')} to {target}", title="saved", markup=False
        )

    def asked(target: Path | None) -> None:
        if target is None:
            return
        if not target.exists():
            write(target)
            return

        def overwrite(yes: bool | None) -> None:
            if yes:
                write(target)

        screen.app.push_screen(
            ConfirmScreen(
                f"Overwrite {target}?", "The file exists; saving replaces it.", "Overwrite"
            ),
            overwrite,
        )

    proposed = path if save_dir is None else str(save_dir.resolve() / path)
    screen.app.push_screen(SaveScreen(len(listed), proposed, save_dir), asked)
