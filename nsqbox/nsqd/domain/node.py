"""What a topic or a channel needs from the nsqd that owns it.

Topics and channels hold a :class:`Node` (nsqd's ``*NSQD`` in Go) and callbacks for
what concerns their parent (notify, delete), never the parent itself: the domain
imports one way, ``nsqd -> topic -> channel -> node``. :class:`~.nsqd.NSQD`
implements :class:`Node`; unit tests use a small fake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import logging
    import random

    from .backend import BackendQueue
    from .journal import Journal
    from .message import Message
    from .options import NSQDOptions
    from .quantile import Quantile


class Node(Protocol):
    """The services of an nsqd that its topics and channels use."""

    #: What a publish to a topic fails with (an active fault), or None: topics
    #: check it once per publish command.
    publish_fault: Callable[[str], str | None] | None
    #: The journal its topics and channels record in (None: ``--journal-size=0``).
    journal: Journal | None

    @property
    def options(self) -> NSQDOptions:
        """The node's options (queue sizes, timeouts, limits, node id)."""
        ...

    @property
    def random(self) -> random.Random:
        """The node's own random numbers (sample rates)."""
        ...

    @property
    def logger(self) -> logging.Logger:
        """Where topics and channels log."""
        ...

    @property
    def health_error(self) -> str | None:
        """The last backend failure, while unhealthy."""
        ...

    def now(self) -> float:
        """The server clock, in seconds (deadlines of in-flight and deferred messages)."""
        ...

    def wall_ns(self) -> int:
        """Broker wall time, ns since the epoch (message timestamps)."""
        ...

    def new_backend(self, name: str, ephemeral: bool) -> BackendQueue:
        """The spill queue for a topic (``name``) or channel (``topic:channel``)."""
        ...

    def write_to_backend(self, backend: BackendQueue, msgs: list[Message]) -> bool:
        """Spill messages in one write; False (and the node unhealthy) when they could not be
        stored."""
        ...

    def flush_backend(self, name: str, backend: BackendQueue, msgs: list[Message]) -> None:
        """Shutdown: write ``msgs`` to ``backend`` and close it, logging failures."""
        ...

    def new_e2e_latency(self) -> Quantile | None:
        """A latency tracker, when the node measures end-to-end latency."""
        ...

    def persist_metadata(self) -> None:
        """Record the topics, channels and their pause state (nsqd.dat)."""
        ...

    def restored_deadlines(self, topic: str, channel: str) -> dict[bytes, int]:
        """Deferred deadlines (wall-clock ns by message id) saved for this channel at exit."""
        ...

    def save_deferred(
        self, topic: str, channel: str, msgs: list[Message], restored: dict[bytes, int]
    ) -> None:
        """Shutdown: remember when a channel's deferred messages (and ``restored``) are due."""
        ...
