"""A text HTTP ``/mpub``'s server instructions per request under callgrind, journal on
against off (``--journal-size=0``), in alternating pairs.

    python bench/http_mpub_instructions.py [TREE] [--n 400] [--pairs 3] [--keep DIR]

Steadier than ``side_by_side.py --callgrind``'s HTTP row (a closed loop for a time): each
server (``python -m nsqbox nsqd`` from TREE, default this one, under ``valgrind
--tool=callgrind --instr-atstart=no``) gets ``--warm`` requests, then is counted only
while ``--n`` requests of ``--batch`` lines of ``--size`` bytes go one at a time on one
keep-alive connection (``callgrind_control -i on``, ``-z``, ``-d``). An idle stretch of
``--idle`` seconds before and after gives the timers' rate, taken off. ``--vary``: lines
of two sizes (never a run). ``--keep``: keep each counted profile there (for
``callgrind_annotate``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from http_pub_load import free_port, stop
from instructions import wrap


def ctl(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def summary(path: Path) -> int:
    """The total a callgrind dump counted."""
    m = re.search(r"^summary: (\d+)", path.read_text(errors="replace"), re.M)
    if m is None:
        raise SystemExit(f"no summary in {path}")
    return int(m.group(1))


def request(sock: socket.socket, req: bytes) -> None:
    """Send ``req``; read its whole answer, which must be a 200."""
    sock.sendall(req)
    buf = b""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n")[0]) if at >= 0 else 0
            if len(buf) >= end + 4 + length:
                if not buf.startswith(b"HTTP/1.1 200"):
                    raise SystemExit(f"answered {buf[:200]!r}")
                return
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("closed")
        buf += chunk


def one(tree: str, py: str, journal_off: bool, args: argparse.Namespace, tag: str) -> float:
    """One server's instructions per request (the idle rate taken off), printed too."""
    tcp, http = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="mpc-")
    out = Path(data) / "cg.out"
    server = [
        py,
        "-m",
        "nsqbox",
        "nsqd",
        f"--tcp-address=127.0.0.1:{tcp}",
        f"--http-address=127.0.0.1:{http}",
        f"--data-path={data}",
        "--mem-queue-size=100000000",
        "--log-level=warn",
    ]
    if journal_off:
        server.append("--journal-size=0")
    cmd = wrap(server, out)
    env = dict(os.environ, PYTHONPATH=tree)
    with open(Path(data) / "log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", http), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit((Path(data) / "log").read_text()) from None
                time.sleep(0.1)
        body = b"\n".join([b"x" * args.size] * args.batch)
        if args.vary:
            body = b"\n".join(b"x" * (args.size + (i % 2)) for i in range(args.batch))
        req = (
            f"POST /mpub?topic=http_load HTTP/1.1\r\nHost: 127.0.0.1:{http}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        create = (
            b"POST /topic/create?topic=http_load HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        sock = socket.create_connection(("127.0.0.1", http))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request(sock, create)
        for _ in range(args.warm):
            request(sock, req)
        time.sleep(0.5)
        ctl(proc.pid, "-i", "on")
        ctl(proc.pid, "-z")
        t0 = time.monotonic()
        time.sleep(args.idle)
        ctl(proc.pid, "-d")
        idle = summary(Path(f"{out}.1"))
        idle_t = time.monotonic() - t0
        t0 = time.monotonic()
        for _ in range(args.n):
            request(sock, req)
        took = time.monotonic() - t0
        ctl(proc.pid, "-d")
        dump = Path(f"{out}.2")
        total = summary(dump)
        t1 = time.monotonic()
        time.sleep(args.idle)
        ctl(proc.pid, "-d")
        ctl(proc.pid, "-i", "off")
        idle += summary(Path(f"{out}.3"))
        idle_t += time.monotonic() - t1
        if args.keep:
            shutil.copy(dump, Path(args.keep) / f"{tag}.{'off' if journal_off else 'on'}.out")
        sock.close()
        idle_rate = idle / idle_t
        per_req = (total - idle_rate * took) / args.n
        print(
            f"{tag} journal {'off' if journal_off else 'on '}: {per_req:,.0f} instr/request "
            f"({per_req / args.batch:,.1f}/msg; raw {total / args.n:,.0f}; "
            f"idle {idle_rate * took / total:.2%})",
            flush=True,
        )
        return per_req
    finally:
        stop(proc, 60)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("tree", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    p.add_argument("--py", default=sys.executable)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--warm", type=int, default=50)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--idle", type=float, default=1.0)
    p.add_argument("--vary", action="store_true")
    p.add_argument("--keep", default="")
    args = p.parse_args()
    ratios = []
    for i in range(args.pairs):
        on = one(args.tree, args.py, False, args, f"pair{i}")
        off = one(args.tree, args.py, True, args, f"pair{i}")
        ratios.append(on / off - 1)
        print(f"pair{i}: on/off {on / off - 1:+.2%} ({(on - off):,.0f} instr/request)", flush=True)
    ratios.sort()
    print("ratios", " ".join(f"{r:+.2%}" for r in ratios))


if __name__ == "__main__":
    main()
