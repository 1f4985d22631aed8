"""``--web``: the TUI as a web page, served by textual-serve.

textual-serve (``pip install textual-serve``) serves a page that runs a terminal in the browser
(its own JavaScript: xterm.js; nsqbox adds none) and, for every browser tab that opens it,
starts the TUI as a subprocess — here ``python -m nsqbox tui`` with the same flags as the
terminal TUI (:func:`~.cli.tui_command`) — and relays keys and screen over a websocket. So each tab
is its own TUI process, reading the cluster over HTTP like any other; closing the tab ends it.

:class:`WebTUI` is that server on the running asyncio loop (:meth:`~WebTUI.start` returns the
page's URL; :meth:`~WebTUI.stop` ends every tab's TUI, then the server). :func:`run_web` is
``nsqbox tui --web``: serve until SIGINT or SIGTERM. ``nsqbox up --web`` runs a
:class:`WebTUIThread`: the same server on an asyncio loop in a thread of its own, beside the
box's trio loop.

The page and its websocket let anyone who reaches the port use the TUI (and, without
``--read-only``, change the cluster): the server listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from ...addresses import dialable, format_address

if TYPE_CHECKING:  # asyncio loads when the web TUI runs, not for ``nsqbox up``'s flags
    import asyncio

    from aiohttp import web
    from textual_serve.server import Server

__all__ = [
    "DEFAULT_WEB_HOST",
    "DEFAULT_WEB_PORT",
    "WebTUI",
    "WebTUIThread",
    "run_web",
]

#: Where the web TUI listens unless told otherwise.
DEFAULT_WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 4172
#: Seconds the tabs' TUIs get to quit when the server stops (then they are left to stdin EOF).
STOP_TIMEOUT = 10.0

log = logging.getLogger("nsqbox.tui.web")


def _new_server(command: str, host: str, port: int, sessions: set[asyncio.Task[Any]]) -> Server:
    """textual-serve's Server, quiet, adding each websocket session's task to ``sessions``."""
    import asyncio

    from textual_serve.server import Server

    class QuietServer(Server):
        """No banner; every session is a task that :meth:`WebTUI.stop` can end."""

        async def on_startup(self, app: web.Application) -> None:
            """Say nothing (the command line prints the URL)."""

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            """The page, its links and websocket pointing back at the host the browser asked
            (so a server on 0.0.0.0 or behind a name works)."""
            self.public_url = f"{request.scheme}://{request.host}"  # no await before its use
            return await super().handle_index(request)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            """One tab: its TUI subprocess, for as long as the websocket lasts."""
            task = asyncio.current_task()
            assert task is not None
            sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                sessions.discard(task)

    return QuietServer(command, host=host, port=port, title="nsqbox")


class WebTUI:
    """textual-serve serving ``command`` on ``host``:``port`` (0: any free port)."""

    def __init__(
        self, command: str, host: str = DEFAULT_WEB_HOST, port: int = DEFAULT_WEB_PORT
    ) -> None:
        self.command = command
        self.host = host
        self.port = port
        #: The websocket sessions (browser tabs) open now, each with its TUI subprocess.
        self.sessions: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        #: The page's URL once listening.
        self.url = ""

    async def start(self) -> str:
        """Listen; the page's URL (``http://127.0.0.1:4172``). OSError if the port is taken."""
        from aiohttp import web

        server = _new_server(self.command, self.host, self.port, self.sessions)
        # Server.serve() runs a loop of its own on a fixed port: take its aiohttp app instead
        runner = web.AppRunner(await server._make_app(), handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        host, port = runner.addresses[0][:2]
        self.url = f"http://{dialable(format_address((host, port)))}"
        self._runner = runner
        return self.url

    async def stop(self) -> None:
        """End every tab's TUI (each gets a quit request), then stop listening."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        sessions = list(self.sessions)
        for task in sessions:
            task.cancel()
        if sessions:
            import asyncio

            _, pending = await asyncio.wait(sessions, timeout=STOP_TIMEOUT)
            if pending:
                log.warning("%d web TUI session(s) did not stop in time", len(pending))
        await runner.cleanup()


async def _serve_until_signalled(web_tui: WebTUI, announce: str) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        url = await web_tui.start()
        sys.stderr.write(f"{announce}: serving the TUI at {url} (a TUI per tab); Ctrl-C stops\n")
        sys.stderr.flush()
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await web_tui.stop()


def run_web(command: str, host: str, port: int, *, announce: str = "nsqbox tui") -> int:
    """Serve ``command`` as a web page until SIGINT or SIGTERM; the exit status."""
    import asyncio

    web_tui = WebTUI(command, host, port)
    try:
        asyncio.run(_serve_until_signalled(web_tui, announce))
    except OSError as exc:
        sys.stderr.write(f"{announce}: cannot serve the TUI on {host}:{port} - {exc}\n")
        return 1
    return 0


class WebTUIThread:
    """A :class:`WebTUI` on an asyncio loop in a thread of its own (beside a trio program)."""

    def __init__(
        self, command: str, host: str = DEFAULT_WEB_HOST, port: int = DEFAULT_WEB_PORT
    ) -> None:
        self.web_tui = WebTUI(command, host, port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> str:
        """Start the thread and listen (blocking until then); the URL, or the OSError."""
        self._thread = threading.Thread(target=self._run, name="nsqbox-web-tui", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self.web_tui.url

    def _run(self) -> None:
        import asyncio

        asyncio.run(self._main())

    async def _main(self) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self.web_tui.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await self.web_tui.stop()

    def stop(self) -> None:
        """End every tab's TUI and the server, and join the thread (blocking)."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is None or stop is None or thread is None:
            return
        with suppress(RuntimeError):  # the loop has closed already
            loop.call_soon_threadsafe(stop.set)
        thread.join()
