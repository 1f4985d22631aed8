"""Memory per idle TCP connection: nsqbox beside real nsqd.

    python bench/idle_connections.py                         # nsqbox (this tree) alone
    python bench/idle_connections.py --nsqd-bin ../shared/nsq/bin/nsqd --connections 1000
    python bench/idle_connections.py --nsqbox ../main --nsqbox . --nsqd-bin ...

For each server and each kind, a fresh server is started (``bench/side_by_side.py``'s
``running``: same flags, free ports), a topic and its channel are created, and the
server's RSS is read; then ``--connections`` TCP connections are opened that each send
the magic and an IDENTIFY (kind ``identify``: an idle publisher), or an IDENTIFY and a
SUB to the channel (kind ``sub``: an idle consumer, RDY 0), every answer is read, and
the RSS is read again once it has settled. The figure is the growth divided by the
connections, in KB (1,000 bytes). The connections are then closed.

The process's descriptor limit is raised within its hard limit (and the servers
started from here inherit it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from http_pub_load import raise_fd_limit

if TYPE_CHECKING:
    from side_by_side import Running, ServerSpec, Settings

KINDS = ("identify", "sub")
TOPIC = "idle_bench"
_IDENTIFY = json.dumps(
    {"client_id": "idle", "hostname": "idle", "feature_negotiation": True, "user_agent": "idle"}
).encode()
_FRAME = struct.Struct(">ii")


def _commands(kind: str) -> tuple[bytes, int]:
    """What one connection sends, and how many frames it waits for."""
    sent = b"  V2IDENTIFY\n" + struct.pack(">i", len(_IDENTIFY)) + _IDENTIFY
    if kind == "sub":
        return sent + f"SUB {TOPIC} ch\n".encode(), 2
    return sent, 1


def _read_frames(sock: socket.socket, count: int) -> None:
    """Read ``count`` frames; an error frame, or the end of the stream, stops the bench."""
    buf = b""
    for _ in range(count):
        while len(buf) < 8:
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("the server closed a connection")
            buf += chunk
        size, frame_type = _FRAME.unpack_from(buf)
        while len(buf) < 4 + size:
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("the server closed a connection")
            buf += chunk
        if frame_type == 1:
            raise SystemExit(f"error frame: {buf[8 : 4 + size]!r}")
        buf = buf[4 + size :]


def _settled_rss(server: Running, *, seconds: float = 5.0) -> float:
    """The server's RSS (MB) once two readings 0.3 s apart agree within 1%."""
    last = server.rss_mb()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = server.rss_mb()
        if abs(now - last) <= 0.01 * last:
            return now
        last = now
    return last


def per_connection_kb(spec: ServerSpec, kind: str, connections: int) -> float:
    """The server's RSS growth per idle connection of ``kind``, in KB."""
    from side_by_side import create_channel, running  # lazily: it imports this module

    sent, frames = _commands(kind)
    with running(spec, "--mem-queue-size=10000") as server:
        create_channel(server, TOPIC)
        # one connection first, so what the first client costs once (imports, caches)
        # is not counted per connection
        with socket.create_connection(("127.0.0.1", server.tcp)) as warm:
            warm.sendall(sent)
            _read_frames(warm, frames)
        before = _settled_rss(server)
        socks: list[socket.socket] = []
        try:
            for start in range(0, connections, 100):
                batch = [
                    socket.create_connection(("127.0.0.1", server.tcp))
                    for _ in range(min(100, connections - start))
                ]
                socks += batch
                for sock in batch:
                    sock.sendall(sent)
                for sock in batch:
                    _read_frames(sock, frames)
            after = _settled_rss(server)
        finally:
            for sock in socks:
                sock.close()
    return (after - before) * 1024 * 1.024 / connections  # MiB -> KB (1,000 bytes)


def idle_rows(spec: ServerSpec, settings: Settings) -> dict[str, float]:
    """``bench/side_by_side.py``'s rows: KB per idle connection of each kind, 1,000 each."""
    return {f"idle_{kind}": per_connection_kb(spec, kind, 1000) for kind in KINDS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nsqd-bin", help="real nsqd: measured too, and the reference")
    parser.add_argument(
        "--nsqbox", action="append", help="an nsqbox tree (repeatable; default: this one)"
    )
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    from side_by_side import ServerSpec

    raise_fd_limit(2 * args.connections + 64)
    specs: list[ServerSpec] = []
    if args.nsqd_bin:
        specs.append(ServerSpec("nsqd", binary=os.path.abspath(args.nsqd_bin)))
    trees = [os.path.abspath(t) for t in args.nsqbox or [str(Path(__file__).parent.parent)]]
    for tree in trees:
        label = "nsqbox" if len(trees) == 1 else f"nsqbox@{Path(tree).name}"
        specs.append(ServerSpec(label, tree=tree))
    samples: dict[tuple[str, str], list[float]] = {}
    for rnd in range(args.rounds):
        for kind in KINDS:
            for spec in specs[rnd % len(specs) :] + specs[: rnd % len(specs)]:
                kb = per_connection_kb(spec, kind, args.connections)
                print(f"  round {rnd + 1} {kind:<8} {spec.label:<16} {kb:6.1f} KB", flush=True)
                samples.setdefault((spec.label, kind), []).append(kb)
    reference = specs[0].label
    head = ["idle connections", *(s.label for s in specs)]
    head += [f"{s.label} / {reference}" for s in specs[1:]]
    print(f"\n{args.connections:,} connections; RSS growth per connection, KB (median)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for kind in KINDS:
        values = [statistics.median(samples[(s.label, kind)]) for s in specs]
        cells = [f"IDENTIFY{' + SUB' if kind == 'sub' else ''}", *(f"{v:.1f}" for v in values)]
        cells += [f"{v / values[0]:.2f}x" for v in values[1:]]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
