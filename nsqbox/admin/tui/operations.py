"""The actions a view offers on its selected row: pause, empty, delete, tombstone, create,
publish and tail, each behind a confirmation or a form where it matters.

A view says what its selection is with :meth:`OperableScreen.target` (a :class:`Target`: a
topic, a channel of it, maybe one node) and binds the keys of the actions it offers; the
actions themselves live here, once. ``--read-only`` hides every action that changes the
cluster (:data:`MUTATING`); an action with nothing selected shows dimmed in the footer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.binding import Binding

from ...process.terminal_text import visible
from ..first_channel import first_channel_warning
from .backend import Backend, Outcome
from .base import ClusterScreen
from .modals import ConfirmScreen, CreateScreen, PublishRequest, PublishScreen
from .tail import TailScreen, TailSource

__all__ = ["ACTION_BINDINGS", "MUTATING", "OperableScreen", "Target"]

#: Actions that change the cluster, hidden by ``--read-only``.
MUTATING = frozenset({"pause", "empty", "delete", "tombstone", "create", "publish"})

#: The keys of every action (k9s and nsqadmin habits); views pick the ones they offer.
ACTION_BINDINGS = {
    "pause": Binding("p", "pause", "Pause/Unpause"),
    "empty": Binding("e", "empty", "Empty"),
    "delete": Binding("ctrl+d", "delete", "Delete"),
    "tombstone": Binding("T", "tombstone", "Tombstone"),
    "create": Binding("c", "create", "Create"),
    "publish": Binding("P", "publish", "Publish"),
    "tail": Binding("l", "tail", "Tail"),
}

#: An action against the cluster, given the backend.
_Call = Callable[[Backend], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class Target:
    """What an action applies to: a topic, or a channel of it; ``node`` for tombstones."""

    topic: str
    channel: str | None = None
    #: A node (HTTP address) picked in a per-node table: where a tombstone applies.
    node: str | None = None
    paused: bool = False
    depth: int = 0

    @property
    def label(self) -> str:
        """``topic orders`` or ``channel billing of orders``."""
        if self.channel is None:
            return f"topic {self.topic}"
        return f"channel {self.channel} of {self.topic}"


class OperableScreen(ClusterScreen):
    """A view whose selected row can be acted on."""

    def target(self) -> Target | None:
        """What is selected, or None."""
        return None

    def binding_state(self) -> object:
        """Whether there is a selection (and a node in it) decides which actions are dimmed."""
        target = self.target()
        return (target is None, target is None or target.node is None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide changes in read-only mode; dim actions that need a selection without one."""
        if action in MUTATING and self.host.read_only:
            return False
        if action in {"pause", "empty", "delete", "tail"} and self.target() is None:
            return None
        if action == "tombstone":
            target = self.target()
            return None if target is None or target.node is None else True
        return True

    def _confirm_then(
        self, title: str, message: str, confirm: str, label: str, call: _Call, *, danger: bool
    ) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.host.perform(label, call)

        self.app.push_screen(ConfirmScreen(title, message, confirm, danger=danger), answered)

    # -- pause, empty, delete, tombstone ------------------------------------------------------

    def action_pause(self) -> None:
        """Pause the selection (after confirming), or unpause it if it is paused."""
        t = self.target()
        if t is None:
            return
        topic, channel = t.topic, t.channel
        if t.paused:
            if channel is None:
                self.host.perform(f"unpause {t.label}", lambda b: b.unpause_topic(topic))
            else:
                self.host.perform(f"unpause {t.label}", lambda b: b.unpause_channel(topic, channel))
            return
        if channel is None:
            message = "Messages stay at the topic; its channels get none until it is unpaused."
            call: _Call = lambda b: b.pause_topic(topic)  # noqa: E731 - one-line closures
        else:
            message = "Its clients get no messages until it is unpaused; messages wait in it."
            call = lambda b: b.pause_channel(topic, channel)  # noqa: E731
        self._confirm_then(
            f"Pause {t.label}?", message, "Pause", f"pause {t.label}", call, danger=False
        )

    def action_empty(self) -> None:
        """Drop the selection's queued messages, after confirming."""
        t = self.target()
        if t is None:
            return
        topic, channel = t.topic, t.channel
        if channel is None:
            message = (
                f"This drops the {t.depth:,} messages queued at the topic itself, on every "
                "node (its channels keep theirs). It cannot be undone."
            )
            call: _Call = lambda b: b.empty_topic(topic)  # noqa: E731
        else:
            message = (
                f"This drops the channel's {t.depth:,} queued messages, and its in-flight and "
                "deferred ones, on every node. It cannot be undone."
            )
            call = lambda b: b.empty_channel(topic, channel)  # noqa: E731
        self._confirm_then(
            f"Empty {t.label}?", message, "Empty", f"empty {t.label}", call, danger=True
        )

    def action_delete(self) -> None:
        """Delete the selection everywhere, after confirming."""
        t = self.target()
        if t is None:
            return
        topic, channel = t.topic, t.channel
        if channel is None:
            message = (
                "This deletes the topic, its channels and every message they hold, on every "
                "node, and removes it from lookupd. Its clients are disconnected."
            )
            call: _Call = lambda b: b.delete_topic(topic)  # noqa: E731
        else:
            message = (
                "This deletes the channel and every message it holds, on every node. "
                "Its clients are disconnected."
            )
            call = lambda b: b.delete_channel(topic, channel)  # noqa: E731
        self._confirm_then(
            f"Delete {t.label}?", message, "Delete", f"delete {t.label}", call, danger=True
        )

    def action_tombstone(self) -> None:
        """Tombstone the selected topic on the selected node, after confirming."""
        t = self.target()
        if t is None or t.node is None:
            return
        topic, node = t.topic, t.node
        message = (
            f"lookupd stops listing {node} as a producer of {topic}, and the topic is "
            "deleted on that node, with its channels and messages. Consumers that find "
            "nodes through lookupd stop connecting to it for this topic."
        )
        self._confirm_then(
            f"Tombstone topic {topic} on {node}?",
            message,
            "Tombstone",
            f"tombstone topic {topic} on {node}",
            lambda b: b.tombstone_topic(topic, node),
            danger=True,
        )

    # -- create and publish -------------------------------------------------------------------

    def action_create(self) -> None:
        """Create a topic (or, in a topic's view, a channel)."""
        t = self.target()
        in_topic = self.creates_channels and t is not None

        def created(answer: tuple[str, str] | None) -> None:
            if answer is None:
                return
            topic, channel = answer
            label = f"create channel {channel} of {topic}" if channel else f"create topic {topic}"
            self.host.perform(label, lambda b: b.create_topic(topic, channel))

        topic = t.topic if in_topic and t is not None else ""
        self.app.push_screen(CreateScreen(topic, channel_required=in_topic), created)

    #: Whether ``c`` creates a channel of the selected topic (a topic's view) or a topic.
    creates_channels = False

    def action_publish(self) -> None:
        """Publish a message through one nsqd's HTTP ``/pub``."""
        snapshot = self.host.snapshot
        t = self.target()
        nodes = [n.name for n in snapshot.nodes if n.ok] if snapshot is not None else []
        node = ""
        if t is not None and snapshot is not None:
            node = t.node or next((n.name for n in snapshot.nodes if n.topic(t.topic)), "")

        def publish(request: PublishRequest | None) -> None:
            if request is None:
                return
            label = f"publish to topic {request.topic} through {request.node}"
            self.host.perform(label, lambda b: b.publish(request.node, request.topic, request.body))

        self.app.push_screen(PublishScreen(nodes, node, t.topic if t else ""), publish)

    # -- tail ---------------------------------------------------------------------------------

    def action_tail(self) -> None:
        """Watch the topic's messages through an ephemeral channel of its own.

        A topic without channels keeps its messages for the first channel, which would then
        be the tail's: that needs a confirmation (and is refused in read-only mode).
        """
        snapshot = self.host.snapshot
        t = self.target()
        if t is None or snapshot is None:
            return
        sources = [
            TailSource(n.name, n.producer.tcp_address) for n in snapshot.nodes if n.topic(t.topic)
        ]
        if not sources:
            self.notify(visible(f"no node has topic {t.topic}"), severity="warning", markup=False)
            return
        screen = TailScreen(t.topic, sources)
        row = snapshot.topic(t.topic)
        warning = first_channel_warning(row)
        if row is not None and warning is not None:
            if self.host.read_only:
                self.notify(
                    visible(f"{warning} (not in read-only mode)"),
                    severity="warning",
                    markup=False,
                )
                return

            def answered(yes: bool | None) -> None:
                if yes:
                    self.app.push_screen(screen)

            message = (
                f"Topic {t.topic} has no channels, so it keeps its messages ({row.depth:,} "
                "now) for the first channel. The tail's channel would be that channel: it "
                "receives and finishes those messages, and they are gone for any channel "
                "created later."
            )
            self.app.push_screen(
                ConfirmScreen(f"Tail {t.label}?", message, "Tail anyway", danger=True), answered
            )
            return
        self.app.push_screen(screen)
