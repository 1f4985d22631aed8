"""End-to-end latency at a fixed publish rate: PUB at ``--rate``, consume with RDY, FIN each.

    python bench/latency_probe.py --nsqd-tcp-address 127.0.0.1:4150 --rate 20000 --duration 5

One process drives both connections (a publisher and a subscriber on a fresh
topic). Every millisecond the publisher sends the PUBs that are due; each body
starts with the monotonic time it was sent, and the subscriber records, for
every message it receives, now minus that time. The first ``--warmup`` seconds
are not counted. Prints ``e2e p50=...ms p99=...ms max=...ms`` and the rate reached.
"""

from __future__ import annotations

import argparse
import re
import select
import socket
import struct
import time

from bench_writer import percentiles

MAGIC = b"  V2"
HEADER = struct.Struct(">ii")
SENT = struct.Struct(">q")


def _connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC)
    return sock


def run(
    address: tuple[str, int],
    topic: str,
    rate: int,
    duration: float,
    warmup: float,
    size: int,
    tick: float = 0.001,
) -> tuple[list[float], int]:
    """(latencies in seconds, messages received) for ``duration`` seconds of publishing,
    the PUBs due sent together every ``tick`` seconds."""
    sub = _connect(address)
    sub.sendall(f"SUB {topic} ch\nRDY 2500\n".encode())
    pub = _connect(address)
    pad = b"x" * max(0, size - SENT.size)
    line = f"PUB {topic}\n".encode() + struct.pack(">I", SENT.size + len(pad))
    buf = bytearray()
    latencies: list[float] = []
    received = 0
    start = time.perf_counter()
    count_from = start + warmup
    stop = start + warmup + duration
    sent = 0
    next_send = start
    while True:
        now = time.perf_counter()
        if now < stop:
            if now >= next_send:
                next_send += tick
                due = int((now - start) * rate) - sent
                if due > 0:
                    stamp = SENT.pack(time.perf_counter_ns())
                    pub.sendall((line + stamp + pad) * due)
                    sent += due
        elif received >= sent:
            break
        elif now > stop + 10:
            raise SystemExit(f"only {received} of {sent} messages arrived")
        readable, _, _ = select.select([sub, pub], [], [], 0.001)
        if pub in readable and not pub.recv(1 << 16):
            raise SystemExit("publisher connection closed")
        if sub not in readable:
            continue
        data = sub.recv(1 << 20)
        if not data:
            raise SystemExit("subscriber connection closed")
        arrived = time.perf_counter_ns()
        buf += data
        pos = 0
        fins = []
        while len(buf) - pos >= 8:
            frame_size, frame_type = HEADER.unpack_from(buf, pos)
            if len(buf) - pos < 4 + frame_size:
                break
            if frame_type == 2:
                msg_id = bytes(buf[pos + 18 : pos + 34])
                fins.append(b"FIN " + msg_id + b"\n")
                (sent_ns,) = SENT.unpack_from(buf, pos + 34)
                if sent_ns >= count_from * 1e9:
                    latencies.append((arrived - sent_ns) / 1e9)
                received += 1
            elif frame_type == 1:
                raise SystemExit(f"error frame: {bytes(buf[pos + 8 : pos + 4 + frame_size])!r}")
            elif buf[pos + 8 : pos + 4 + frame_size] == b"_heartbeat_":
                fins.append(b"NOP\n")
            pos += 4 + frame_size
        del buf[:pos]
        if fins:
            sub.sendall(b"".join(fins))
    sub.close()
    pub.close()
    return latencies, received


def percentiles_of(output: str) -> tuple[float, float]:
    """The p50 and p99 (ms) of :func:`main`'s line in ``output``."""
    p50 = re.search(r"p50=([\d.]+)ms", output)
    p99 = re.search(r"p99=([\d.]+)ms", output)
    if p50 is None or p99 is None:
        raise SystemExit(f"no latency in {output!r}")
    return float(p50.group(1)), float(p99.group(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nsqd-tcp-address", default="127.0.0.1:4150")
    parser.add_argument("--topic", default="latency_probe")
    parser.add_argument("--rate", type=int, default=20_000, help="messages per second")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds not counted")
    parser.add_argument("--size", type=int, default=100, help="message size in bytes")
    parser.add_argument("--tick", type=float, default=0.001, help="seconds between sends")
    args = parser.parse_args(argv)
    host, _, port = args.nsqd_tcp_address.rpartition(":")
    latencies, received = run(
        (host, int(port)), args.topic, args.rate, args.duration, args.warmup, args.size, args.tick
    )
    reached = len(latencies) / args.duration
    print(
        f"latency: {received} msgs, {reached:,.0f} msgs/s measured, "
        f"e2e {percentiles(latencies, (50, 99, 100))}",
        flush=True,
    )


if __name__ == "__main__":
    main()
