"""One nsqd that can be stopped, crashed and started again: :class:`NodeRunner`.

The box (``nsqbox up``) and the test plugin's clusters run each nsqd through one,
so a node can go down and come back while the rest of the box keeps running: a
restart binds the ports the first start bound (port 0 included) and reopens the
same data path. A stop is nsqd's clean shutdown (everything persisted); a crash
is a SIGKILL's (see :meth:`~.domain.nsqd.NSQD.crash` for what survives).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

import trio

from ..net.addresses import format_address
from .domain.nsqd import NSQD
from .domain.options import NSQDOptions
from .lookup import lookup_service
from .server import NSQDAddresses, serve_nsqd

__all__ = ["REGISTER_TIMEOUT", "NodeRunner", "Serve", "wait_registered"]

#: How long a start waits for the node to be registered with every nsqlookupd.
REGISTER_TIMEOUT = 10.0

#: Runs an nsqd until cancelled, reporting its addresses (serve_nsqd, or a wrapper of it).
Serve = Callable[..., Awaitable[None]]


async def wait_registered(nsqds: Sequence[NSQD]) -> None:
    """Wait until each nsqd's lookupd connections have acknowledged everything sent so far.

    For code given only the nodes; with the :class:`~.server.NSQDAddresses` a start
    reported, ``addresses.lookup.wait_synced()`` is the same wait.
    """
    for nsqd in nsqds:
        service = lookup_service(nsqd)
        if service is not None:
            await service.wait_synced()


class NodeRunner:
    """One nsqd served in ``nursery`` in a cancel scope of its own.

    Use it on the nursery's trio loop. ``serve(options, task_status=...)`` runs
    the node (:func:`~.server.serve_nsqd` by default). :attr:`running` is the
    live node's addresses, None while it is down; :attr:`state` says
    ``"running"``, ``"stopped"`` or ``"crashed"``.
    """

    def __init__(
        self, nursery: trio.Nursery, options: NSQDOptions, *, serve: Serve = serve_nsqd
    ) -> None:
        self._nursery = nursery
        self.options = options
        self._serve = serve
        self.running: NSQDAddresses | None = None
        self.state = "stopped"
        self._scope: trio.CancelScope | None = None
        self._stopped: trio.Event | None = None
        self._bound = False
        #: One change at a time: a stop waits for a start under way, and so on.
        self._changing = trio.Lock()

    @property
    def nsqd(self) -> NSQD | None:
        """The live NSQD, None while the node is down."""
        return self.running.nsqd if self.running is not None else None

    async def _run(self, *, task_status: trio.TaskStatus[NSQDAddresses]) -> None:
        scope, stopped = trio.CancelScope(), trio.Event()
        self._scope, self._stopped = scope, stopped
        try:
            with scope:
                await self._serve(dataclasses.replace(self.options), task_status=task_status)
        finally:
            stopped.set()

    async def start(self, *, register: bool = True) -> NSQDAddresses:
        """Start the node (nothing when it runs); its addresses.

        Later starts bind what the first one bound. With ``register``, returns once
        the node is registered with every nsqlookupd (``REGISTER_TIMEOUT`` at most).
        """
        async with self._changing:
            if self.running is not None:
                return self.running
            started: NSQDAddresses = await self._nursery.start(self._run)
            self.running, self.state = started, "running"
            if not self._bound:
                self._bound = True
                self.options = _bound_options(self.options, started)
            if register and started.lookup is not None:
                with trio.fail_after(REGISTER_TIMEOUT):
                    await started.lookup.wait_synced()
            return started

    async def stop(self) -> None:
        """Shut the node down cleanly (it persists its messages); idempotent."""
        async with self._changing:
            await self._end("stopped")

    async def crash(self) -> None:
        """Stop the node as a SIGKILL would (:meth:`~.domain.nsqd.NSQD.crash`); idempotent."""
        async with self._changing:
            if self.running is not None:
                self.running.nsqd.crash()
            await self._end("crashed")

    async def _end(self, state: str) -> None:
        scope, stopped = self._scope, self._stopped
        was_running = self.running is not None
        self.running = None
        if scope is not None and stopped is not None:
            scope.cancel()
            await stopped.wait()
        self._scope = self._stopped = None
        if was_running:
            self.state = state


def _bound_options(options: NSQDOptions, bound: NSQDAddresses) -> NSQDOptions:
    """``options`` with the addresses a start bound, so the next start binds them again."""
    return dataclasses.replace(
        options,
        tcp_address=format_address(bound.tcp),
        http_address=format_address(bound.http) if bound.http is not None else "",
        https_address=format_address(bound.https) if bound.https is not None else "",
        broadcast_tcp_port=bound.nsqd.options.broadcast_tcp_port,
        broadcast_http_port=bound.nsqd.options.broadcast_http_port,
    )
