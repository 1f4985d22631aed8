"""Escape sequences and markup from the wire reach the TUI's screen as visible text.

A client's IDENTIFY (``user_agent``, ``hostname``, ``client_id``) sent over a real socket, a
fault's error text set through nsqd's fault routes, and message bodies published to a real
nsqd: each is drawn by the app (``App.run_test``), and what the widgets render — the segments
the terminal would get — holds the ``\\xNN`` forms, no ESC or C1 character, no link and no
colour the text asked for.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import pytest
from rich.segment import Segment
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import RichLog

from nsqbox.admin.tui.app import AdminApp
from nsqbox.admin.tui.channel import ChannelScreen
from nsqbox.admin.tui.faults import FaultsScreen
from nsqbox.admin.tui.tail import TailScreen, TailSource
from nsqbox.admin.tui.widgets import StatsTable
from nsqbox.process.terminal_text import UNSAFE
from nsqbox.testing.handle import NSQBox

from .conftest import TIMEOUT, make_app, run_app, wait_until

OSC52 = "\x1b]52;c;cGF5bG9hZA==\x07"
OSC0 = "\x1b]0;owned\x07"
OSC8 = "\x1b]8;;http://evil/\x1b\\ok\x1b]8;;\x1b\\"
CSI6N = "\x1b[6n"
C1 = "\x9b31m"
LINK = "[link=http://evil]x[/]"
RED = "[red]r[/]"


def shown(raw: str) -> str:
    """What the screen must show for ``raw`` (controls as ``\\xNN``; Rich drops BEL itself
    from a ``Text``, but the sanitizer runs first, so BEL shows too)."""
    return UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}", raw)


def assert_clean(segments: Iterable[Segment], *expected: str) -> None:
    """No control character, link or markup colour in ``segments``; ``expected`` all there."""
    segments = list(segments)
    text = "".join(s.text for s in segments)
    assert UNSAFE.search(text) is None, repr(text)
    assert not [s for s in segments if s.style is not None and s.style.link]
    for part in expected:
        assert part in text, (part, text)


def table_segments(table: StatsTable) -> list[Segment]:
    """Every segment the table draws for its visible lines."""
    segments: list[Segment] = []
    for y in range(table.size.height):
        strip: Strip = table.render_line(y)
        segments.extend(strip)
    return segments


def frame(sock: socket.socket) -> tuple[int, bytes]:
    """One NSQ frame: its type and data."""
    head = recv_exactly(sock, 8)
    size, kind = struct.unpack(">ii", head)
    return kind, recv_exactly(sock, size - 4)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "nsqd closed the connection"
        data += chunk
    return data


@pytest.fixture
def rogue_client(nsq: NSQBox) -> Iterator[socket.socket]:
    """A client subscribed to evil/rogue whose IDENTIFY carries escape sequences and markup."""
    identify = {
        "client_id": f"id{CSI6N}",
        "hostname": f"host{OSC0}{C1}{RED}",
        "user_agent": f"ua{OSC52}{LINK}",
        "feature_negotiation": False,
    }
    body = json.dumps(identify).encode()
    address = nsq.nsqd_tcp_addresses[0]
    sock = socket.create_connection((address.host, address.port), timeout=TIMEOUT)
    try:
        sock.sendall(b"  V2IDENTIFY\n" + struct.pack(">I", len(body)) + body)
        assert frame(sock) == (0, b"OK")
        sock.sendall(b"SUB evil rogue\n")
        assert frame(sock) == (0, b"OK")
        yield sock
    finally:
        sock.close()


def test_identify_fields_show_escaped_and_unstyled(
    nsq: NSQBox, rogue_client: socket.socket
) -> None:
    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: app.snapshot is not None, "a snapshot")
        await app.push_screen(ChannelScreen("evil", "rogue"))
        await pilot.pause()
        clients = app.screen.query_one("#clients", StatsTable)
        await wait_until(pilot, lambda: len(clients.keys) == 1, "the rogue client", clients.keys)
        await pilot.pause()
        [key] = clients.keys
        host, _address, _node, user_agent, *_ = clients.cells(key)
        assert host == f"host{shown(OSC0)}{shown(C1)}{RED}"
        assert user_agent == f"ua{shown(OSC52)}{LINK}"
        assert UNSAFE.search(key) is not None  # the row key is the raw id; it is never drawn
        # every cell reaches the DataTable as Text (a str would be parsed as markup)
        assert all(not isinstance(c, str) for c in clients.get_row(key))
        assert_clean(
            table_segments(clients),
            f"host{shown(OSC0)}",
            "\\x9b31m",
            RED,
            f"ua{shown(OSC52)}",
            LINK,
        )

    run_app(make_app(nsq), body)


def test_fault_error_text_shows_escaped_in_the_faults_view_and_the_notification(
    nsq: NSQBox,
) -> None:
    node = str(nsq.nsqd_http_addresses[0])
    error = f"disk{OSC8}{CSI6N}{LINK}"
    response = httpx.post(
        f"http://{node}/nsqbox/faults/fail_publishes",
        params={"topic": "evil", "error": error},
        timeout=TIMEOUT,
    )
    response.raise_for_status()

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        await wait_until(pilot, lambda: app.snapshot is not None, "a snapshot")
        await pilot.press("f")
        await wait_until(pilot, lambda: isinstance(app.screen, FaultsScreen), "the Faults view")
        screen = app.screen
        assert isinstance(screen, FaultsScreen)
        faults = screen.query_one("#faults", StatsTable)
        await wait_until(pilot, lambda: len(faults.keys) == 1, "the fault", faults.keys)
        [key] = faults.keys
        assert f"error={shown(error)}" in faults.cells(key)[-1]
        assert all(not isinstance(c, str) for c in faults.get_row(key))
        assert_clean(table_segments(faults), f"error={shown(error)}"[:40])

        # an action's errors quote peers too (nsqd's HTTP /pub answers this fault's
        # publishes with a plain 503 EXITING, so the error is raised here as a peer's would be)
        async def failing(_backend: object) -> list[str]:
            raise RuntimeError(error)

        app.perform(f"publish to {LINK}", failing)
        await wait_until(pilot, lambda: len(app.results) == 1, "the action failed")
        [note] = [n for n in app._notifications if n.title.startswith("publish to")]
        assert not note.markup
        assert note.message == shown(error)
        assert note.title == f"publish to {LINK}: failed"

    try:
        run_app(make_app(nsq), body)
    finally:
        nsq.faults.lift_all()


def test_tail_shows_bodies_escaped_and_unstyled(nsq: NSQBox) -> None:
    bodies = [f"{OSC52}{OSC0}", f"{OSC8}{CSI6N}", f"{C1}{LINK} {RED}"]
    nsq.publish("evil_tail", b"first", node=0)  # the topic exists, with no channel yet

    async def body(pilot: Pilot[Any], app: AdminApp) -> None:
        tcp, http = nsq.nsqd_tcp_addresses[0], str(nsq.nsqd_http_addresses[0])
        screen = TailScreen("evil_tail", [TailSource(http, str(tcp))])
        await app.push_screen(screen)
        # the tail's channel is the topic's first: it gets the buffered message, then ours
        await wait_until(pilot, lambda: screen.count == 1, "the buffered message")
        nsq.publish("evil_tail", [b.encode() for b in bodies], node=0)
        await wait_until(pilot, lambda: screen.count == 4, "the three bodies", screen.text)
        await pilot.pause()
        log = screen.query_one(RichLog)
        segments = [s for line in log.lines for s in line]
        assert_clean(segments, *(shown(b) for b in bodies))
        assert screen.text.splitlines()[1].endswith(shown(bodies[0]))

    run_app(make_app(nsq), body)
