"""A tail on a topic with no channel: the one case where watching a topic takes its messages.

nsqd's topic keeps what is published while it has no channel (its message pump waits for
one). The first channel created gets all of it, so a tail's own channel, if it is the first,
receives and finishes those messages, and they are gone for any channel created later. The
TUI asks before such a tail (and refuses it in read-only mode); ``nsqbox tail`` says so on
stderr. Both decide with :func:`first_channel_warning` on the topic's cluster-wide row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .stats import TopicStats

__all__ = ["first_channel_warning"]


def first_channel_warning(topic: TopicStats | None) -> str | None:
    """What to say before tailing ``topic`` (summed over its nodes), or None when tailing it
    takes nothing: it has a channel, or it is on no node (a tail creates it empty)."""
    if topic is None or topic.channels:
        return None
    return (
        f"topic {topic.topic_name} has no channel: tailing it would consume its "
        f"{topic.depth:,} buffered messages"
    )
