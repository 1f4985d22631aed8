"""Helpers for client tests: nsqd nodes that stop and come back, lookupds, a recording proxy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from nsqbox.client import Message
from nsqbox.http import Request, Router, serve_http
from nsqbox.lookupd.options import LookupdOptions
from nsqbox.lookupd.server import LookupdAddresses, serve_lookupd
from nsqbox.nsqd.lookup import lookup_service
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd
from nsqbox.nsqd.tcp.client_state import ClientState
from nsqbox.wire.frames import MAGIC_V2
from nsqbox.wire.parser import NEED_DATA, Body, Command, CommandParser
from tests.conftest import make_options

TIMEOUT = 15.0


def tcp(addrs: NSQDAddresses) -> str:
    """``127.0.0.1:port`` of an nsqd."""
    host, port = addrs.tcp
    return f"{host}:{port}"


class Node:
    """An nsqd that can be stopped and started again on the same port and data path."""

    def __init__(self, nursery: trio.Nursery, data_path: Path, **overrides: Any) -> None:
        self.nursery = nursery
        self.data_path = data_path
        self.overrides = overrides
        self.port = 0
        self.addrs: NSQDAddresses | None = None
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def clients(self) -> list[ClientState]:
        """The server's client connections (empty while stopped)."""
        return list(self.addrs.nsqd.clients.values()) if self.addrs is not None else []

    async def start(self) -> NSQDAddresses:
        self.data_path.mkdir(parents=True, exist_ok=True)
        options = make_options(
            tcp_address=f"127.0.0.1:{self.port}",
            http_address="127.0.0.1:0",  # lookupd wants an http_port
            data_path=str(self.data_path),
            **self.overrides,
        )
        self._stopped = trio.Event()
        self.addrs = await self.nursery.start(self._run, options)
        self.port = self.addrs.tcp[1]
        return self.addrs

    async def _run(self, options: Any, task_status: trio.TaskStatus[NSQDAddresses]) -> None:
        try:
            with trio.CancelScope() as self._scope:
                await serve_nsqd(options, task_status=task_status)
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()
        self.addrs = None

    async def synced(self) -> None:
        """Wait until lookupd registration has caught up."""
        assert self.addrs is not None
        service = lookup_service(self.addrs.nsqd)
        assert service is not None
        with trio.fail_after(TIMEOUT):
            await service.wait_synced()

    def publish(self, topic: str, *bodies: bytes) -> None:
        assert self.addrs is not None
        self.addrs.nsqd.get_topic(topic).put_messages(list(bodies))


async def start_lookupd(nursery: trio.Nursery) -> LookupdAddresses:
    options = LookupdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
    addrs: LookupdAddresses = await nursery.start(serve_lookupd, options)
    return addrs


def lookupd_http(addrs: LookupdAddresses) -> str:
    host, port = addrs.http
    return f"http://{host}:{port}"


def lookupd_tcp(addrs: LookupdAddresses) -> str:
    host, port = addrs.tcp
    return f"{host}:{port}"


@dataclass
class Collector:
    """A sync handler that keeps every message and signals after ``expected`` of them."""

    expected: int = 0
    bodies: list[bytes] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    done: trio.Event = field(default_factory=trio.Event)
    action: Callable[[Message], None] | None = None

    def __call__(self, message: Message) -> None:
        self.messages.append(message)
        self.bodies.append(message.body)
        if self.action is not None:
            self.action(message)
        if len(self.messages) >= self.expected:
            self.done.set()

    async def wait(self, within: float = TIMEOUT) -> None:
        with trio.fail_after(within):
            await self.done.wait()


async def wait_for(predicate: Callable[[], object], within: float = TIMEOUT) -> None:
    """Poll until ``predicate()`` is true (virtual time under an autojump clock).

    For server and client state that has no event to wait on.
    """
    with trio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 - nothing to wait on but the state itself
            await trio.sleep(0.01)


def parse_commands(data: bytes) -> list[bytes]:
    """A client's byte stream as command lines; bodies shown as ``<n bytes>``.

    A stream still short of the magic (a connection accepted, nothing or part of the magic
    received yet) has no commands.
    """
    if len(data) < len(MAGIC_V2):
        assert MAGIC_V2.startswith(data), data
        return []
    assert data.startswith(MAGIC_V2), data[:8]
    parser = CommandParser()
    parser.receive_data(data[4:])
    out: list[bytes] = []
    while (event := parser.next_event()) is not NEED_DATA:
        if isinstance(event, Command):
            line = b" ".join(event.params)
            out.append(line)
            if event.name in (b"IDENTIFY", b"AUTH", b"PUB", b"DPUB"):
                parser.expect_body(event.name.decode(), 1 << 20, message=False)
            elif event.name == b"MPUB":
                parser.expect_body("MPUB", 1 << 20, message=False)
        else:
            assert isinstance(event, Body)
    return out


class RecordingProxy:
    """A TCP proxy in front of an nsqd that records what each client sends."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        #: What each accepted connection sent, in order of connection.
        self.sent: list[bytearray] = []
        self._streams: list[trio.SocketStream] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def commands(self, index: int = 0) -> list[bytes]:
        return parse_commands(bytes(self.sent[index]))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        record = bytearray()
        self.sent.append(record)
        server = await trio.open_tcp_stream(*self.upstream)
        self._streams += [client, server]

        async def pump(
            src: trio.SocketStream, dst: trio.SocketStream, log: bytearray | None
        ) -> None:
            try:
                while data := await src.receive_some(65536):
                    if log is not None:
                        log += data
                    await dst.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                await trio.aclose_forcefully(dst)

        async with client, server, trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, server, record)
            nursery.start_soon(pump, server, client, None)

    async def drop_all(self) -> None:
        """Cut every proxied connection."""
        for stream in self._streams:
            await trio.aclose_forcefully(stream)


class TrioThread:
    """A trio loop in a background thread that serves things for the blocking client's tests."""

    def __init__(self) -> None:
        import threading

        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="client-tests-trio", daemon=True)
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> TrioThread:
        self._thread.start()
        if not self._ready.wait(TIMEOUT) or self._error is not None:
            raise RuntimeError("trio thread did not start") from self._error
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        assert self._nursery is not None
        trio.from_thread.run_sync(self._nursery.cancel_scope.cancel, trio_token=self._token)
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive()

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as exc:  # reported by __enter__ when it happens at start
            self._error = exc
            self._ready.set()

    async def _run(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await trio.sleep_forever()

    def start(self, async_fn: Callable[..., Any], *args: Any) -> Any:
        """``await nursery.start(async_fn, *args)`` in the background loop; its start value."""
        assert self._nursery is not None
        return trio.from_thread.run(self._nursery.start, async_fn, *args, trio_token=self._token)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` on the loop's thread (to read server state safely)."""
        return trio.from_thread.run_sync(fn, trio_token=self._token)

    def wait_for(self, predicate: Callable[[], object], within: float = TIMEOUT) -> None:
        """Block until ``predicate()`` (run on the loop's thread) is true."""
        trio.from_thread.run(wait_for, predicate, within, trio_token=self._token)


#: The secret :func:`serve_auth` authorizes (to publish and subscribe to everything).
SECRET = "open sesame"


async def serve_auth(*, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """An nsqd auth server (``GET /auth``); reports its ``host:port``."""
    router = Router()

    @router.route("GET", "/auth")
    async def auth(request: Request) -> object:
        if request.args().get("secret") != [SECRET]:
            return {"ttl": 60, "identity": "nobody", "authorizations": []}
        return {
            "ttl": 3600,
            "identity": "tester",
            "identity_url": "http://example/tester",
            "authorizations": [
                {"topic": ".*", "channels": [".*"], "permissions": ["subscribe", "publish"]}
            ],
        }

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_http, router, listeners)
        task_status.started(address)
