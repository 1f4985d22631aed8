"""serve_lookupd: nsqlookupd's TCP and HTTP listeners in one trio task tree, and its CLI.

Shutdown is cancellation: cancelling the surrounding scope closes both
listeners and every connection.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from functools import partial

import msgspec
import trio

from .. import program_version
from ..broker.clock import BrokerClock
from ..http.server import serve_http
from ..net.addresses import format_address
from ..net.listeners import ListenerGroup, bound_address, open_listeners, serve_tcp
from ..process.logs import configure_logging
from ..process.service import fatal, run_until_signalled
from .clock import LookupdTimers
from .core import NSQLookupd
from .options import LookupdOptions
from .protocol_v1 import handle_v1_connection
from .routes.nsqlookupd import build_router

log = logging.getLogger("nsqbox.lookupd")

__all__ = ["LookupdAddresses", "main", "serve_lookupd", "version_string"]

_PREFIX = "[nsqlookupd] "


class LookupdAddresses(msgspec.Struct, frozen=True):
    """What serve_lookupd reports once it listens; ``lookupd`` is the live state."""

    tcp: tuple[str, int]
    http: tuple[str, int]
    lookupd: NSQLookupd


async def serve_lookupd(
    options: LookupdOptions,
    *,
    clock: BrokerClock | None = None,
    task_status: trio.TaskStatus[LookupdAddresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run an nsqlookupd until cancelled; report the bound addresses through ``task_status``.

    ``clock`` is its box's broker clock (made on ``trio.current_time``); real time by default.
    """
    lookupd = NSQLookupd(options, clock=trio.current_time, broker=clock)
    timers = LookupdTimers(lookupd)  # a manual clock's jumps keep live producers active
    tcp_listeners = await open_listeners(options.tcp_address, "nsqlookupd", "TCP")
    try:
        http_listeners = await open_listeners(options.http_address, "nsqlookupd", "HTTP")
    except BaseException:
        for listener in tcp_listeners:
            await listener.aclose()
        raise
    tcp, http = bound_address(tcp_listeners), bound_address(http_listeners)
    lookupd.tcp_port, lookupd.http_port = tcp[1], http[1]

    async def handle(stream: trio.SocketStream) -> None:
        await handle_v1_connection(lookupd, stream)

    group = ListenerGroup(tcp_listeners + http_listeners)  # they stop listening together
    try:
        async with trio.open_nursery() as nursery:
            serve = partial(serve_http, group=group)
            await nursery.start(serve, build_router(lookupd), http_listeners)
            await nursery.start(partial(serve_tcp, group=group), tcp_listeners, handle)
            # nsqlookupd's lines, in its order: harnesses wait for them
            log.info("HTTP: listening on %s", format_address(http))
            log.info("TCP: listening on %s", format_address(tcp))
            lookupd.broker.attach(timers)
            task_status.started(LookupdAddresses(tcp=tcp, http=http, lookupd=lookupd))
    finally:
        group.close()
        lookupd.broker.detach(timers)
        log.info("TCP: closing %s", format_address(tcp))
        log.info("HTTP: closing %s", format_address(http))


def version_string() -> str:
    """What ``-version`` prints, shaped like nsqlookupd's own line."""
    return program_version("nsqlookupd")


def _fatal(message: str, prefix: str = _PREFIX) -> int:
    return fatal(log, message, prefix)


def main(argv: Sequence[str]) -> int:
    """``nsqbox lookupd [flags]``: nsqlookupd's command line; returns the exit status."""
    from ..go.flags import parse_or_exit
    from .config import ConfigError, parse_lookupd_args

    try:
        command = parse_or_exit(lambda: parse_lookupd_args(argv))
    except ConfigError as exc:
        return _fatal(str(exc))
    if isinstance(command, int):
        return command
    if command.show_version:
        print(version_string())
        return 0
    if command.args:
        # nsqlookupd ignores these, and with them every flag after them; refusing is kinder.
        print(
            f"nsqlookupd: unexpected argument {command.args[0]!r}; "
            "flags must come first and boolean flags take values as -flag=false",
            file=sys.stderr,
        )
        return 2
    options = command.options
    configure_logging(options.log_level, options.log_prefix)
    log.info("%s", version_string())
    failure: BaseException | None = None
    try:
        trio.run(run_until_signalled, serve_lookupd, options, log)
    except* (OSError, ValueError) as group:  # a listener could not bind, or a bad address
        failure = group.exceptions[0]
    if failure is not None:
        return _fatal(f"failed to instantiate nsqlookupd - {failure}", options.log_prefix)
    return 0
