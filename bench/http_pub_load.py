"""HTTP ``/pub`` under many keep-alive connections: nsqbox, real nsqd and the h11 ceiling.

    python bench/http_pub_load.py                                  # nsqbox and the h11 ceiling
    python bench/http_pub_load.py --nsqd-bin ../shared/nsq/bin/nsqd  # and real nsqd
    python bench/http_pub_load.py --connections 100,400,1000 --duration 8 --workers 2

For each server and each connection count a fresh server is started (in its own
process, ``--mem-queue-size`` large enough that nothing goes to disk), then
``--workers`` load processes open the connections all at once and, as wrk does,
each connection starts publishing as soon as it is connected: closed loop, one
``POST /pub?topic=...`` with a ``--size``-byte body, wait for the answer, repeat,
for ``--duration`` seconds. A request unanswered after ``--timeout`` seconds is a
timeout (its connection is closed and opened again). Latency is from writing the
request to reading the whole answer, so it includes waiting to be accepted.

Prints, per server and connection count: requests/s, latency p50/p99/max,
errors and timeouts, and the ratio of p99 and of requests/s to real nsqd's.
The h11 ceiling (``bench/h11_ok_server.py``) is trio + h11 answering a fixed
``OK``: what Python and h11 allow on one core with no broker behind them.
nsqbox passes it because a repeated plain head skips h11 (``nsqbox/http/fastpath.py``).

On a small machine the load processes and the server share the CPUs: the
figures are for the whole system, and wrk (``wrk -t2 -c400``, a POST script)
measures the same within noise.
"""

from __future__ import annotations

import argparse
import array
import multiprocessing
import multiprocessing.connection
import os
import platform
import resource
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_fd_limit(needed: int) -> None:
    """Room for ``needed`` descriptors here and in the servers and workers started from here."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise SystemExit(f"RLIMIT_NOFILE hard limit {hard} < {want}: raise it (ulimit -Hn)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


# -- servers -------------------------------------------------------------------


@dataclass
class ServerSpec:
    """How to start one kind of server on a given HTTP port."""

    name: str
    kind: str  # "nsqbox", "nsqd" or "h11"
    binary: str = ""

    def command(self, http_port: int, data: str) -> list[str]:
        if self.kind == "h11":
            return [PY, str(HERE / "h11_ok_server.py"), f"--port={http_port}"]
        flags = [
            f"--tcp-address=127.0.0.1:{free_port()}",
            f"--http-address=127.0.0.1:{http_port}",
            f"--data-path={data}",
            "--mem-queue-size=100000000",
            "--log-level=warn",
        ]
        if self.kind == "nsqd":
            return [self.binary, f"--https-address=127.0.0.1:{free_port()}", *flags]
        return [PY, "-m", "nsqbox", "nsqd", *flags]


@contextmanager
def running(spec: ServerSpec) -> Iterator[int]:
    """Start ``spec`` on a free port; yield the port once it accepts; stop it."""
    port = free_port()
    shm = Path("/dev/shm")
    data = tempfile.mkdtemp(prefix="nsqbox-httpload-", dir=shm if shm.is_dir() else None)
    proc = subprocess.Popen(
        spec.command(port, data), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{spec.name} did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        stop(proc, 30)
        shutil.rmtree(data, ignore_errors=True)


def stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the load ------------------------------------------------------------------

#: System calls a process sleeps in while trio waits for its sockets (``/proc/PID/syscall``'s
#: first field): epoll_wait, epoll_pwait, epoll_pwait2.
EPOLL_WAITS = {"x86_64": (b"232 ", b"281 ", b"441 "), "aarch64": (b"22 ", b"441 ")}
#: Without a readable ``/proc/PID/syscall``, a paced load sleeps this long between requests.
PAUSE = 0.005
#: A paced load's bound on waiting for the server to sleep, and on its whole run (seconds).
PACE_WAIT = 5.0
PACE_RUN = 600.0


@dataclass(frozen=True)
class Pace:
    """A load for counting a server's instructions (``side_by_side.py --callgrind``):
    ``requests`` answers per connection, each request sent only once the server ``pid`` sleeps
    waiting for it. After an answer the server reads again; whether that read finds the next
    request or nothing (then it waits: tens of thousands of instructions under callgrind)
    depends on timing, so unpaced the count moves between identical runs. Paced, every
    request meets exactly one such wait, and the count is fixed whatever the load's duration.
    """

    pid: int
    requests: int

    def wait(self, bound: float = PACE_WAIT) -> bool:
        """True once the server sleeps in epoll; False after ``bound`` seconds, or after
        :data:`PAUSE` if this system does not say what the server is waiting in."""
        waits = EPOLL_WAITS.get(platform.machine())
        deadline = time.perf_counter() + bound
        try:
            with open(f"/proc/{self.pid}/syscall", "rb", buffering=0) as proc:
                while waits:
                    if proc.read(16).startswith(waits):
                        return True
                    if time.perf_counter() > deadline:
                        return False
                    time.sleep(0.0001)
                    proc.seek(0)
        except OSError:
            pass
        time.sleep(PAUSE)
        return False


@dataclass
class Result:
    """What the workers measured for one server at one connection count."""

    latencies: array.array[float] = field(default_factory=lambda: array.array("d"))
    in_window: int = 0  # answered 200 OK within the timed window
    errors: int = 0  # non-200 answers, resets, failed connects
    timeouts: int = 0
    connect_max: float = 0.0  # slowest TCP connect

    def merge(self, other: Result) -> None:
        self.latencies.extend(other.latencies)
        self.in_window += other.in_window
        self.errors += other.errors
        self.timeouts += other.timeouts
        self.connect_max = max(self.connect_max, other.connect_max)


class _Conn:
    __slots__ = ("buf", "connected", "opened", "sent_at", "sock")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.buf = b""
        self.sent_at = 0.0  # 0: nothing in flight
        self.opened = now
        self.connected = False


def _answer(buf: bytes) -> tuple[int, int] | None:
    """(status, length of the whole answer) of the first complete answer in ``buf``."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buf[:end].lower()
    at = head.find(b"\r\ncontent-length:")
    length = 0
    if at >= 0:
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : stop if stop >= 0 else len(head)])
    total = end + 4 + length
    if len(buf) < total:
        return None
    return int(buf[9:12]), total


def load_worker(
    port: int,
    request: bytes,
    connections: int,
    start_at: float,
    duration: float,
    timeout: float,
    out: multiprocessing.connection.Connection,
    pace: Pace | None = None,
) -> None:
    """Drive ``connections`` closed-loop keep-alive connections; send a Result to ``out``.

    ``pace``: each connection sends its requests one by one as :class:`Pace` says, until it
    has its answers (the duration is then :data:`PACE_RUN`, a bound).
    """
    result = Result()
    ep = select.epoll()
    conns: dict[int, _Conn] = {}
    lat = result.latencies
    time.sleep(max(0.0, start_at - time.time()))
    begin = time.perf_counter()
    stop = begin + (PACE_RUN if pace else duration)

    def open_one(now: float) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        conn = _Conn(sock, now)
        conns[sock.fileno()] = conn
        ep.register(sock.fileno(), select.EPOLLOUT)

    def close(fd: int) -> None:
        conn = conns.pop(fd)
        ep.unregister(fd)
        conn.sock.close()

    def send(conn: _Conn, now: float) -> None:
        conn.sent_at = now
        conn.sock.send(request)  # small: always fits in an empty socket buffer

    for _ in range(connections):
        open_one(begin)
    next_sweep = begin + 0.1
    while conns:
        events = ep.poll(0.05)
        now = time.perf_counter()
        for fd, mask in events:
            conn = conns.get(fd)
            if conn is None:
                continue
            if not conn.connected:
                err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err or mask & (select.EPOLLERR | select.EPOLLHUP):
                    result.errors += 1
                    close(fd)
                    if now < stop:
                        open_one(now)
                    continue
                conn.connected = True
                result.connect_max = max(result.connect_max, now - conn.opened)
                ep.modify(fd, select.EPOLLIN)
                if now < stop:
                    send(conn, now)
                else:
                    close(fd)
                continue
            try:
                data = conn.sock.recv(65536)
            except ConnectionError:
                data = b""
            if not data:
                result.errors += 1
                close(fd)
                if now < stop:
                    open_one(now)
                continue
            conn.buf += data
            answer = _answer(conn.buf)
            if answer is None:
                continue
            status, size = answer
            conn.buf = conn.buf[size:]
            lat.append(now - conn.sent_at)
            conn.sent_at = 0.0
            if status != 200:
                result.errors += 1
            elif now < stop:
                result.in_window += 1
            if pace is not None and result.in_window >= pace.requests * connections:
                stop = now
            if now < stop:
                if pace is not None:
                    pace.wait()
                    now = time.perf_counter()
                send(conn, now)
            else:
                close(fd)
        if now >= next_sweep:
            next_sweep = now + 0.1
            for fd, conn in list(conns.items()):
                waited_since = conn.sent_at if conn.connected else conn.opened
                if (conn.sent_at or not conn.connected) and now - waited_since > timeout:
                    result.timeouts += 1
                    close(fd)
                    if now < stop:
                        open_one(now)
                elif now >= stop and not conn.sent_at and conn.connected:
                    close(fd)
    ep.close()
    out.send(result)
    out.close()


def run_load(
    port: int,
    topic: str,
    size: int,
    connections: int,
    workers: int,
    duration: float,
    timeout: float,
    *,
    batch: int = 0,
    pace: Pace | None = None,
) -> Result:
    """``connections`` spread over ``workers`` processes, all starting at the same moment.

    ``batch`` > 0 posts ``/mpub`` with that many newline-separated messages instead.
    ``pace``: a paced load of one connection (:class:`Pace`), for counting instructions.
    """
    body = b"x" * size
    path = "pub"
    if batch:
        body = b"\n".join([body] * batch)
        path = "mpub"
    request = (
        f"POST /{path}?topic={topic} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    ctx = multiprocessing.get_context("fork")
    start_at = time.time() + 0.5
    procs = []
    pipes = []
    for w in range(workers):
        share = connections // workers + (1 if w < connections % workers else 0)
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=load_worker,
            args=(port, request, share, start_at, duration, timeout, send, pace),
        )
        proc.start()
        send.close()
        procs.append(proc)
        pipes.append(receive)
    total = Result()
    for receive, proc in zip(pipes, procs, strict=True):
        total.merge(receive.recv())
        proc.join()
    return total


# -- report --------------------------------------------------------------------


def percentile(ordered: list[float], p: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


@dataclass
class Row:
    server: str
    connections: int
    rps: float
    p50: float
    p99: float
    max: float
    errors: int
    timeouts: int
    connect_max: float


def summarize(server: str, connections: int, duration: float, result: Result) -> Row:
    ordered = sorted(result.latencies)
    return Row(
        server=server,
        connections=connections,
        rps=result.in_window / duration,
        p50=percentile(ordered, 50),
        p99=percentile(ordered, 99),
        max=ordered[-1] if ordered else float("nan"),
        errors=result.errors,
        timeouts=result.timeouts,
        connect_max=result.connect_max,
    )


def print_row(row: Row, reference: Row | None) -> None:
    ratio = ""
    if reference is not None and reference is not row:
        ratio = (
            f"  vs nsqd: p99 x{row.p99 / reference.p99:.1f}, req/s x{row.rps / reference.rps:.2f}"
        )
    print(
        f"{row.server:<8} {row.connections:>5} conns: {row.rps:>8,.0f} req/s  "
        f"p50 {row.p50 * 1000:7.1f} ms  p99 {row.p99 * 1000:7.1f} ms  "
        f"max {row.max * 1000:7.1f} ms  errors {row.errors}  timeouts {row.timeouts}{ratio}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nsqd-bin", help="real nsqd, measured with the same flags and load")
    parser.add_argument("--connections", default="100,400,1000", help="comma-separated counts")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measurement")
    parser.add_argument("--timeout", type=float, default=10.0, help="per-request timeout (s)")
    parser.add_argument("--size", type=int, default=100, help="message body in bytes")
    parser.add_argument("--workers", type=int, default=2, help="load-generating processes")
    parser.add_argument("--servers", default="nsqd,nsqbox,h11", help="which to run, in order")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.connections.split(",")]
    raise_fd_limit(2 * max(counts))
    specs = {
        "nsqbox": ServerSpec("nsqbox", "nsqbox"),
        "h11": ServerSpec("h11", "h11"),
    }
    if args.nsqd_bin:
        specs["nsqd"] = ServerSpec("nsqd", "nsqd", os.path.abspath(args.nsqd_bin))
    order = [name for name in args.servers.split(",") if name in specs]
    print(
        f"POST /pub, {args.size}-byte bodies, {args.duration:g} s per run, "
        f"{args.workers} load processes, timeout {args.timeout:g} s, "
        f"{os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    rows: dict[tuple[str, int], Row] = {}
    for connections in counts:
        for name in order:
            with running(specs[name]) as port:
                result = run_load(
                    port,
                    "http_load",
                    args.size,
                    connections,
                    args.workers,
                    args.duration,
                    args.timeout,
                )
            row = rows[name, connections] = summarize(name, connections, args.duration, result)
            print_row(row, rows.get(("nsqd", connections)))
    if "nsqd" in order and "nsqbox" in order:
        print("\nnsqbox against real nsqd (p99 ratio must stay within 3x):")
        for connections in counts:
            ours, theirs = rows["nsqbox", connections], rows["nsqd", connections]
            print(
                f"  {connections:>5} conns: p99 x{ours.p99 / theirs.p99:.1f}, "
                f"req/s x{ours.rps / theirs.rps:.2f}, timeouts {ours.timeouts}"
            )
    if "h11" in order and "nsqbox" in order:
        print("\nnsqbox against the h11 ceiling:")
        for connections in counts:
            ours, ceiling = rows["nsqbox", connections], rows["h11", connections]
            print(
                f"  {connections:>5} conns: req/s x{ours.rps / ceiling.rps:.2f}, "
                f"p99 x{ours.p99 / ceiling.p99:.1f}"
            )


if __name__ == "__main__":
    main()
