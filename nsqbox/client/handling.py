"""Running the user's handler on a message, and answering for it (guide, Message Handling).

Shared by the trio consumer and the blocking one. A handler that returns has
processed the message: FIN. One that raises has failed: REQ, with the delay
computed from the attempts and a failure counted for backoff. Either way,
unless the handler answered the message itself or took over with
:meth:`~nsqbox.client.Message.disable_auto_response`. A message delivered more
than ``max_attempts`` times never reaches the handler: it goes to the give-up
callback and is finished, so a poison message cannot loop forever.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

from .message import Message

if TYPE_CHECKING:  # the blocking client uses this module without trio
    import trio

__all__ = ["GiveUpCallback", "Handler", "HandlerRunner"]

log = logging.getLogger("nsqbox.client")

#: A plain function (run inline, per message) or an ``async def`` (run in worker tasks).
Handler = Callable[[Message], Awaitable[None]] | Callable[[Message], object]
#: Receives each message delivered more than ``max_attempts`` times.
GiveUpCallback = Callable[[Message], object]


def _log_failure(message: Message, exc: Exception) -> None:
    """A handler raised: the documented way to requeue, so one INFO line (traceback at DEBUG)."""
    then = "requeued" if message.auto_response else "left to the handler to answer"
    log.info("handler raised %r on message %s: %s", exc, message.id.decode(), then)
    log.debug("handler traceback for message %s", message.id.decode(), exc_info=exc)


class HandlerRunner:
    """One consumer's handler, its give-up rule, and the auto-answers."""

    def __init__(
        self, handler: Handler, *, max_attempts: int, on_give_up: GiveUpCallback | None
    ) -> None:
        #: True for an ``async def`` handler.
        self.is_async = inspect.iscoroutinefunction(handler)
        # one typed view per kind, so the per-message path casts nothing
        self._sync: Callable[[Message], object] = handler
        self._async = cast(Callable[[Message], Awaitable[None]], handler)
        self.max_attempts = max_attempts
        self._on_give_up = on_give_up
        #: Messages handed to the give-up callback so far.
        self.given_up = 0

    def gave_up(self, message: Message) -> bool:
        """Past ``max_attempts``: the give-up callback, then FIN; True if so."""
        if not self.max_attempts or message.attempts <= self.max_attempts:
            return False
        self.given_up += 1
        # with a give-up callback this is the documented path; without one the message is dropped
        log.log(
            logging.INFO if self._on_give_up is not None else logging.WARNING,
            "giving up on message %s after %d attempts",
            message.id.decode(),
            message.attempts,
        )
        if self._on_give_up is not None:
            try:
                self._on_give_up(message)
            except Exception:
                log.exception("give-up callback failed on message %s", message.id.decode())
        message.finish()
        return True

    def run(self, message: Message) -> None:
        """Handle ``message`` with the plain-function handler."""
        if self.gave_up(message):
            return
        try:
            self._sync(message)
        except Exception as exc:
            _log_failure(message, exc)
            if message.auto_response:
                message.requeue()
        else:
            if message.auto_response:
                message.finish()

    async def run_async(self, message: Message) -> None:
        """Handle ``message`` with the ``async def`` handler."""
        if self.gave_up(message):
            return
        try:
            await self._async(message)
        except Exception as exc:
            _log_failure(message, exc)
            if message.auto_response:
                message.requeue()
        else:
            if message.auto_response:
                message.finish()

    async def worker(self, messages: trio.MemoryReceiveChannel[Message]) -> None:
        """Handle messages from ``messages`` one at a time until the channel closes."""
        async for message in messages:
            await self.run_async(message)
