"""Message: one delivery, and the three ways to answer it (FIN, REQ, TOUCH).

The guide (Message Handling): the handler finishes a message it processed,
requeues one it failed on (the client computes the delay from the attempts when
none is given), and touches one that needs more time. The client never touches
on the user's behalf. Answers are buffered on the connection and go out in the
next write, so a batch of messages costs one write, not one per answer.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Message", "Responder"]


class Responder(Protocol):
    """What a message answers through: the connection it came on."""

    def _finish(self, message: Message) -> None: ...

    def _requeue(self, message: Message, delay: float | None, backoff: bool) -> None: ...

    def _touch(self, message: Message) -> None: ...


class Message:
    """A message delivered to a consumer.

    ``id`` is the 16-byte hex id, ``body`` the payload, ``timestamp`` the
    publish time in nanoseconds since the epoch, ``attempts`` how many times
    nsqd has delivered it (1 on the first delivery), ``nsqd_address`` the
    ``host:port`` it came from.
    """

    __slots__ = (
        "_auto_response",
        "_responded",
        "_responder",
        "attempts",
        "body",
        "id",
        "nsqd_address",
        "timestamp",
    )

    def __init__(
        self,
        msg_id: bytes,
        body: bytes,
        timestamp: int,
        attempts: int,
        responder: Responder,
        nsqd_address: str = "",
    ) -> None:
        self.id = msg_id
        self.body = body
        self.timestamp = timestamp
        self.attempts = attempts
        self.nsqd_address = nsqd_address
        self._responder = responder
        self._responded = False
        self._auto_response = True

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, attempts={self.attempts}, body={self.body[:32]!r})"

    @property
    def responder(self) -> Responder:
        """What the message answers through: the consumer (connection) it came on.

        nsqd accepts FIN, REQ and TOUCH for a message only on that connection.
        """
        return self._responder

    @property
    def has_responded(self) -> bool:
        """True once finished or requeued."""
        return self._responded

    @property
    def auto_response(self) -> bool:
        """Whether the consumer finishes (or requeues) the message when the handler returns."""
        return self._auto_response

    def disable_auto_response(self) -> None:
        """Take over answering: the handler's return no longer finishes the message.

        For handlers that batch messages, or hand them to other tasks, and answer later.
        """
        self._auto_response = False

    def finish(self) -> None:
        """FIN: processed; nsqd may forget it. Does nothing if already answered."""
        if self._responded:
            return
        self._responded = True
        self._responder._finish(self)

    def requeue(self, delay: float | None = None, *, backoff: bool = True) -> None:
        """REQ: put it back after ``delay`` seconds. Does nothing if already answered.

        Without a delay the consumer uses ``requeue_delay * attempts`` (capped at
        ``max_requeue_delay``). ``backoff=False`` requeues without counting a
        failure for the consumer's backoff.
        """
        if self._responded:
            return
        if delay is not None and delay < 0:
            raise ValueError("delay must be >= 0")
        self._responded = True
        self._responder._requeue(self, delay, backoff)

    def touch(self) -> None:
        """TOUCH: reset nsqd's in-flight timeout. Does nothing once answered."""
        if self._responded:
            return
        self._responder._touch(self)
