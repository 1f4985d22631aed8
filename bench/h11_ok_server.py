"""The h11 ceiling: the least a trio + h11 server can do per request, answering ``OK``.

    python bench/h11_ok_server.py --port 4151

No routing, no query parsing, no broker: read, let h11 parse, answer a fixed
``200 OK``, repeat. ``bench/http_pub_load.py`` drives it with the same load as
nsqd's ``/pub`` so nsqbox's figures can be read against what h11 on one core
allows. Connections are accepted in batches (as nsqbox does), so the figure
measures HTTP handling rather than trio's one-accept-per-scheduler-pass.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

import h11
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsqbox.net.listeners import accept_batches

HEADERS = [
    (b"Content-Type", b"text/plain; charset=utf-8"),
    (b"X-NSQ-Content-Type", b"nsq; version=1.0"),
    (b"Content-Length", b"2"),
]


async def handle(stream: trio.SocketStream) -> None:
    """Answer every request on ``stream`` with ``OK`` until the peer closes it."""
    conn = h11.Connection(h11.SERVER)
    try:
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.EndOfMessage):
                    out = conn.send(h11.Response(status_code=200, headers=HEADERS, reason=b"OK"))
                    out += conn.send(h11.Data(data=b"OK")) or b""
                    out += conn.send(h11.EndOfMessage()) or b""
                    await stream.send_all(out)
                    conn.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed):
                    return
    except (trio.BrokenResourceError, h11.ProtocolError):
        return


async def serve(port: int) -> None:
    """Accept on 127.0.0.1:``port`` until killed, draining the backlog on each wake-up."""
    listener = (await trio.open_tcp_listeners(port, host="127.0.0.1"))[0]
    print(f"listening on 127.0.0.1:{listener.socket.getsockname()[1]}", flush=True)
    async with trio.open_nursery() as nursery:
        await accept_batches(listener, nursery, _handle_socket)


async def _handle_socket(sock: socket.socket) -> None:
    await handle(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    trio.run(serve, parser.parse_args().port)


if __name__ == "__main__":
    main()
