"""Consume throughput through snappy and deflate (and plain, for comparison).

    python bench/bench_compression.py                # 500,000 messages per mode, 1 run
    python bench/bench_compression.py --count 1000000 --runs 3

For each mode a fresh ``nsqbox nsqd`` subprocess (``--mem-queue-size 1000000``)
gets ``--count`` 200-byte messages from ``bench_writer.py`` (plain MPUB); then a
reader in its own process negotiates the mode in IDENTIFY and consumes them with
RDY 2500, FINing everything through the same compressed stream. The reader uses
nsqbox's sans-IO codecs over a blocking socket, the way a blocking client would.

The bench writer's bodies are 200 ``a`` bytes, which compress far better than
real payloads; message ids and timestamps still differ per message.
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
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the nsqbox package, when run from a checkout

from run import Server, client, create_channel, rate  # noqa: E402

from nsqbox.wire.deflate import DeflateDecoder, DeflateEncoder  # noqa: E402
from nsqbox.wire.snappy import SnappyDecoder, SnappyEncoder  # noqa: E402

MAGIC = b"  V2"
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
HEADER = struct.Struct(">ii")
MODES = ("plain", "snappy", "deflate")


class _Plain:
    """No compression: the same interface as the codecs."""

    def __init__(self) -> None:
        self._pending = b""

    def encode(self, data: bytes) -> bytes:
        return data

    def receive_data(self, data: bytes) -> None:
        self._pending += data

    def read(self, max_bytes: int) -> bytes:
        data, self._pending = self._pending, b""
        return data


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) the server process used so far; nan without /proc.

    Steadier than msgs/s on a busy machine: it does not count time spent waiting.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICKS


def _read_frame(sock: socket.socket, buf: bytearray) -> bytes:
    """One plain frame's data (IDENTIFY's reply), leaving what follows in ``buf``."""
    while len(buf) < 8 or len(buf) < 4 + HEADER.unpack_from(buf)[0]:
        buf += sock.recv(65536)
    size, _ = HEADER.unpack_from(buf)
    data = bytes(buf[8 : 4 + size])
    del buf[: 4 + size]
    return data


def consume(address: tuple[str, int], mode: str, count: int, rdy: int, level: int) -> float:
    """Consume ``count`` messages through ``mode``; the seconds it took."""
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    identify = {
        "feature_negotiation": True,
        "user_agent": f"nsqbox-bench-compression/{mode}",
        "snappy": mode == "snappy",
        "deflate": mode == "deflate",
        "deflate_level": level,
    }
    body = json.dumps(identify).encode()
    sock.sendall(MAGIC + b"IDENTIFY\n" + struct.pack(">I", len(body)) + body)
    buf = bytearray()
    reply = json.loads(_read_frame(sock, buf))
    encoder: Any
    decoder: Any
    if mode == "snappy":
        assert reply["snappy"], reply
        encoder, decoder = SnappyEncoder(), SnappyDecoder()
    elif mode == "deflate":
        assert reply["deflate"], reply
        encoder, decoder = DeflateEncoder(reply["deflate_level"]), DeflateDecoder()
    else:
        encoder = decoder = _Plain()
    decoder.receive_data(bytes(buf))  # read to empty: what came behind the reply
    sock.sendall(encoder.encode(f"SUB sub_bench ch\nRDY {rdy}\n".encode()))
    plain = bytearray()
    received = 0
    start = None
    while received < count:
        data = sock.recv(1 << 20)
        if not data:
            raise SystemExit("server closed the connection")
        if start is None:
            start = time.perf_counter()
        decoder.receive_data(data)
        while chunk := decoder.read(1 << 20):
            plain += chunk
        pos = 0
        end = len(plain)
        fins = []
        while end - pos >= 8:
            size, frame_type = HEADER.unpack_from(plain, pos)
            if end - pos < 4 + size:
                break
            if frame_type == 2:
                fins.append(b"FIN " + plain[pos + 18 : pos + 34] + b"\n")
                received += 1
            elif frame_type == 0:
                if plain[pos + 8 : pos + 4 + size] == b"_heartbeat_":
                    fins.append(b"NOP\n")
            else:
                raise SystemExit(f"error frame: {bytes(plain[pos + 8 : pos + 4 + size])!r}")
            pos += 4 + size
        del plain[:pos]
        if fins:
            sock.sendall(encoder.encode(b"".join(fins)))
    elapsed = time.perf_counter() - (start or time.perf_counter())
    sock.sendall(encoder.encode(b"CLS\n"))
    sock.close()
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--count", type=int, default=500_000)
    parser.add_argument("--deflate-level", type=int, default=6)
    parser.add_argument("--modes", default=",".join(MODES))
    # internal: run only the reader (in its own process) against an address
    parser.add_argument("--read", metavar="MODE")
    parser.add_argument("--nsqd-tcp-address")
    args = parser.parse_args(argv)
    if args.read:
        host, _, port = args.nsqd_tcp_address.rpartition(":")
        elapsed = consume((host, int(port)), args.read, args.count, 2500, args.deflate_level)
        print(
            f"reader ({args.read}): {args.count} msgs in {elapsed:.2f}s: "
            f"{args.count / elapsed:,.0f} msgs/s",
            flush=True,
        )
        return
    os.chdir(HERE)
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for run in range(args.runs):
        for mode in args.modes.split(","):
            print(f"run {run + 1}/{args.runs}: {mode}", flush=True)
            server = Server("--mem-queue-size=1000000", f"--max-deflate-level={args.deflate_level}")
            try:
                create_channel(server.address, "sub_bench", "ch")
                n = str(args.count)
                client("bench_writer.py", "--nsqd-tcp-address", server.address, "--count", n)
                before = server_cpu(server.proc.pid)
                line = client(
                    "bench_compression.py",
                    "--read",
                    mode,
                    "--nsqd-tcp-address",
                    server.address,
                    "--count",
                    n,
                    "--deflate-level",
                    str(args.deflate_level),
                )
                used = server_cpu(server.proc.pid) - before
                results.setdefault(mode, []).append(rate(line))
                cpu.setdefault(mode, []).append(used / args.count * 1e6)
            finally:
                server.stop()
    for mode, rates in results.items():
        print(
            f"consume {mode:8} (RDY 2500, 200B): median {statistics.median(rates):,.0f} msgs/s, "
            f"server CPU {statistics.median(cpu[mode]):.2f} us/msg"
        )


if __name__ == "__main__":
    main()
