"""What the stand-alone service commands (``nsqbox lookupd``, ``nsqbox admin``) share."""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .logs import configure_logging


async def run_until_signalled(
    serve: Callable[..., Awaitable[Any]], options: object, log: logging.Logger
) -> None:
    """Start ``serve(options, task_status=...)``; stop it on the first SIGINT or SIGTERM."""

    async def start(nursery: trio.Nursery) -> None:
        await nursery.start(serve, options)

    await serve_until_signalled(start, log)


async def serve_until_signalled(
    start: Callable[[trio.Nursery], Awaitable[object]], log: logging.Logger
) -> None:
    """Run what ``start(nursery)`` starts until the first SIGINT or SIGTERM, then stop it.

    The signals are received before ``start`` runs, so one that arrives during start-up
    is not lost. After the first, a second SIGINT (Ctrl-C) interrupts a slow shutdown,
    while further SIGTERMs are absorbed until everything has stopped, as nsqd does:
    supervisors and ``timeout`` may send TERM twice, and the shutdown must get to
    write every queue.
    """
    # Under the receiver, SIGTERM is ignored: the receiver's handler replaces that while it
    # listens, and once it closes, the TERMs it still holds (trio redelivers them) and any
    # later ones fall on SIG_IGN until the service has stopped.
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        async with trio.open_nursery() as nursery:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                await start(nursery)
                async for signum in signals:
                    log.debug("%s: shutting down", signal.Signals(signum).name)
                    break
            nursery.cancel_scope.cancel()
    finally:
        signal.signal(signal.SIGTERM, previous)


def fatal(log: logging.Logger, message: str, prefix: str) -> int:
    """Log ``message`` as NSQ's logFatal does; the exit status (1)."""
    configure_logging("info", prefix)
    log.critical("%s", message)
    return 1
