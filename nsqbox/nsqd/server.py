"""serve_nsqd: bind the listeners, run the TCP protocol and the periodic loops.

Shutdown is cancellation: when the surrounding scope is cancelled the listeners
close, every connection ends, and the NSQD persists what it holds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from ..http import serve_http
from ..wire.frames import MAGIC_V2, FrameType, encode_frame
from .dirlock import DirLock
from .http_api import make_app
from .lookup import lookup_loop, set_lookupd_addresses
from .nsqd import NSQD
from .options import NSQDOptions, split_host_port
from .protocol_v2 import ClientV2
from .statsd import statsd_loop

logger = logging.getLogger("nsqbox.nsqd")


@dataclass(frozen=True)
class NSQDAddresses:
    """What serve_nsqd reports once it listens; ``nsqd`` is the live container."""

    tcp: tuple[str, int]
    http: tuple[str, int] | None
    nsqd: NSQD


async def _open_listeners(address: str) -> list[trio.SocketListener]:
    host, port = split_host_port(address)
    return await trio.open_tcp_listeners(port, host=host or None)


def _bound(listeners: list[trio.SocketListener]) -> tuple[str, int]:
    sockname = listeners[0].socket.getsockname()
    return str(sockname[0]), int(sockname[1])


async def handle_tcp(nsqd: NSQD, stream: trio.SocketStream) -> None:
    """One TCP connection: read the magic, then speak protocol V2 until it ends."""
    try:
        remote = stream.socket.getpeername()
    except OSError:
        await trio.aclose_forcefully(stream)
        return
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
            logger.error("client(%s) bad protocol magic %r", remote, buf[:4])
            with trio.move_on_after(1):
                await stream.send_all(encode_frame(FrameType.ERROR, b"E_BAD_PROTOCOL"))
            await trio.aclose_forcefully(stream)
            return
        client = ClientV2(nsqd, stream, (str(remote[0]), int(remote[1])))
        await client.run(buf[4:])
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        logger.info("client(%s) connection error - %s", remote, exc)
        await trio.aclose_forcefully(stream)


async def queue_scan_loop(nsqd: NSQD) -> None:
    """nsqd's queueScanLoop: every queue-scan-interval, expire in-flight and deferred messages.

    It also runs the disk queues' time-based fsync (go-diskqueue's per-queue sync ticker).
    """
    opts = nsqd.options
    while True:
        await trio.sleep(opts.queue_scan_interval)
        nsqd.scan_queues(nsqd.channels())
        nsqd.sync_backends()


async def serve_nsqd(
    options: NSQDOptions,
    *,
    task_status: trio.TaskStatus[NSQDAddresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run an nsqd until cancelled; report the bound addresses through ``task_status``."""
    nsqd = NSQD(options, now=trio.current_time)
    lock = DirLock(nsqd.data_path)
    lock.lock()
    tcp_listeners: list[trio.SocketListener] = []
    http_listeners: list[trio.SocketListener] = []
    try:
        nsqd.load_metadata()
        nsqd.persist_metadata()
        tcp_listeners = await _open_listeners(options.tcp_address)
        if options.http_address:
            http_listeners = await _open_listeners(options.http_address)
    except BaseException:
        nsqd.close()
        lock.unlock()
        with trio.CancelScope(shield=True):
            for listener in tcp_listeners:
                await listener.aclose()
        raise
    tcp = _bound(tcp_listeners)
    http = _bound(http_listeners) if http_listeners else None
    nsqd.tcp_port = tcp[1]
    nsqd.http_port = http[1] if http else 0
    if not options.broadcast_tcp_port:
        options.broadcast_tcp_port = nsqd.tcp_port
    if not options.broadcast_http_port:
        options.broadcast_http_port = nsqd.http_port
    try:
        async with trio.open_nursery() as nursery:

            async def handler(stream: trio.SocketStream) -> None:
                await handle_tcp(nsqd, stream)

            nursery.start_soon(trio.serve_listeners, handler, tcp_listeners)
            if http_listeners:

                def options_changed() -> None:  # nsqd's triggerOptsNotification
                    set_lookupd_addresses(nsqd, nsqd.options.lookupd_tcp_addresses)

                app = make_app(nsqd, on_options_changed=options_changed)
                await nursery.start(serve_http, app, http_listeners)
            nursery.start_soon(queue_scan_loop, nsqd)
            await nursery.start(lookup_loop, nsqd)
            if options.statsd_address:
                nursery.start_soon(statsd_loop, nsqd)
            logger.info("TCP: listening on %s:%d", *tcp)
            task_status.started(NSQDAddresses(tcp=tcp, http=http, nsqd=nsqd))
    finally:
        nsqd.close()
        lock.unlock()
