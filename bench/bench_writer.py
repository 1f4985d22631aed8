"""Publish MPUB batches as fast as the server acknowledges them (like NSQ's bench_writer).

    python bench/bench_writer.py --nsqd-tcp-address 127.0.0.1:4150 --count 2000000

Prints msgs/s, MB/s and the publish round-trip latency percentiles. ``--batch-size 1``
publishes with PUB, one message per command.
"""

from __future__ import annotations

import argparse
import socket
import struct
import time

MAGIC = b"  V2"
OK_FRAME = struct.pack(">ii", 6, 0) + b"OK"
HEARTBEAT_FRAME = struct.pack(">ii", 15, 0) + b"_heartbeat_"


def percentiles(samples: list[float], points: tuple[float, ...] = (50, 90, 99, 99.9)) -> str:
    """``p50=... p99=...`` in milliseconds."""
    if not samples:
        return "n/a"
    ordered = sorted(samples)
    parts = []
    for p in points:
        idx = min(len(ordered) - 1, int(len(ordered) * p / 100))
        parts.append(f"p{p:g}={ordered[idx] * 1000:.2f}ms")
    return " ".join(parts)


def build_command(topic: str, size: int, batch: int) -> bytes:
    body = b"a" * size
    if batch == 1:
        return f"PUB {topic}\n".encode() + struct.pack(">I", size) + body
    one = struct.pack(">I", size) + body
    payload = struct.pack(">I", batch) + one * batch
    return f"MPUB {topic}\n".encode() + struct.pack(">I", len(payload)) + payload


def run(
    address: tuple[str, int], topic: str, size: int, batch: int, count: int, window: int
) -> tuple[float, list[float]]:
    """Publish ``count`` messages; return (seconds, per-command latencies)."""
    cmd = build_command(topic, size, batch)
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC)
    commands = max(1, count // batch)
    sent = acked = 0
    pending: list[float] = []
    latencies: list[float] = []
    buf = b""
    start = time.perf_counter()
    while acked < commands:
        burst = min(window - (sent - acked), commands - sent)
        if burst > 0:
            now = time.perf_counter()
            sock.sendall(cmd * burst)
            pending.extend([now] * burst)
            sent += burst
        data = sock.recv(65536)
        if not data:
            raise SystemExit("server closed the connection")
        buf += data
        while (at := buf.find(HEARTBEAT_FRAME)) >= 0 and at % len(OK_FRAME) == 0:
            # a heartbeat (every 30 s) between the OKs: answered, as nsqd requires
            buf = buf[:at] + buf[at + len(HEARTBEAT_FRAME) :]
            sock.sendall(b"NOP\n")
        n = len(buf) // len(OK_FRAME)
        if n:
            if buf[: n * len(OK_FRAME)] != OK_FRAME * n:
                raise SystemExit(f"unexpected reply: {buf[:100]!r}")
            buf = buf[n * len(OK_FRAME) :]
            now = time.perf_counter()
            for t in pending[:n]:
                latencies.append(now - t)
            del pending[:n]
            acked += n
    elapsed = time.perf_counter() - start
    sock.close()
    return elapsed, latencies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nsqd-tcp-address", default="127.0.0.1:4150")
    parser.add_argument("--topic", default="sub_bench")
    parser.add_argument("--size", type=int, default=200, help="message size in bytes")
    parser.add_argument("--batch-size", type=int, default=200, help="messages per MPUB (1: PUB)")
    parser.add_argument("--count", type=int, default=2_000_000, help="messages to publish")
    parser.add_argument("--window", type=int, default=8, help="commands in flight at once")
    args = parser.parse_args(argv)
    host, _, port = args.nsqd_tcp_address.rpartition(":")
    elapsed, latencies = run(
        (host, int(port)), args.topic, args.size, args.batch_size, args.count, args.window
    )
    total = max(1, args.count // args.batch_size) * args.batch_size
    mode = "PUB" if args.batch_size == 1 else f"MPUB x{args.batch_size}"
    print(
        f"writer: {mode} {total} msgs of {args.size}B in {elapsed:.2f}s: "
        f"{total / elapsed:,.0f} msgs/s, {total * args.size / elapsed / 1e6:.1f} MB/s, "
        f"ack latency {percentiles(latencies)}",
        flush=True,
    )


if __name__ == "__main__":
    main()
