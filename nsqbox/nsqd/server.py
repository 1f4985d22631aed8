"""serve_nsqd: bind the listeners, run the TCP protocol and the periodic loops.

Listeners: TCP (protocol V2), HTTP, and HTTPS when TLS is configured
(``--tls-cert``/``--tls-key`` and ``--https-address``, as nsqd). With
``--tls-required=true`` the plain HTTP listener answers every request
``403 TLS_REQUIRED``; ``tcp-https`` requires TLS on TCP only.

Start-up binds every listener before any is served, and at shutdown they stop
listening together, TCP first, before anything drains (:class:`ListenerGroup`), as
nsqd does: a harness that waits for one port finds the others in the same state.

Shutdown is cancellation: when the surrounding scope is cancelled the listeners
close, every connection ends, and the NSQD persists what it holds, unless
:meth:`NSQD.crash` was called first (a crash persists nothing).
"""

from __future__ import annotations

import logging
import ssl
from contextlib import AbstractAsyncContextManager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .. import program_version
from ..broker.clock import BrokerClock
from ..http import serve_http
from ..net.addresses import format_address
from ..net.listeners import ListenerGroup, bound_address, open_listeners, serve_tcp
from ..wire.frames import MAGIC_V2, FrameType, encode_frame
from .dirlock import DirLock
from .domain.clock import NodeTimers
from .domain.nsqd import NSQD
from .domain.options import NSQDOptions
from .lookup import LookupService
from .routes.nsqd import make_app
from .routes.tap import NodeTaps
from .statsd import statsd_loop
from .tcp.protocol_v2 import new_client
from .tcp.tls import server_context

if TYPE_CHECKING:
    from collections.abc import Callable

    from .tcp.auth import AuthClient

logger = logging.getLogger("nsqbox.nsqd")


class NSQDAddresses(msgspec.Struct, frozen=True):
    """What serve_nsqd reports once it listens; ``nsqd`` is the live container."""

    tcp: tuple[str, int]
    http: tuple[str, int] | None
    nsqd: NSQD
    #: The HTTPS listener (None without TLS or with ``--https-address=""``).
    https: tuple[str, int] | None = None
    #: Its registration with the lookupds (running while the node runs).
    lookup: LookupService | None = None


async def handle_tcp(
    nsqd: NSQD,
    stream: trio.SocketStream,
    *,
    tls_context: ssl.SSLContext | None = None,
    auth: AuthClient | None = None,
) -> None:
    """One TCP connection: read the magic, then speak protocol V2 until it ends.

    ``tls_context`` is offered to clients that negotiate TLS; ``auth`` answers AUTH.
    """
    try:
        remote = stream.socket.getpeername()
    except OSError:
        await trio.aclose_forcefully(stream)
        return
    peer = format_address((str(remote[0]), int(remote[1])))  # host:port, as nsqd logs it
    try:
        buf = b""
        while len(buf) < 4:
            with trio.move_on_after(nsqd.options.client_timeout):
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                buf += chunk
                continue
            break
        if len(buf) < 4:
            await trio.aclose_forcefully(stream)
            return
        if buf[:4] != MAGIC_V2:
            logger.error("client(%s) bad protocol magic %r", peer, buf[:4])
            with trio.move_on_after(1):
                await stream.send_all(encode_frame(FrameType.ERROR, b"E_BAD_PROTOCOL"))
            await trio.aclose_forcefully(stream)
            return
        client = new_client(
            nsqd, stream, (str(remote[0]), int(remote[1])), tls_context=tls_context, auth=auth
        )
        nsqd.faults.gates.attach(client)  # latency and stalls hold its writer (if any)
        await client.run(buf[4:])
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        logger.info("client(%s) connection error - %s", peer, exc)
        await trio.aclose_forcefully(stream)
    except Exception:
        # The boundary of one connection: whatever went wrong in it ends it, and only it.
        logger.exception("client(%s) unexpected error, closing", peer)
        await trio.aclose_forcefully(stream)


async def queue_scan_loop(nsqd: NSQD) -> None:
    """nsqd's queueScanLoop: every queue-scan-interval, expire in-flight and deferred messages.

    It also runs the disk queues' time-based fsync (go-diskqueue's per-queue sync ticker),
    every half sync-timeout: both cost the same whether the node has ten topics or 10,000.
    """
    opts = nsqd.options
    sync_period = max(opts.queue_scan_interval, opts.sync_timeout / 2)
    next_sync = trio.current_time() + sync_period
    while True:
        await trio.sleep(opts.queue_scan_interval)
        nsqd.scan_queues(nsqd.channels())
        if nsqd.journal is not None:
            nsqd.journal.trim()  # what was recorded since, into its bounded ring
        if trio.current_time() >= next_sync:
            nsqd.sync_backends()
            next_sync = trio.current_time() + sync_period


def _auth_client(
    options: NSQDOptions, *, now: Callable[[], float]
) -> AbstractAsyncContextManager[AuthClient | None]:
    """:func:`~.tcp.auth.open_auth_client`, whose module loads only with ``--auth-http-address``."""
    if not options.auth_http_addresses:
        return nullcontext(None)
    from .tcp.auth import open_auth_client

    return open_auth_client(options, now=now)


async def serve_nsqd(
    options: NSQDOptions,
    *,
    clock: BrokerClock | None = None,
    task_status: trio.TaskStatus[NSQDAddresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run an nsqd until cancelled; report the bound addresses through ``task_status``.

    Raises ValueError before binding anything when the certificate or key cannot
    be loaded (nsqd refuses to start the same way). ``--tls-required`` without a
    certificate is refused by the command line (:mod:`nsqbox.nsqd.config`);
    here it leaves every TCP command but IDENTIFY refused.
    """
    tls_context = server_context(options)
    nsqd = NSQD(options, now=trio.current_time, clock=clock)  # clock: its box's, if any
    timers = NodeTimers(nsqd)  # what a manual clock's advance fires
    logger.info("%s", program_version("nsqd"))
    logger.info("ID: %d", options.node_id)
    lock = DirLock(nsqd.data_path)
    lock.lock()
    tcp_listeners: list[trio.SocketListener] = []
    http_listeners: list[trio.SocketListener] = []
    https_listeners: list[trio.SocketListener] = []
    try:
        # As nsqd: bind first, then load the data path. Until it has been read successfully
        # nothing may be written there: a start that fails leaves every file as it was
        # (persisting now would replace a nsqd.dat we could not read with an empty one).
        tcp_listeners = await open_listeners(options.tcp_address, "nsqd", "TCP")
        if options.http_address:
            http_listeners = await open_listeners(options.http_address, "nsqd", "HTTP")
        if tls_context is not None and options.https_address:
            https_listeners = await open_listeners(options.https_address, "nsqd", "HTTPS")
        nsqd.load_metadata()
    except BaseException:
        nsqd.abandon()
        lock.unlock()
        with trio.CancelScope(shield=True):
            for listener in tcp_listeners + http_listeners + https_listeners:
                await listener.aclose()
        raise
    nsqd.persist_metadata()
    tcp = bound_address(tcp_listeners)
    http = bound_address(http_listeners) if http_listeners else None
    https = bound_address(https_listeners) if https_listeners else None
    nsqd.tcp_port = tcp[1]
    nsqd.http_port = http[1] if http else 0
    nsqd.https_port = https[1] if https else 0
    if not options.broadcast_tcp_port:
        options.broadcast_tcp_port = nsqd.tcp_port
    if not options.broadcast_http_port:
        options.broadcast_http_port = nsqd.http_port
    # The first accept loop to end (at shutdown: any of them) closes all, TCP first.
    group = ListenerGroup(tcp_listeners + http_listeners + https_listeners)
    try:
        async with (
            _auth_client(options, now=nsqd.real_now) as auth,
            trio.open_nursery() as nursery,
        ):

            async def handler(stream: trio.SocketStream) -> None:
                await handle_tcp(nsqd, stream, tls_context=tls_context, auth=auth)

            nursery.start_soon(partial(serve_tcp, group=group), tcp_listeners, handler)

            lookup = LookupService(nsqd)  # started below, after the listeners, as nsqd does
            taps = NodeTaps(nsqd)  # one node's taps, for its HTTP and HTTPS apps alike

            def options_changed() -> None:  # nsqd's triggerOptsNotification
                lookup.set_addresses(nsqd.options.lookupd_tcp_addresses)

            if http_listeners:
                app = make_app(nsqd, on_options_changed=options_changed, taps=taps)
                await nursery.start(partial(serve_http, group=group), app, http_listeners)
            if https_listeners:
                assert tls_context is not None
                secure: list[trio.abc.Listener[Any]] = [
                    trio.SSLListener(listener, tls_context, https_compatible=True)
                    for listener in https_listeners
                ]
                app = make_app(
                    nsqd, tls_enabled=True, on_options_changed=options_changed, taps=taps
                )
                await nursery.start(serve_http, app, secure)
            nursery.start_soon(queue_scan_loop, nsqd)
            await nursery.start(lookup.run)
            if options.statsd_address:
                nursery.start_soon(statsd_loop, nsqd)
            # nsqd's lines, in nsqd's order: harnesses wait for them
            logger.info("TCP: listening on %s", format_address(tcp))
            if http is not None:
                logger.info("HTTP: listening on %s", format_address(http))
            if https is not None:
                logger.info("HTTPS: listening on %s", format_address(https))
            nsqd.clock.attach(timers)
            task_status.started(
                NSQDAddresses(tcp=tcp, http=http, nsqd=nsqd, https=https, lookup=lookup)
            )
    finally:
        group.close()  # closed already, unless start-up failed half-way
        nsqd.clock.detach(timers)
        # The listeners and every connection are closed by now; nsqd's Exit() says so first.
        logger.info("TCP: closing %s", format_address(tcp))
        if http is not None:
            logger.info("HTTP: closing %s", format_address(http))
        if https is not None:
            logger.info("HTTPS: closing %s", format_address(https))
        try:
            if not nsqd.crashed:  # a crash persists nothing (NSQD.crash)
                nsqd.close()  # raises ShutdownError, after flushing all it can, if anything failed
        finally:
            logger.info("NSQ: stopping subsystems")
            logger.info("LOOKUP: closing")
            logger.info("QUEUESCAN: closing")
            lock.unlock()
            logger.info("NSQ: bye")
