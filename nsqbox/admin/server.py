"""serve_admin: the admin service's HTTP listener on trio, and ``nsqbox admin``'s command line.

httpx (the cluster client) is imported, and the client made, on the first request that asks the
cluster, so a box that starts several services answers ``/ping`` as early as it can. Shutdown is
cancellation.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from .. import program_version
from ..go.flags import parse_or_exit
from ..http.server import serve_http
from ..net.listeners import bound_address, open_listeners
from ..process.logs import configure_logging
from ..process.service import fatal, run_until_signalled
from .options import AdminOptions, ConfigError, parse_admin_args

if TYPE_CHECKING:
    import httpx

    from .control import NodeControl

__all__ = ["AdminAddresses", "main", "serve_admin", "version_string"]

log = logging.getLogger("nsqbox.admin")

_PREFIX = "[nsqadmin] "
# How long closing the cluster client may take at shutdown.
_CLOSE_TIMEOUT = 2.0


@dataclass(frozen=True)
class AdminAddresses:
    """What serve_admin reports once it listens."""

    http: tuple[str, int]


async def serve_admin(
    options: AdminOptions,
    *,
    control: NodeControl | None = None,
    task_status: trio.TaskStatus[AdminAddresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the admin ``/api`` until cancelled; report the bound address through ``task_status``.

    ``control`` (what ``nsqbox up`` gives) restarts, crashes and starts the box's nodes for
    ``POST /api/faults/restart|crash|start``; without it those answer ``501``.

    Raises ValueError for options nsqadmin refuses (no cluster addresses, or both kinds).
    """
    options.validate()
    listeners = await open_listeners(options.http_address, "nsqadmin", "HTTP")
    bound = bound_address(listeners)
    try:
        from .clusterinfo import ClusterInfo, make_http_client
        from .routes.nsqadmin import build_router
    except BaseException:
        for listener in listeners:
            await listener.aclose()
        raise
    made: list[httpx.AsyncClient] = []

    def client() -> httpx.AsyncClient:
        """The cluster client, made on the first request that needs it (httpx loads then)."""
        made.append(
            make_http_client(
                options.http_client_connect_timeout,
                options.http_client_request_timeout,
                addresses=[*options.lookupd_http_addresses, *options.nsqd_http_addresses],
            )
        )
        return made[-1]

    try:
        async with trio.open_nursery() as nursery:
            router = build_router(ClusterInfo(client), options, control)
            await nursery.start(serve_http, router, listeners)
            log.info("HTTP: listening on %s:%d", *bound)
            task_status.started(AdminAddresses(http=bound))
    finally:
        with trio.move_on_after(_CLOSE_TIMEOUT) as scope:
            scope.shield = True
            for made_client in made:
                await made_client.aclose()


def version_string() -> str:
    """What ``-version`` prints, shaped like nsqadmin's own line."""
    return program_version("nsqadmin")


def _fatal(message: str, prefix: str = _PREFIX) -> int:
    return fatal(log, message, prefix)


def main(argv: Sequence[str]) -> int:
    """``nsqbox admin [flags]``: the admin service alone, with nsqadmin's flags."""
    try:
        command = parse_or_exit(lambda: parse_admin_args(argv))
    except ConfigError as exc:
        return _fatal(str(exc))
    if isinstance(command, int):
        return command
    if command.show_version:
        print(version_string())
        return 0
    if command.args:
        print(f"nsqbox admin: unexpected argument {command.args[0]!r}", file=sys.stderr)
        return 2
    options = command.options
    configure_logging(options.log_level, options.log_prefix)
    log.info("%s", version_string())
    failure: BaseException | None = None
    try:
        trio.run(run_until_signalled, serve_admin, options, log)
    except* (OSError, ValueError) as group:
        failure = group.exceptions[0]
    if failure is not None:
        return _fatal(f"failed to instantiate nsqadmin - {failure}", options.log_prefix)
    return 0
