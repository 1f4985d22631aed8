"""Where a view asks to go: small messages the app answers by showing the view.

A view posts :class:`OpenTopic`, :class:`OpenChannel` or :class:`OpenNode` (when Enter selects a
row); the message bubbles up to the app (:class:`~.app.AdminApp`), which pushes the matching
screen. So the views never import one another: only the app knows every view.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

__all__ = ["OpenChannel", "OpenJourney", "OpenMessages", "OpenNode", "OpenTopic", "OpenTroubles"]


@dataclass
class OpenTopic(Message):
    """Show the Topic view of ``topic``."""

    topic: str


@dataclass
class OpenChannel(Message):
    """Show the Channel view of ``channel`` of ``topic``."""

    topic: str
    channel: str


@dataclass
class OpenNode(Message):
    """Show the Node view of ``node`` (its HTTP address)."""

    node: str


@dataclass
class OpenMessages(Message):
    """Show the Messages view of ``channel`` of ``topic`` (None: the topic's own messages)."""

    topic: str
    channel: str | None = None


@dataclass
class OpenJourney(Message):
    """Show the Journey view of message ``msg_id`` (``crumbs``: where it was opened from)."""

    msg_id: str
    crumbs: str = ""


@dataclass
class OpenTroubles(Message):
    """Show the Troubles view of ``channel`` of ``topic``."""

    topic: str
    channel: str
