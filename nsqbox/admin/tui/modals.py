"""Modal screens: confirm a destructive action, name a topic or channel, write a message.

Each is a ``ModalScreen[T]`` dismissed with its answer (None or False for "no"), so a caller
writes ``app.push_screen(ConfirmScreen(...), callback)``. The confirmation starts with the
focus on *Cancel*: an Enter pressed by habit does nothing harmful.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.validation import Function
from textual.widgets import Button, Input, Label, Select
from textual.widgets.button import ButtonVariant

from ...wire.names import is_valid_name
from .safe import safe

__all__ = [
    "MODAL_CSS",
    "VALID_NAME",
    "ConfirmScreen",
    "CreateScreen",
    "FormScreen",
    "PublishRequest",
    "PublishScreen",
    "node_select",
    "pick_node",
]

#: The look every modal shares: ``MODAL_CSS.format(name="TheScreen")``.
#: The class of the input a form focuses first. Its screen's ``AUTO_FOCUS`` names it, so the
#: focus is there from the start: focusing it on mount left a moment where the first input had
#: it, and a key typed at once (a test's, a quick user's) landed there.
FIRST_FOCUS = "first-focus"

MODAL_CSS = """
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

#: An input validator for topic and channel names.
VALID_NAME = Function(is_valid_name, "1-64 characters of . a-z A-Z 0-9 _ - (#ephemeral)")

ResultT = TypeVar("ResultT")


def pick_node(nodes: Sequence[str], node: str) -> str:
    """``node`` when it is one of ``nodes``, else the first of them ("" without any)."""
    return node if node in nodes else next(iter(nodes), "")


def node_select(nodes: Sequence[str], node: str) -> Select[str]:
    """A choice of ``nodes`` (id ``node``) with ``node`` chosen."""
    return Select(
        [(safe(n), n) for n in nodes],  # node names come from peers: text, not markup
        value=node or Select.NULL,
        allow_blank=not nodes,
        id="node",
    )


class FormScreen(ModalScreen[ResultT]):
    """A form: a title, :meth:`fields`, a problem line, *Cancel* and the ``OK`` button.

    The OK button (or Enter in an input) closes the form with :meth:`answer`, unless that
    is a string: what is wrong, shown on the problem line. Esc or *Cancel* close it with None.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    #: The label and the variant of the button that submits the form.
    OK = "OK"
    OK_VARIANT: ButtonVariant = "primary"

    def __init__(self, heading: str) -> None:
        super().__init__()
        self.heading = heading

    def fields(self) -> ComposeResult:
        """The form's labels and inputs, between its title and its problem line."""
        raise NotImplementedError

    def answer(self) -> ResultT | str:
        """The form's value, or a string saying what is wrong with it."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        """The title, the fields, the problem line, Cancel and OK."""
        with Vertical():
            yield Label(safe(self.heading), classes="title")
            yield from self.fields()
            yield Label("", id="problem")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button(self.OK, id="ok", variant=self.OK_VARIANT)

    def value(self, name: str) -> str:
        """The stripped text of the input ``#name``."""
        return self.query_one(f"#{name}", Input).value.strip()

    def chosen_node(self) -> str:
        """The node chosen in ``#node`` ("" for none)."""
        node = self.query_one("#node", Select).value
        return node if isinstance(node, str) else ""

    def action_cancel(self) -> None:
        """Close without an answer."""
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def _submit(self) -> None:
        answer = self.answer()
        if isinstance(answer, str):
            self.query_one("#problem", Label).update(safe(answer))
            return
        self.dismiss(answer)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """Ask before doing something: *y* or the confirm button says yes, *n* or Esc no."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="ConfirmScreen")
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
            yield Label(safe(self.title_text), classes="title")
            yield Label(safe(self.message), id="message")
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


class CreateScreen(FormScreen[tuple[str, str] | None]):
    """Name a topic (and maybe a channel) to create; ``(topic, channel)`` or None."""

    DEFAULT_CSS = MODAL_CSS.format(name="CreateScreen")
    AUTO_FOCUS = f".{FIRST_FOCUS}"
    OK = "Create"

    def __init__(self, topic: str = "", *, channel_required: bool = False) -> None:
        super().__init__(f"Create a {'channel' if channel_required else 'topic'}")
        self.topic = topic
        self.channel_required = channel_required

    def fields(self) -> ComposeResult:
        """Topic and channel inputs."""
        yield Label("Topic")
        first = FIRST_FOCUS if not self.topic else ""  # the first empty input
        yield Input(
            self.topic, placeholder="topic", id="topic", validators=[VALID_NAME], classes=first
        )
        yield Label("Channel" if self.channel_required else "Channel (optional)")
        yield Input(placeholder="channel", id="channel", classes=FIRST_FOCUS if self.topic else "")

    def answer(self) -> tuple[str, str] | str:
        """``(topic, channel)``, or what is wrong."""
        topic, channel = self.value("topic"), self.value("channel")
        if not is_valid_name(topic):
            return f"invalid topic name {topic!r}"
        if channel and not is_valid_name(channel):
            return f"invalid channel name {channel!r}"
        if self.channel_required and not channel:
            return "a channel name is needed"
        return (topic, channel)


@dataclass(frozen=True, slots=True)
class PublishRequest:
    """A message to publish: through which nsqd (HTTP address), to which topic, what."""

    node: str
    topic: str
    body: bytes


class PublishScreen(FormScreen[PublishRequest | None]):
    """Write one message for nsqd's ``/pub``: node, topic and body."""

    DEFAULT_CSS = MODAL_CSS.format(name="PublishScreen")
    AUTO_FOCUS = f".{FIRST_FOCUS}"
    OK = "Publish"

    def __init__(self, nodes: Sequence[str], node: str = "", topic: str = "") -> None:
        super().__init__("Publish a message")
        self.nodes = list(nodes)
        self.node = pick_node(self.nodes, node)
        self.topic = topic

    def fields(self) -> ComposeResult:
        """Node, topic and body."""
        yield Label("Through nsqd")
        yield node_select(self.nodes, self.node)
        yield Label("Topic")
        first = FIRST_FOCUS if not self.topic else ""  # the body when the topic is known
        yield Input(
            self.topic, placeholder="topic", id="topic", validators=[VALID_NAME], classes=first
        )
        yield Label("Body")
        yield Input(
            placeholder="message body", id="body", classes=FIRST_FOCUS if self.topic else ""
        )

    def answer(self) -> PublishRequest | str:
        """The request, or what is wrong."""
        node, topic = self.chosen_node(), self.value("topic")
        body = self.query_one("#body", Input).value
        if not node:
            return "no nsqd to publish through"
        if not is_valid_name(topic):
            return f"invalid topic name {topic!r}"
        if not body:
            return "nsqd refuses empty messages"
        return PublishRequest(node, topic, body.encode())
