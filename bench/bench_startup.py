"""``nsqbox up`` start-up time: from process start to the first successful /ping on every service.

    python bench/bench_startup.py              # 10 runs, median (goal: <= 300 ms)
    python bench/bench_startup.py --runs 20 --nsqd-count 3

Each run picks free ports, starts ``python -m nsqbox up`` on them (fresh data directory, bytecode
cached as in an installed package), and
polls ``GET /ping`` on nsqd's, nsqlookupd's and the admin service's HTTP ports in a tight loop
over raw sockets; the time is taken when the last of them has answered ``200 OK``. The clock
starts just before the process is spawned, so interpreter start-up and imports count.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PY = sys.executable
REQUEST = b"GET /ping HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
#: Give up on a run after this many seconds.
RUN_TIMEOUT = 30.0


def free_ports(count: int) -> list[int]:
    """Ports free right now (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def ping(port: int) -> bool:
    """One ``GET /ping``; True on ``200``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(REQUEST)
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            return reply.startswith(b"HTTP/1.1 200 ")
    except OSError:
        return False


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time ``pid`` has used so far (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def child_env(pycache: str) -> dict[str, str]:
    """The environment of ``nsqbox up``: bytecode cached (in ``pycache``), as when installed.

    Some environments set PYTHONDONTWRITEBYTECODE, which makes every start compile nsqbox
    from source; a warm-up run fills ``pycache`` instead.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def one_run(nsqd_count: int, env: dict[str, str]) -> tuple[float, float | None]:
    """Seconds from spawn to every service answering /ping, and the CPU seconds used by then.

    The CPU time tells start-up cost apart from waiting on a busy machine.
    """
    ports = free_ports(5)
    nsqd_tcp, nsqd_http, lookupd_tcp, lookupd_http, admin_http = ports[:5]
    with tempfile.TemporaryDirectory(prefix="nsqbox-startup-") as data:
        command = [
            PY,
            "-m",
            "nsqbox",
            "up",
            f"--data-path={data}",
            f"--tcp-address=127.0.0.1:{nsqd_tcp}",
            f"--http-address=127.0.0.1:{nsqd_http}",
            f"--nsqlookupd-tcp-address=127.0.0.1:{lookupd_tcp}",
            f"--nsqlookupd-http-address=127.0.0.1:{lookupd_http}",
            f"--nsqadmin-http-address=127.0.0.1:{admin_http}",
            f"--nsqd-count={nsqd_count}",
        ]
        # Node i listens on the base ports plus 100*i; those must be free too.
        pending = {nsqd_http + 100 * i for i in range(nsqd_count)} | {lookupd_http, admin_http}
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
        )
        try:
            while pending:
                if process.poll() is not None:
                    assert process.stderr is not None
                    raise RuntimeError(f"nsqbox up exited: {process.stderr.read().decode()}")
                if time.perf_counter() - started > RUN_TIMEOUT:
                    raise TimeoutError("services did not answer /ping")
                pending = {port for port in pending if not ping(port)}
                time.sleep(0.0005)  # leave the CPU to the box between rounds
            return time.perf_counter() - started, cpu_seconds(process.pid)
        finally:
            process.terminate()
            process.wait(RUN_TIMEOUT)
            if process.stderr is not None:
                process.stderr.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--nsqd-count", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nsqbox-pycache-") as pycache:
        env = child_env(pycache)
        one_run(args.nsqd_count, env)  # warm the file cache and the bytecode; not counted
        runs = [one_run(args.nsqd_count, env) for _ in range(args.runs)]
    ms = sorted(wall * 1000 for wall, _ in runs)
    cpu = sorted(c * 1000 for _, c in runs if c is not None)
    print(
        f"nsqbox up (nsqd x{args.nsqd_count} + nsqlookupd + admin), {args.runs} runs: "
        f"median {statistics.median(ms):.0f} ms, min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms "
        f"(goal <= 300 ms)"
    )
    if cpu:
        print(f"CPU time used by then: median {statistics.median(cpu):.0f} ms")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
