"""The nsqd benchmark suite: server and clients in separate processes.

    python bench/run.py            # ingest, consume, PUB one-at-a-time, memory; 3 runs, medians

Method (issue "nsqd core"): --mem-queue-size 1000000, one topic with one channel,
200-byte messages, MPUB batches of 200, the reader with RDY 2500 FINing everything;
memory is the server's RSS with 1,000,000 messages of 100 bytes queued. The same
writer also runs against --mem-queue-size 0, where every message goes to disk.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`nsqbox nsqd` in a subprocess on a free port."""

    def __init__(self, *flags: str) -> None:
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="nsqbox-bench-")
        cmd = [
            PY,
            "-m",
            "nsqbox",
            "nsqd",
            f"--tcp-address=127.0.0.1:{self.port}",
            "--http-address=",
            f"--data-path={self.data}",
            *flags,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise SystemExit(err) from None
                time.sleep(0.05)
        raise SystemExit("server did not start")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def client(script: str, *args: str) -> str:
    out = subprocess.run(
        [PY, str(HERE / script), *args], check=True, capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    print("   ", out, flush=True)
    return out


def rate(line: str) -> float:
    match = re.search(r"([\d,]+) msgs/s", line)
    assert match, line
    return float(match.group(1).replace(",", ""))


def create_channel(address: str, topic: str, channel: str) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"  V2" + f"SUB {topic} {channel}\n".encode())
        s.recv(100)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    os.chdir(HERE)
    ingest, consume, single, on_disk = [], [], [], []
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs}", flush=True)
        server = Server("--mem-queue-size=1000000")
        try:
            create_channel(server.address, "sub_bench", "ch")
            n = str(args.count)
            ingest.append(
                rate(client("bench_writer.py", "--nsqd-tcp-address", server.address, "--count", n))
            )
            consume.append(
                rate(client("bench_reader.py", "--nsqd-tcp-address", server.address, "--count", n))
            )
            single.append(
                rate(
                    client(
                        "bench_writer.py",
                        "--nsqd-tcp-address",
                        server.address,
                        "--topic",
                        "pub_bench",
                        "--batch-size",
                        "1",
                        "--count",
                        str(args.count // 10),
                    )
                )
            )
        finally:
            server.stop()
        server = Server("--mem-queue-size=0")
        try:
            create_channel(server.address, "disk_bench", "ch")
            on_disk.append(
                rate(
                    client(
                        "bench_writer.py",
                        "--nsqd-tcp-address",
                        server.address,
                        "--topic",
                        "disk_bench",
                        "--count",
                        str(args.count // 4),
                    )
                )
            )
        finally:
            server.stop()
    server = Server("--mem-queue-size=1000000")
    try:
        create_channel(server.address, "mem_bench", "ch")
        base = server.rss_mb()
        client(
            "bench_writer.py",
            "--nsqd-tcp-address",
            server.address,
            "--topic",
            "mem_bench",
            "--size",
            "100",
            "--count",
            "1000000",
        )
        rss = server.rss_mb()
    finally:
        server.stop()
    print(f"ingest  (MPUB x200, 200B): median {statistics.median(ingest):,.0f} msgs/s")
    print(f"consume (RDY 2500, 200B):  median {statistics.median(consume):,.0f} msgs/s")
    print(f"PUB one at a time (200B):  median {statistics.median(single):,.0f} msgs/s")
    print(
        f"ingest, --mem-queue-size 0 (all on disk): median {statistics.median(on_disk):,.0f} msgs/s"
    )
    print(
        f"memory: RSS {rss:.0f} MB with 1,000,000 x 100B queued on one channel "
        f"(idle server {base:.0f} MB)"
    )


if __name__ == "__main__":
    main()
