"""Who the web TUI answers: the token and its cookie, Host and Origin, the session cap and the
terminal size, through real sockets to a real :class:`WebTUI` on 127.0.0.1, port 0.

Each tab's process here is a stand-in for ``nsqbox tui`` (:data:`FAKE_TAB`): it speaks
textual-serve's process protocol and draws the terminal size it was given, so a test sees what
size reached the process without starting a whole TUI per tab. The end-to-end runs with the
real TUI are in ``test_web.py``.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from nsqbox.admin.tui.web import WebTUI
from nsqbox.admin.tui.web_access import (
    MAX_HEIGHT,
    MAX_WIDTH,
    clamp_size,
    exposure_warning,
    public_url,
    token_matches,
)

from .conftest import TIMEOUT

#: A tab's process: textual-serve's prelude, then "size WxH" for its start size and each
#: resize it is sent; it quits when told to or when its stdin closes.
FAKE_TAB = r"""
import json, os, sys
out, inp = sys.stdout.buffer, sys.stdin.buffer
def packet(kind, payload):
    out.write(kind + len(payload).to_bytes(4, "big") + payload)
    out.flush()
out.write(b"__GANGLION__\n")
packet(b"D", f"size {os.environ['COLUMNS']}x{os.environ['ROWS']};".encode())
while len(head := inp.read(5)) == 5:
    body = inp.read(int.from_bytes(head[1:], "big"))
    if head[:1] == b"M":
        meta = json.loads(body)
        if meta["type"] == "quit":
            break
        if meta["type"] == "resize":
            packet(b"D", f"size {meta['width']}x{meta['height']};".encode())
"""


@asynccontextmanager
async def serving(tmp_path: Path, **kwargs: Any) -> AsyncIterator[WebTUI]:
    """A WebTUI running FAKE_TAB per tab on 127.0.0.1, port 0, until the block ends."""
    script = tmp_path / "fake_tab.py"
    script.write_text(FAKE_TAB)
    web_tui = WebTUI(shlex.join([sys.executable, str(script)]), "127.0.0.1", 0, **kwargs)
    await web_tui.start()
    try:
        yield web_tui
    finally:
        await web_tui.stop()


def run(tmp_path: Path, body: Callable[[WebTUI], Awaitable[None]], **kwargs: Any) -> None:
    """``await body(web_tui)`` with a server up, under asyncio, bounded."""

    async def main() -> None:
        async with asyncio.timeout(TIMEOUT * 3), serving(tmp_path, **kwargs) as web_tui:
            await body(web_tui)

    asyncio.run(main())


async def raw_get(web_tui: WebTUI, target: str, **headers: str) -> tuple[int, dict[str, str]]:
    """GET ``target`` over a plain socket with exactly ``headers`` (Host included); the status
    and the response's headers (lower-case names)."""
    port = int(web_tui.public_url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
        writer.write(("\r\n".join([*lines, "Connection: close", "", ""])).encode())
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    finally:
        writer.close()
        await writer.wait_closed()
    status = int(head[0].split()[1])
    fields = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
    return status, {k.lower(): v for k, v in fields.items()}


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Wait (polling, bounded by TIMEOUT) until ``predicate()``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def host_of(web_tui: WebTUI) -> str:
    return web_tui.public_url.split("://", 1)[1]


async def drawn(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[str]:
    """The first ``count`` "size WxH" lines the tab's process draws."""
    seen = ""
    async for message in ws:
        if message.type is aiohttp.WSMsgType.BINARY:
            seen += message.data.decode()
            sizes = re.findall(r"size (-?\d+x-?\d+);", seen)
            if len(sizes) >= count:
                return sizes
    raise AssertionError(f"the session ended after {seen!r}")


def test_the_printed_url_carries_a_token_that_becomes_a_cookie(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        assert web_tui.url == f"{web_tui.public_url}/?token={web_tui.token}"
        assert len(web_tui.token) >= 40
        async with aiohttp.ClientSession() as client:
            async with client.get(web_tui.url + "&fontsize=20", allow_redirects=False) as first:
                assert first.status == 302
                assert first.headers["Location"] == "/?fontsize=20"  # the token out of sight
                cookie = first.headers["Set-Cookie"]
            name = web_tui.cookie
            assert cookie.startswith(f"{name}={web_tui.token};")
            assert "HttpOnly" in cookie
            assert "SameSite=Strict" in cookie
            cookies = {"Cookie": f"{name}={web_tui.token}"}
            async with client.get(web_tui.public_url + "/", headers=cookies) as page:
                assert page.status == 200
                assert page.headers["X-Frame-Options"] == "DENY"
                html = await page.text()
        # the page's websocket is the server's own address; nothing is fetched off the machine
        ws_url = web_tui.public_url.replace("http://", "ws://") + "/ws"
        assert f'data-session-websocket-url="{ws_url}"' in html
        linked = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert linked
        assert all(url.startswith(web_tui.public_url + "/static/") for url in linked), linked
        assert "googleapis" not in html
        assert "starting the TUI" in html

    run(tmp_path, body)


def test_no_token_no_page_no_websocket(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        base = web_tui.public_url
        wrong = {"Cookie": f"{web_tui.cookie}={web_tui.token[:-1]}x"}
        async with aiohttp.ClientSession() as client:
            for url, headers in [
                (base + "/", {}),
                (base + "/?token=", {}),
                (base + "/?token=" + web_tui.token[:-1], {}),
                (base + "/", wrong),
                (base + "/download/anything", {}),
                (base + "/no-such-page", {}),
            ]:
                async with client.get(url, headers=headers, allow_redirects=False) as answer:
                    assert answer.status == 403, url
                    assert "Set-Cookie" not in answer.headers
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await client.ws_connect(base + "/ws")
            assert refused.value.status == 403
            # the static files (xterm.js, its CSS, the font) are no secret
            async with client.get(base + "/static/js/textual.js") as script:
                assert script.status == 200
        assert web_tui.sessions == set()

    run(tmp_path, body)


def test_a_rebinding_host_is_refused_even_with_the_token(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        port = host_of(web_tui).rsplit(":", 1)[1]
        evil = f"evil.example:{port}"
        status, _ = await raw_get(web_tui, f"/?token={web_tui.token}", Host=evil)
        assert status == 403
        status, _ = await raw_get(
            web_tui, "/", Host=evil, Cookie=f"{web_tui.cookie}={web_tui.token}"
        )
        assert status == 403
        status, _ = await raw_get(web_tui, "/static/css/xterm.css", Host=evil)
        assert status == 403
        ws_headers = {
            "Host": evil,
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version": "13",
        }
        status, _ = await raw_get(web_tui, f"/ws?token={web_tui.token}", **ws_headers)
        assert status == 403
        # the same request on the server's own Host is answered
        status, _ = await raw_get(web_tui, "/static/css/xterm.css", Host=host_of(web_tui))
        assert status == 200
        # the refusal's body is the one every other nsqbox service answers, byte for byte
        async with aiohttp.ClientSession() as session:
            url = f"{web_tui.public_url}/?token={web_tui.token}"
            async with session.get(url, headers={"Host": evil}) as answer:
                assert answer.status == 403
                assert await answer.read() == b'{"message":"HOST_NOT_ALLOWED"}'

    run(tmp_path, body)


def test_the_page_on_another_allowed_name_moves_to_the_servers_own_url(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        port = host_of(web_tui).rsplit(":", 1)[1]
        target = f"/?token={web_tui.token}"
        status, headers = await raw_get(web_tui, target, Host=f"localhost:{port}")
        assert status == 302
        assert headers["location"] == f"{web_tui.public_url}{target}"
        assert "set-cookie" not in headers

    run(tmp_path, body)


def test_a_foreign_origin_gets_no_websocket(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        ws_url = web_tui.public_url.replace("http", "ws") + f"/ws?token={web_tui.token}"
        port = host_of(web_tui).rsplit(":", 1)[1]
        async with aiohttp.ClientSession() as client:
            # localhost is an allowed name, but not the Host this websocket asked
            for origin in ("http://evil.example", "null", f"http://localhost:{port}"):
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await client.ws_connect(ws_url, headers={"Origin": origin})
                assert refused.value.status == 403, origin
            assert web_tui.sessions == set()
            # the page's own origin (what a browser sends) gets its tab
            own = {"Origin": web_tui.public_url}
            async with client.ws_connect(ws_url, headers=own) as ws:
                assert await drawn(ws, 1) == ["80x24"]

    run(tmp_path, body)


def test_sessions_over_the_cap_are_refused(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        ws_url = web_tui.public_url.replace("http", "ws") + f"/ws?token={web_tui.token}"
        async with aiohttp.ClientSession() as client:
            first = await client.ws_connect(ws_url)
            second = await client.ws_connect(ws_url)
            assert len(web_tui.sessions) == 2
            async with client.ws_connect(ws_url) as third:
                message = await third.receive()
                assert message.type is aiohttp.WSMsgType.BINARY
                assert b"2 web TUI tabs are open already" in message.data
                assert (await third.receive()).type is aiohttp.WSMsgType.CLOSE
                assert third.close_code == 1013
            await first.close()
            await until(lambda: len(web_tui.sessions) == 1, "the first tab's end")
            # a closed tab makes room
            async with client.ws_connect(ws_url) as fourth:
                assert await drawn(fourth, 1) == ["80x24"]
            await second.close()

    run(tmp_path, body, max_sessions=2)


def test_the_terminal_size_is_bounded(tmp_path: Path) -> None:
    async def body(web_tui: WebTUI) -> None:
        base = web_tui.public_url.replace("http", "ws") + f"/ws?token={web_tui.token}"
        async with aiohttp.ClientSession() as client:
            huge = "9" * 5000  # past int()'s digit limit: the default size
            for query, size in [
                ("&width=100000&height=-5", f"{MAX_WIDTH}x1"),
                (f"&width={huge}&height=30", "80x30"),
            ]:
                async with client.ws_connect(base + query) as ws:
                    assert await drawn(ws, 1) == [size]
            async with client.ws_connect(base) as ws:
                await ws.send_json(["resize", {"width": 10**12, "height": 10**12}])
                await ws.send_str("not json")
                await ws.send_json(["resize", "sideways"])
                await ws.send_json(["resize", {"width": "wide", "height": 0}])
                await ws.send_json(["resize"])
                await ws.send_json(["resize", {"width": 120, "height": 40}])
                sizes = await drawn(ws, 4)
        assert sizes == ["80x24", f"{MAX_WIDTH}x{MAX_HEIGHT}", "80x1", "120x40"]

    run(tmp_path, body)


def test_pure_rules() -> None:
    assert clamp_size(0, 0) == (1, 1)
    assert clamp_size(MAX_WIDTH + 1, MAX_HEIGHT + 1) == (MAX_WIDTH, MAX_HEIGHT)
    assert token_matches("abc", "abc")
    assert not token_matches("abd", "abc")
    assert not token_matches(None, "abc")
    assert not token_matches("\u00e9", "abc")  # not ASCII: no TypeError
    assert exposure_warning("127.0.0.1", 4172) is None
    assert exposure_warning("::1", 4172) is None
    wildcard = exposure_warning("0.0.0.0", 4172)
    assert wildcard is not None
    assert "0.0.0.0:4172, every interface" in wildcard
    lan = exposure_warning("192.0.2.7", 4172)
    assert lan is not None
    assert "listens on 192.0.2.7:4172:" in lan
    assert public_url("127.0.0.1", 4172) == "http://127.0.0.1:4172"
    assert public_url("::1", 4172) == "http://[::1]:4172"
    assert not public_url("0.0.0.0", 4172).startswith("http://127.0.0.1")
