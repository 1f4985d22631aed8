"""Modal screens: confirm a destructive action, name a topic or channel, write a message.

Each is a ``ModalScreen[T]`` dismissed with its answer (None or False for "no"), so a caller
writes ``app.push_screen(ConfirmScreen(...), callback)``. The confirmation starts with the
focus on *Cancel*: an Enter pressed by habit does nothing harmful.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.validation import Function
from textual.widgets import Button, Input, Label, Select

from ...wire.names import is_valid_name

__all__ = ["ConfirmScreen", "CreateScreen", "PublishRequest", "PublishScreen"]

_MODAL_CSS = """
{name} {{
    align: center middle;
}}
{name} > Vertical {{
    width: 72;
    height: auto;
    border: thick $primary;
    background: $surface;
    padding: 1 2;
}}
{name} Label {{
    width: 100%;
}}
{name} .title {{
    text-style: bold;
    margin-bottom: 1;
}}
{name} Horizontal {{
    height: auto;
    align-horizontal: right;
    margin-top: 1;
}}
{name} Button {{
    margin-left: 2;
}}
{name} Input, {name} Select {{
    margin-bottom: 1;
}}
"""

_VALID_NAME = Function(is_valid_name, "1-64 characters of . a-z A-Z 0-9 _ - (#ephemeral)")


class ConfirmScreen(ModalScreen[bool]):
    """Ask before doing something: *y* or the confirm button says yes, *n* or Esc no."""

    DEFAULT_CSS = (
        _MODAL_CSS.format(name="ConfirmScreen")
        + """
    ConfirmScreen > Vertical.danger {
        border: thick $error;
    }
    """
    )
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, message: str, confirm: str, *, danger: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.message = message
        self.confirm = confirm
        self.danger = danger

    def compose(self) -> ComposeResult:
        """The question, what it means, and the two buttons."""
        with Vertical(classes="danger" if self.danger else ""):
            yield Label(self.title_text, classes="title")
            yield Label(self.message, id="message")
            with Horizontal():
                yield Button("Cancel (n)", id="cancel")
                yield Button(
                    f"{self.confirm} (y)",
                    id="confirm",
                    variant="error" if self.danger else "primary",
                )

    def on_mount(self) -> None:
        """Cancel has the focus."""
        self.query_one("#cancel", Button).focus()

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")


class CreateScreen(ModalScreen[tuple[str, str] | None]):
    """Name a topic (and maybe a channel) to create; ``(topic, channel)`` or None."""

    DEFAULT_CSS = _MODAL_CSS.format(name="CreateScreen")
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, topic: str = "", *, channel_required: bool = False) -> None:
        super().__init__()
        self.topic = topic
        self.channel_required = channel_required

    def compose(self) -> ComposeResult:
        """Topic and channel inputs, Cancel and Create."""
        what = "channel" if self.channel_required else "topic"
        with Vertical():
            yield Label(f"Create a {what}", classes="title")
            yield Label("Topic")
            yield Input(self.topic, placeholder="topic", id="topic", validators=[_VALID_NAME])
            yield Label("Channel" if self.channel_required else "Channel (optional)")
            yield Input(placeholder="channel", id="channel")
            yield Label("", id="problem")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Create", id="create", variant="primary")

    def on_mount(self) -> None:
        """Focus the first empty input."""
        self.query_one("#channel" if self.topic else "#topic", Input).focus()

    def action_cancel(self) -> None:
        """Close without creating anything."""
        self.dismiss(None)

    def _answer(self) -> tuple[str, str] | str:
        topic = self.query_one("#topic", Input).value.strip()
        channel = self.query_one("#channel", Input).value.strip()
        if not is_valid_name(topic):
            return f"invalid topic name {topic!r}"
        if channel and not is_valid_name(channel):
            return f"invalid channel name {channel!r}"
        if self.channel_required and not channel:
            return "a channel name is needed"
        return (topic, channel)

    @on(Input.Submitted)
    @on(Button.Pressed, "#create")
    def _create(self) -> None:
        answer = self._answer()
        if isinstance(answer, str):
            self.query_one("#problem", Label).update(answer)
            return
        self.dismiss(answer)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True, slots=True)
class PublishRequest:
    """A message to publish: through which nsqd (HTTP address), to which topic, what."""

    node: str
    topic: str
    body: bytes


class PublishScreen(ModalScreen[PublishRequest | None]):
    """Write one message for nsqd's ``/pub``: node, topic and body."""

    DEFAULT_CSS = _MODAL_CSS.format(name="PublishScreen")
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, nodes: Sequence[str], node: str = "", topic: str = "") -> None:
        super().__init__()
        self.nodes = list(nodes)
        self.node = node if node in self.nodes else (self.nodes[0] if self.nodes else "")
        self.topic = topic

    def compose(self) -> ComposeResult:
        """Node, topic and body, Cancel and Publish."""
        with Vertical():
            yield Label("Publish a message", classes="title")
            yield Label("Through nsqd")
            yield Select(
                [(n, n) for n in self.nodes],
                value=self.node or Select.NULL,
                allow_blank=not self.nodes,
                id="node",
            )
            yield Label("Topic")
            yield Input(self.topic, placeholder="topic", id="topic", validators=[_VALID_NAME])
            yield Label("Body")
            yield Input(placeholder="message body", id="body")
            yield Label("", id="problem")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Publish", id="publish", variant="primary")

    def on_mount(self) -> None:
        """Focus the body when the topic is known."""
        self.query_one("#body" if self.topic else "#topic", Input).focus()

    def action_cancel(self) -> None:
        """Close without publishing."""
        self.dismiss(None)

    def _answer(self) -> PublishRequest | str:
        node = self.query_one("#node", Select).value
        topic = self.query_one("#topic", Input).value.strip()
        body = self.query_one("#body", Input).value
        if not isinstance(node, str) or not node:
            return "no nsqd to publish through"
        if not is_valid_name(topic):
            return f"invalid topic name {topic!r}"
        if not body:
            return "nsqd refuses empty messages"
        return PublishRequest(node, topic, body.encode())

    @on(Input.Submitted)
    @on(Button.Pressed, "#publish")
    def _publish(self) -> None:
        answer = self._answer()
        if isinstance(answer, str):
            self.query_one("#problem", Label).update(answer)
            return
        self.dismiss(answer)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)
