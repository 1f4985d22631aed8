"""``--web``: the TUI as a web page, served by textual-serve, to the holder of a token.

textual-serve (``pip install textual-serve``) serves a page that runs a terminal in the browser
(its own JavaScript: xterm.js; nsqbox adds none but a line that focuses it) and, for every
browser tab that opens it, starts the TUI as a subprocess — here ``python -m nsqbox tui
--web-session`` with the same flags as the terminal TUI (:func:`~.cli.tui_command`) — and relays
keys and screen over a websocket. So each tab is its own TUI process, reading the cluster over
HTTP like any other; closing the tab ends it.

Each tab is a whole TUI, so the server answers only its own URL's holder
(:mod:`.web_access`): a per-run token in the printed URL, kept in a ``SameSite=Strict`` cookie;
a Host allowlist and the same-origin rule on every request (:mod:`nsqbox.http.local_guard`); the
page's websocket pointing at the server's own address; at most
:data:`~.web_access.MAX_SESSIONS` tabs at once, each terminal's size bounded.

:class:`WebTUI` is that server on the running asyncio loop (:meth:`~WebTUI.start` returns the
page's URL, with its token; :meth:`~WebTUI.stop` ends every tab's TUI, then the server).
:func:`run_web` is ``nsqbox tui --web``: serve until SIGINT or SIGTERM. ``nsqbox up --web``
runs a :class:`WebTUIThread`: the same server on an asyncio loop in a thread of its own, beside
the box's trio loop.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from ...http.local_guard import LocalGuard, local_guard
from ...net.addresses import format_address
from .web_access import (
    DEFAULT_WEB_HOST,
    DEFAULT_WEB_PORT,
    MAX_SESSIONS,
    clamp_size,
    cookie_name,
    exposure_warning,
    new_token,
    public_url,
    token_matches,
)
from .web_page import render_page

if TYPE_CHECKING:
    from aiohttp import web
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

__all__ = [
    "DEFAULT_WEB_HOST",
    "DEFAULT_WEB_PORT",
    "WebTUI",
    "WebTUIThread",
    "run_web",
]

#: Seconds the tabs' TUIs get to quit when the server stops (then they are left to stdin EOF).
STOP_TIMEOUT = 10.0
#: The largest websocket message a browser may send (keys, pastes, resizes).
MAX_MESSAGE = 1 << 20
#: A websocket refused for want of room: "try again later" (RFC 6455 registry).
TRY_AGAIN_LATER = 1013
#: What a page or websocket asked without the token is told.
TOKEN_NEEDED = "403: open the web TUI with the URL nsqbox printed (it ends with ?token=...)\n"

log = logging.getLogger("nsqbox.tui.web")

Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


def _size(value: object, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return default
    try:
        return int(value)
    except ValueError:  # not a number, or past int()'s 4300 digits
        return default


async def _reap(app_service: AppService) -> None:
    """Wait for a tab's process to exit (textual-serve does not), killing it after
    STOP_TIMEOUT."""
    process = app_service._process
    if process is None:
        return
    try:
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
    except TimeoutError:
        log.warning("web TUI process %d did not quit; killing it", process.pid)
        process.kill()
        await process.wait()


def _new_server(web_tui: WebTUI) -> Server:
    """textual-serve's Server, quiet, guarded, bounded; each session's task in
    ``web_tui.sessions``."""
    from aiohttp import WSMsgType, web
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    class GuardedServer(Server):
        """Token, Host and Origin checked first; no banner; the page from :mod:`.web_page`;
        every session is a task that :meth:`WebTUI.stop` can end."""

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def on_startup(self, app: web.Application) -> None:
            """Say nothing (the command line prints the URL)."""

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            """The page, its links and websocket pointing at the server's own URL."""
            static = request.app.router["static"].url_for(filename="/")
            page = render_page(
                title=self.title,
                static_url=f"{web_tui.public_url}{str(static).rstrip('/')}/",
                websocket_url=web_tui.public_url.replace("http", "ws", 1) + "/ws",
                font_size=min(max(_size(request.query.get("fontsize"), 16), 6), 64),
            )
            return web.Response(text=page, content_type="text/html", headers=PAGE_HEADERS)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            """One tab: its TUI subprocess, for as long as the websocket lasts (refused with
            1013 when MAX_SESSIONS are open)."""
            websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE)
            if len(web_tui.sessions) >= web_tui.max_sessions:
                await websocket.prepare(request)
                await websocket.send_bytes(
                    f"nsqbox: {web_tui.max_sessions} web TUI tabs are open already; "
                    "close one and reload\r\n".encode()
                )
                await websocket.close(code=TRY_AGAIN_LATER, message=b"too many sessions")
                return websocket
            task = asyncio.current_task()
            assert task is not None
            web_tui.sessions.add(task)
            try:
                await self._serve_session(request, websocket)
            finally:
                web_tui.sessions.discard(task)
            return websocket

        async def _serve_session(
            self, request: web.Request, websocket: web.WebSocketResponse
        ) -> None:
            # textual-serve's handle_websocket, with the size bounded
            width, height = clamp_size(
                _size(request.query.get("width"), 80), _size(request.query.get("height"), 24)
            )
            app_service: AppService | None = None

            async def close() -> None:
                await websocket.close()

            try:
                await websocket.prepare(request)
                app_service = AppService(
                    self.command,
                    write_bytes=websocket.send_bytes,
                    write_str=websocket.send_str,
                    close=close,
                    download_manager=self.download_manager,
                    debug=self.debug,
                )
                await app_service.start(width, height)
                await self._process_messages(websocket, app_service)
            except asyncio.CancelledError:
                await websocket.close()
            except Exception:
                log.exception("web TUI session from %s failed", request.remote)
            finally:
                if app_service is not None:
                    await app_service.stop()
                    await _reap(app_service)

        async def _process_messages(
            self, websocket: web.WebSocketResponse, app_service: AppService
        ) -> None:
            """The browser's keys, sizes, pings, focus; a message that is not one is
            ignored."""
            async for message in websocket:
                if message.type is not WSMsgType.TEXT:
                    continue
                try:
                    kind, data = message.json()
                except (ValueError, TypeError):  # not JSON, or not a pair
                    continue
                if kind == "stdin" and isinstance(data, str):
                    await app_service.send_bytes(data.encode("utf-8"))
                elif kind == "resize" and isinstance(data, dict):
                    await app_service.set_terminal_size(
                        *clamp_size(_size(data.get("width"), 80), _size(data.get("height"), 24))
                    )
                elif kind == "ping":
                    await websocket.send_json(["pong", data])
                elif kind == "blur":
                    await app_service.blur()
                elif kind == "focus":
                    await app_service.focus()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        return await web_tui.check(request, handler)

    return GuardedServer(web_tui.command, host=web_tui.host, port=web_tui.port, title="nsqbox")


#: On the page and on the redirect that sets the cookie: never framed, no Referer sent.
PAGE_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class WebTUI:
    """textual-serve serving ``command`` on ``host``:``port`` (0: any free port), to the
    holder of :attr:`token`.

    ``allowed_hosts`` (``--allowed-host``) and ``broadcast_address`` are the Host names
    accepted beside IP literals, localhost and this machine's hostname.
    """

    def __init__(
        self,
        command: str,
        host: str = DEFAULT_WEB_HOST,
        port: int = DEFAULT_WEB_PORT,
        *,
        allowed_hosts: Sequence[str] = (),
        broadcast_address: str | None = None,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.command = command
        self.host = host
        self.port = port
        self.max_sessions = max_sessions
        #: The Host allowlist and Origin rule every request passes first.
        self.guard: LocalGuard = local_guard(allowed_hosts, broadcast_address)
        #: This run's secret: in the printed URL, then in the browser's cookie.
        self.token = new_token()
        #: The websocket sessions (browser tabs) open now, each with its TUI subprocess.
        self.sessions: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        #: The page's own URL once listening (``http://127.0.0.1:4172``), without the token.
        self.public_url = ""
        #: The URL to open once listening: the page's, with the token.
        self.url = ""
        #: The address bound, and the warning to print when it is not loopback.
        self.bound = ""
        self.warning: str | None = None

    @property
    def cookie(self) -> str:
        """The name of the cookie that carries the token."""
        return cookie_name(int(self.public_url.rsplit(":", 1)[1]))

    async def start(self) -> str:
        """Listen; the URL to open (``http://127.0.0.1:4172/?token=...``). OSError if the
        port is taken."""
        from aiohttp import web

        server = _new_server(self)
        # Server.serve() runs a loop of its own on a fixed port: take its aiohttp app instead
        runner = web.AppRunner(await server._make_app(), handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        # no await from here on: no request is answered before public_url is set
        host, port = runner.addresses[0][:2]
        self.bound = format_address((host, port))
        self.public_url = public_url(host, port)
        self.url = f"{self.public_url}/?token={self.token}"
        self.warning = exposure_warning(host, port)
        self._runner = runner
        return self.url

    async def check(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer ``request`` with ``handler`` if it may be: Host and Origin first (every
        route), then the token (every route but the static files)."""
        from aiohttp import web

        host, origin = request.headers.get("Host"), request.headers.get("Origin")
        refusal = self.guard.refusal(host, origin)
        if refusal is not None:
            log.debug("web TUI: refused %s (Host %r, Origin %r)", refusal, host, origin)
            # the body every other nsqbox service answers, byte for byte (no spaces)
            body = b'{"message":"%s"}' % refusal.encode()
            return web.Response(body=body, status=403, content_type="application/json")
        resource = request.match_info.route.resource
        if resource is not None and resource.name == "static":
            return await handler(request)
        index = resource is not None and resource.name == "index"
        if index and (host or "").lower() != self.public_url.split("://", 1)[1]:
            # the page lives at the server's own URL (its cookie and websocket with it)
            raise web.HTTPFound(f"{self.public_url}{request.rel_url}", headers=PAGE_HEADERS)
        given = request.query.get("token")
        if given is not None:
            if not token_matches(given, self.token):
                return web.Response(status=403, text=TOKEN_NEEDED)
            if index:  # keep the token in a cookie, and out of the address bar
                rest = [(k, v) for k, v in request.query.items() if k != "token"]
                clean = request.rel_url.with_query(rest)
                response = web.HTTPFound(str(clean), headers=PAGE_HEADERS)
                response.set_cookie(
                    self.cookie, self.token, path="/", httponly=True, samesite="Strict"
                )
                raise response
            return await handler(request)
        if not token_matches(request.cookies.get(self.cookie), self.token):
            return web.Response(status=403, text=TOKEN_NEEDED)
        return await handler(request)

    async def stop(self) -> None:
        """End every tab's TUI (each gets a quit request), then stop listening."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        sessions = list(self.sessions)
        for task in sessions:
            task.cancel()
        if sessions:
            _, pending = await asyncio.wait(sessions, timeout=STOP_TIMEOUT)
            if pending:
                log.warning("%d web TUI session(s) did not stop in time", len(pending))
        await runner.cleanup()


async def _serve_until_signalled(web_tui: WebTUI, announce: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        url = await web_tui.start()
        if web_tui.warning:
            sys.stderr.write(f"{announce}: {web_tui.warning}\n")
        sys.stderr.write(f"{announce}: serving the TUI at {url} (a TUI per tab); Ctrl-C stops\n")
        sys.stderr.flush()
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await web_tui.stop()


def run_web(web_tui: WebTUI, *, announce: str = "nsqbox tui") -> int:
    """Serve ``web_tui`` until SIGINT or SIGTERM; the exit status."""
    try:
        asyncio.run(_serve_until_signalled(web_tui, announce))
    except OSError as exc:
        where = format_address((web_tui.host, web_tui.port))
        sys.stderr.write(f"{announce}: cannot serve the TUI on {where} - {exc}\n")
        return 1
    return 0


class WebTUIThread:
    """A :class:`WebTUI` on an asyncio loop in a thread of its own (beside a trio program)."""

    def __init__(self, web_tui: WebTUI) -> None:
        self.web_tui = web_tui
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
        asyncio.run(self._main())

    async def _main(self) -> None:
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
