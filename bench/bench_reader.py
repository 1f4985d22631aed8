"""Consume a topic with RDY 2500 and FIN everything (like NSQ's bench_reader).

    python bench/bench_reader.py --nsqd-tcp-address 127.0.0.1:4150 --count 2000000

Prints msgs/s and end-to-end latency percentiles (delivery time minus the
message's publish timestamp; meaningful when publishing runs concurrently).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import time

from bench_writer import percentiles

MAGIC = b"  V2"
HEADER = struct.Struct(">ii")
TIMESTAMP = struct.Struct(">q")


def _command(line: bytes, body: bytes | None = None) -> bytes:
    return line + (struct.pack(">I", len(body)) + body if body is not None else b"")


def run(
    address: tuple[str, int], topic: str, channel: str, count: int, rdy: int
) -> tuple[float, list[float]]:
    """Consume ``count`` messages (FIN each): (seconds, latency samples).

    The server is sent no more than ``count`` messages: once fewer than ``rdy`` are left,
    each FIN run ends with ``RDY <left>``, so what is in flight never passes ``count``
    (nsqd sends while in flight < RDY; every message sent before was FINed or counted in
    ``left``). A server counted per consumed message then does not send, and take back on
    CLS, up to ``rdy`` messages more in one run than in another.
    """
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    identify = json.dumps({"user_agent": "nsqbox-bench-reader"}).encode()
    sock.sendall(
        MAGIC
        + _command(b"IDENTIFY\n", identify)
        + f"SUB {topic} {channel}\n".encode()
        + f"RDY {min(rdy, count)}\n".encode()
    )
    received = 0
    responses = 0
    buf = bytearray()
    latencies: list[float] = []
    start = None
    pos = 0
    while received < count:
        data = sock.recv(1 << 20)
        if not data:
            raise SystemExit("server closed the connection")
        if start is None:
            start = time.perf_counter()
        buf += data
        fins = []
        end = len(buf)
        while end - pos >= 8:
            size, ftype = HEADER.unpack_from(buf, pos)
            if end - pos < 4 + size:
                break
            if ftype == 2:
                fins.append(b"FIN " + buf[pos + 18 : pos + 34] + b"\n")
                if received % 1000 == 0:
                    (ts,) = TIMESTAMP.unpack_from(buf, pos + 8)
                    latencies.append(time.time() - ts / 1e9)
                received += 1
            elif ftype == 0:
                if buf[pos + 8 : pos + 4 + size] == b"_heartbeat_":
                    fins.append(b"NOP\n")
                responses += 1
            else:
                raise SystemExit(f"error frame: {bytes(buf[pos + 8 : pos + 4 + size])!r}")
            pos += 4 + size
        if pos:
            del buf[:pos]
            pos = 0
        if fins:
            left = count - received
            if left < rdy:  # the server sends no more than ``count`` (see :func:`run`)
                fins.append(b"RDY %d\n" % left)
            sock.sendall(b"".join(fins))
    elapsed = time.perf_counter() - (start or time.perf_counter())
    sock.sendall(b"CLS\n")
    sock.close()
    return elapsed, latencies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nsqd-tcp-address", default="127.0.0.1:4150")
    parser.add_argument("--topic", default="sub_bench")
    parser.add_argument("--channel", default="ch")
    parser.add_argument("--count", type=int, default=2_000_000)
    parser.add_argument("--rdy", type=int, default=2500)
    args = parser.parse_args(argv)
    host, _, port = args.nsqd_tcp_address.rpartition(":")
    elapsed, latencies = run((host, int(port)), args.topic, args.channel, args.count, args.rdy)
    print(
        f"reader: {args.count} msgs in {elapsed:.2f}s: {args.count / elapsed:,.0f} msgs/s, "
        f"e2e latency {percentiles(latencies)}",
        flush=True,
    )


if __name__ == "__main__":
    main()
