"""What the journal costs: the same fixed workload on an nsqd with the journal on and off.

    python bench/journal_cost.py --workload pubsub --count 20000 --pairs 5
    python bench/journal_cost.py --workload pub --count 20000 --callgrind   # instructions

Starts ``python -m nsqbox nsqd`` (this tree) on free ports, once with the default journal
and once with ``--journal-size=0``, alternating, ``--pairs`` times. Each run drives one
closed-loop workload from this process and reads the server's ``/stats`` (memory) before and
after it: garbage collections, the longest collector pause of the last 256, and RSS.

Workloads (``--size`` B bodies, one topic with one channel):

- ``pub``: PUBs in windows of ``--window`` (send them, read their OKs), nobody consuming;
- ``pubsub``: the same with a consumer (RDY 2500) FINing each message as it arrives;
- ``mpub``: MPUBs of 200, then a consumer takes and FINs them all;
- ``latency``: ``bench/latency_probe.py`` at ``--rate`` PUBs a second for ``--count`` /
  ``--rate`` seconds: the end-to-end p50 and p99.

With ``--callgrind`` the server runs under ``valgrind --tool=callgrind`` and the figure is
its instructions per message: the run's total minus an idle run's (start, stop), over
``--count``. Instruction counts do not depend on the machine's load, only on the code
(and a little on how the kernel splits what the client sends, which both runs share).
"""

from __future__ import annotations

import argparse
import json
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from http_pub_load import free_port, stop
from latency_probe import run as probe

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
HEADER = struct.Struct(">ii")
TOPIC = "cost"


def _stats(http: int) -> dict[str, object]:
    url = f"http://127.0.0.1:{http}/stats?format=json&include_mem=true"
    with urllib.request.urlopen(url, timeout=60) as reply:
        doc: dict[str, object] = json.load(reply)
    return doc


def _connect(tcp: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", tcp))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b"  V2")
    return sock


def _frames(sock: socket.socket, buf: bytearray) -> list[tuple[int, bytes]]:
    """The whole frames ``sock`` has for us (blocks for at least one)."""
    out: list[tuple[int, bytes]] = []
    while not out:
        data = sock.recv(1 << 20)
        if not data:
            raise SystemExit("connection closed")
        buf += data
        pos = 0
        while len(buf) - pos >= 8:
            size, kind = HEADER.unpack_from(buf, pos)
            if len(buf) - pos < 4 + size:
                break
            out.append((kind, bytes(buf[pos + 8 : pos + 4 + size])))
            pos += 4 + size
        del buf[:pos]
    return out


class _Consumer:
    def __init__(self, tcp: int) -> None:
        self.sock = _connect(tcp)
        self.sock.sendall(f"SUB {TOPIC} ch\nRDY 2500\n".encode())
        self.buf = bytearray()
        self.received = 0
        self._ok = False

    def poll(self) -> None:
        """Take what arrived, FIN each message."""
        fins = []
        for kind, data in _frames(self.sock, self.buf):
            if kind == 2:
                fins.append(b"FIN " + data[10:26] + b"\n")
                self.received += 1
            elif kind == 1:
                raise SystemExit(f"error frame {data!r}")
            elif data == b"_heartbeat_":
                fins.append(b"NOP\n")
        if fins:
            self.sock.sendall(b"".join(fins))


def drive(workload: str, tcp: int, count: int, size: int, window: int) -> None:
    """Run ``workload`` for ``count`` messages against the nsqd at ``tcp``."""
    body = b"x" * size
    pub = _connect(tcp)
    pbuf = bytearray()
    consumer = _Consumer(tcp) if workload == "pubsub" else None
    if consumer is not None:  # its SUB's OK first
        while not consumer.buf and not select.select([consumer.sock], [], [], 0.01)[0]:
            pass
    if workload == "mpub":
        batch = 200
        frame = struct.pack(">I", batch) + (struct.pack(">I", size) + body) * batch
        cmd = f"MPUB {TOPIC}\n".encode() + struct.pack(">I", len(frame)) + frame
        for _ in range(count // batch):
            pub.sendall(cmd)
            _frames(pub, pbuf)
        consumer = _Consumer(tcp)
        while consumer.received < count:
            consumer.poll()
    else:
        cmd = f"PUB {TOPIC}\n".encode() + struct.pack(">I", size) + body
        sent = 0
        while sent < count:
            n = min(window, count - sent)
            pub.sendall(cmd * n)
            sent += n
            oks = 0
            while oks < n:
                socks = [pub] if consumer is None else [pub, consumer.sock]
                readable, _, _ = select.select(socks, [], [], 1.0)
                if consumer is not None and consumer.sock in readable:
                    consumer.poll()
                if pub in readable:
                    oks += len(_frames(pub, pbuf))
        while consumer is not None and consumer.received < count:
            consumer.poll()
    if consumer is not None:
        consumer.sock.close()
    pub.close()


def run_once(args: argparse.Namespace, journal: bool, count: int) -> dict[str, float]:
    """One server, one workload: what it cost."""
    tcp, http = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="nsqbox-cost-")
    cmd = [
        PY,
        "-m",
        "nsqbox",
        "nsqd",
        f"--tcp-address=127.0.0.1:{tcp}",
        f"--http-address=127.0.0.1:{http}",
        f"--data-path={data}",
        "--mem-queue-size=1000000",
        *([] if journal else ["--journal-size=0"]),
    ]
    out = Path(data) / "callgrind.out"
    if args.wrap:
        cmd[1:3] = [args.wrap]
    if args.callgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                for path in ("topic/create?", "channel/create?channel=ch&"):
                    url = f"http://127.0.0.1:{http}/{path}topic={TOPIC}"
                    urllib.request.urlopen(url, data=b"", timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("server did not start") from None
                time.sleep(0.05)
        before = _stats(http)["memory"]
        started = time.monotonic()
        lat: list[float] = []
        if count and args.workload == "latency":
            lat, _ = probe(("127.0.0.1", tcp), TOPIC, args.rate, count / args.rate, 1.0, args.size)
            lat.sort()
        elif count:
            drive(args.workload, tcp, count, args.size, args.window)
        took = time.monotonic() - started
        after = _stats(http)["memory"]
        rss = float(after["heap_in_use_bytes"]) / 2**20  # type: ignore[index]
    finally:
        stop(proc, 120)
        if args.callgrind and args.keep:
            shutil.copy(out, Path(args.keep) / f"{args.workload}-{journal:d}-{count}.out")
        shutil.rmtree(data, ignore_errors=True)
    err = proc.stderr.read().decode() if proc.stderr else ""
    result = {
        "seconds": took,
        "collections": float(after["gc_total_runs"] - before["gc_total_runs"]),  # type: ignore[index,operator]
        "pause_max_us": float(after["gc_pause_usec_100"]),  # type: ignore[index]
        "rss_mb": rss,
    }
    if lat:
        result["p50_ms"] = lat[len(lat) // 2] * 1000
        result["p99_ms"] = lat[len(lat) * 99 // 100] * 1000
    for line in err.splitlines():
        if line.startswith("GCWRAP"):
            print(line)
    if args.callgrind:
        match = re.search(r"Collected : (\d+)", err)
        if match is None:
            raise SystemExit(f"no callgrind total: {err[-2000:]}")
        result["instructions"] = float(match.group(1))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    workloads = ("pub", "pubsub", "mpub", "latency")
    parser.add_argument("--workload", choices=workloads, default="pubsub")
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--window", type=int, default=1, help="PUBs sent before reading OKs")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=20_000, help="latency: PUBs a second")
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--keep", default="", help="callgrind: copy each profile here")
    parser.add_argument("--wrap", default="", help="a script run instead of -m nsqbox")
    args = parser.parse_args(argv)
    idle: dict[bool, float] = {}
    if args.callgrind:
        for journal in (True, False):
            idle[journal] = run_once(args, journal, 0)["instructions"]
    for pair in range(args.pairs):
        for journal in (True, False) if pair % 2 == 0 else (False, True):
            r = run_once(args, journal, args.count)
            line = (
                f"{args.workload} journal={'on ' if journal else 'off'} "
                f"{args.count / r['seconds']:9,.0f} msgs/s  collections {r['collections']:5.0f}  "
                f"longest pause {r['pause_max_us'] / 1000:6.2f} ms  RSS {r['rss_mb']:6.1f} MB"
            )
            if "p99_ms" in r:
                line += f"  e2e p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms"
            if args.callgrind:
                per = (r["instructions"] - idle[journal]) / args.count
                line += f"  instructions/msg {per:9,.0f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
