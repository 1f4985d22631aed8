"""What the stand-alone service commands (``nsqbox lookupd``, ``nsqbox admin``) share."""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable
from platform import python_version
from typing import Any

import trio

from . import NSQ_VERSION, __version__
from .logs import configure_logging


def service_version(program: str) -> str:
    """``-version``'s line, shaped like the NSQ program's own for scripts that parse it."""
    return f"{program} v{NSQ_VERSION} (built w/nsqbox {__version__}, Python {python_version()})"


async def run_until_signalled(
    serve: Callable[..., Awaitable[Any]], options: object, log: logging.Logger
) -> None:
    """Start ``serve(options, task_status=...)`` and stop it on the first SIGINT or SIGTERM.

    The receiver listens before the service starts, so an early signal is not lost, and
    is left after the first one, so a second Ctrl-C interrupts a slow shutdown.
    """
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            await nursery.start(serve, options)
            async for signum in signals:
                log.info("%s: shutting down", signal.Signals(signum).name)
                break
        nursery.cancel_scope.cancel()


def fatal(log: logging.Logger, message: str, prefix: str) -> int:
    """Log ``message`` as NSQ's logFatal does; the exit status (1)."""
    configure_logging("info", prefix)
    log.critical("%s", message)
    return 1
