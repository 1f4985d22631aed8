"""The journal's memory over a long run: an nsqd's RSS while messages flow through it.

    python bench/journal_rss.py --count 10000000            # the issue's run
    python bench/journal_rss.py --count 2000000 --also-off  # and the same with the journal off

Starts ``python -m nsqbox nsqd`` (this tree) on free ports, a consumer FINing everything
(``bench/bench_reader.py``, RDY 2500) and a producer (``bench/bench_writer.py``, MPUB
batches of 200 x 200 B), and prints the server's RSS every ``--every`` seconds with how many
messages the consumer has had by then (the server's ``/stats``). With the journal on, RSS
should climb while the ring fills (``--journal-size`` entries, at most 64 MiB of messages)
and then stay flat: the ring drops what it no longer has room for.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from http_pub_load import free_port, stop

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def finished(http: int, topic: str) -> int:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{http}/stats?format=json&topic={topic}", timeout=10
    ) as response:
        doc = json.load(response)
    for t in doc.get("topics", []):
        for c in t.get("channels", []):
            return int(c.get("message_count", 0)) - int(c.get("depth", 0))
    return 0


def run(count: int, every: float, flags: list[str]) -> list[tuple[float, int, float]]:
    tcp, http = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="nsqbox-journal-rss-")
    log = open(Path(data) / "server.log", "wb")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [
            PY,
            "-m",
            "nsqbox",
            "nsqd",
            f"--tcp-address=127.0.0.1:{tcp}",
            f"--http-address=127.0.0.1:{http}",
            f"--data-path={data}",
            *flags,
        ],
        cwd=ROOT,
        stdout=log,
        stderr=log,
    )
    samples: list[tuple[float, int, float]] = []
    reader = writer = None
    try:
        deadline = time.monotonic() + 30
        while (Path(data) / "server.log").read_bytes().count(b"listening on") < 2:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit((Path(data) / "server.log").read_text())
            time.sleep(0.05)
        address = f"127.0.0.1:{tcp}"
        reader = subprocess.Popen(
            [
                PY,
                str(HERE / "bench_reader.py"),
                f"--nsqd-tcp-address={address}",
                "--topic=rss",
                f"--count={count}",
            ],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(1)  # subscribed before the first message
        writer = subprocess.Popen(
            [
                PY,
                str(HERE / "bench_writer.py"),
                f"--nsqd-tcp-address={address}",
                "--topic=rss",
                f"--count={count}",
            ],
            stdout=subprocess.DEVNULL,
        )
        start = time.monotonic()
        while reader.poll() is None:
            time.sleep(every)
            sample = (time.monotonic() - start, finished(http, "rss"), rss_mb(server.pid))
            samples.append(sample)
            print(f"  {sample[0]:7.1f}s {sample[1]:>12,} msgs  RSS {sample[2]:7.1f} MB", flush=True)
    finally:
        for proc in (writer, reader):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        stop(server, 60)
        log.close()
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000_000)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--journal-size", type=int, default=None, help="(default: nsqd's)")
    parser.add_argument("--also-off", action="store_true", help="then with --journal-size=0")
    args = parser.parse_args(argv)
    flags = [] if args.journal_size is None else [f"--journal-size={args.journal_size}"]
    runs = [("journal on", flags)] + (
        [("journal off", ["--journal-size=0"])] if args.also_off else []
    )
    for label, run_flags in runs:
        print(f"{label}: {args.count:,} messages", flush=True)
        samples = run(args.count, args.every, run_flags)
        if samples:
            rss = [s[2] for s in samples]
            half = rss[len(rss) // 2 :]
            print(
                f"{label}: RSS first {rss[0]:.1f} MB, max {max(rss):.1f} MB, "
                f"second half {min(half):.1f}-{max(half):.1f} MB"
            )


if __name__ == "__main__":
    main()
