"""nsqbox and real nsqd side by side: the same workloads, alternating servers, one table.

    python bench/side_by_side.py --nsqd-bin ../shared/nsq/bin/nsqd \\
        --bench-writer ../shared/nsq/bin/bench_writer --bench-reader ../shared/nsq/bin/bench_reader
    python bench/side_by_side.py --quick                  # nsqbox alone, short runs
    python bench/side_by_side.py --nsqbox ../main --nsqbox . --nsqd-bin ...   # old tree vs new

Every server runs in its own process with the same flags on free ports; each workload
starts a fresh server. Each round runs every workload on every server, the servers in
a different order each round (so none is always first on a warm or cold machine);
the table shows the median of the rounds and each server's ratio to the reference
(real nsqd when given, else the first nsqbox tree). On a shared machine read the
ratios, not the absolute figures.

Workloads (``--mem-queue-size 1000000`` unless said, one topic with one channel):

- MPUB ingest, batches of 200 x 200 B for 6 s, 2 with ``--quick`` (NSQ's ``bench_writer``
  when given, else ``bench/bench_writer.py``), then consume with RDY 2500 FINing each
  (``bench_reader``, one connection per core, else ``bench/bench_reader.py``) for half as long;
- MPUB batches of 1,000 x 100 B, 1,000,000 messages; the server's RSS idle and with them queued;
- PUB one at a time, 200 B (``bench/bench_writer.py --batch-size 1``);
- MPUB ingest with ``--mem-queue-size 0`` (every message through the disk queue);
- HTTP ``/pub`` (100 B) and ``/mpub`` (100 x 100 B) from keep-alive connections, closed loop
  (``bench/http_pub_load.py``);
- end-to-end latency p50/p99 at a fixed rate of PUBs (``bench/latency_probe.py``);
- RSS growth per idle TCP connection, 1,000 of them (``bench/idle_connections.py``).

The table ends with two ceilings for Python on one core (with the last nsqbox tree's
message type). The trio floor (``bench/floor_server.py``, skip it with ``--no-floor``)
is a server doing only the I/O a trio server cannot avoid and the unavoidable
per-message work, run like the others on the tcp, memory, pub and http workloads
(with ``bench/h11_ok_server.py``, trio + h11 answering ``OK``, on the ``/pub`` load:
the row "HTTP /pub, h11 alone"); the bare loops (``bench/ceiling.py``, once per round,
the last column) do that work without any I/O.
A second table gives each server's CPU use during the throughput rows (cores busy,
from /proc) and its rate per busy core: real nsqd spreads over every core, nsqbox is
one Python process. ``--callgrind`` counts instead each nsqbox server's instructions per
message on the rows that do CPU work, load independent, pair by pair (bench/instructions.py):
``--callgrind --also-with=--journal-size=0`` is the journal's cost.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from http_pub_load import free_port, raise_fd_limit, run_load, stop
from idle_connections import idle_rows
from instructions import (
    COUNTED,
    MEMORY,
    MEMORY_ROWS,
    WALL_CLOCK_ONLY,
    Callgrind,
    callgrind_loads,
    counted_only,
    describe_loads,
    wrap,
)
from latency_probe import percentiles_of
from sbs_tables import (
    CEILING,
    CPU,
    ROWS,
    Samples,
    _figure,
    print_cpu_table,
    print_instruction_table,
    print_table,
)
from steady import steady_flags

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
#: The I/O floor's label, and the workloads it runs (it has nothing to show on the others).
FLOOR = "trio floor"
FLOOR_WORKLOADS = ("tcp", "memory", "pub", "http")
H11 = "h11_ok_server.py"


@dataclass(frozen=True)
class ServerSpec:
    """Real nsqd (``binary``), ``python -m nsqbox nsqd`` from the tree ``tree``, or a
    ``bench/`` server (``script``: the floor, or the h11 server) with ``tree``'s nsqbox."""

    label: str
    binary: str = ""
    tree: str = ""
    script: str = ""
    #: Flags this server gets besides every workload's (``--also-with``).
    extra: tuple[str, ...] = ()
    #: Run it under callgrind and count its instructions per message (bench/instructions.py).
    callgrind: bool = False

    @property
    def listeners(self) -> int:
        """How many "listening on" lines it logs when it is ready."""
        return 1 if self.script == H11 else 2

    def command(self, tcp: int, http: int, data: str, flags: list[str]) -> list[str]:
        if self.script == H11:
            return [PY, str(HERE / H11), f"--port={http}"]
        common = [
            f"--tcp-address=127.0.0.1:{tcp}",
            f"--http-address=127.0.0.1:{http}",
            f"--data-path={data}",
            *flags,
            *self.extra,
        ]
        if self.binary:
            return [self.binary, f"--https-address=127.0.0.1:{free_port()}", *common]
        if self.script:
            return [PY, str(HERE / self.script), *common]
        return [PY, "-m", "nsqbox", "nsqd", *common]


@dataclass
class Running:
    """A started server: its ports and pid (and its callgrind run, if under one)."""

    tcp: int
    http: int
    pid: int
    callgrind: Callgrind | None = None

    @property
    def tcp_address(self) -> str:
        return f"127.0.0.1:{self.tcp}"

    def cpu_seconds(self) -> float:
        """CPU time the server used so far (user + system, all its threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @contextmanager
    def cores(self, results: Results, key: str, kind: str = "published") -> Iterator[None]:
        """Record in ``results[key + CPU]`` how many cores the server kept busy meanwhile;
        under callgrind, in ``results[key + INSTR]`` its instructions per ``kind`` message."""
        counted = self.callgrind.counted(results, key, self.http, kind) if self.callgrind else None
        with counted or nullcontext():
            cpu, wall = self.cpu_seconds(), time.monotonic()
            yield
            results[key + CPU] = (self.cpu_seconds() - cpu) / (time.monotonic() - wall)

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else float("nan")


@contextmanager
def running(spec: ServerSpec, *flags: str) -> Iterator[Running]:
    """Start ``spec``; yield once both listeners logged "listening on"; SIGTERM it after.

    Real nsqd installs its SIGTERM handler only after it logs that it listens, so a
    signal sent before the line would kill it without its shutdown (and its files).
    """
    tcp, http = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="nsqbox-sbs-")
    log_path = Path(data) / "server.log"
    env = dict(os.environ)
    if spec.tree:
        env["PYTHONPATH"] = spec.tree
    command = spec.command(tcp, http, data, list(flags))
    if spec.callgrind:
        command = wrap(command, Path(data) / "callgrind.out")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=spec.tree or ROOT, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + (120 if spec.callgrind else 30)
        while log_path.read_bytes().count(b"listening on") < spec.listeners:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{spec.label} did not start:\n{log_path.read_text()}")
            time.sleep(0.02)
        counter = Callgrind(proc.pid, Path(data) / "callgrind.out") if spec.callgrind else None
        yield Running(tcp, http, proc.pid, counter)
    finally:
        stop(proc, 60)
        shutil.rmtree(data, ignore_errors=True)


def create_channel(server: Running, topic: str, channel: str | None = "ch") -> None:
    """The topic and its channel (None: the topic alone), through the HTTP API both
    servers share."""
    base = f"http://127.0.0.1:{server.http}"
    paths = [f"/topic/create?topic={topic}"]
    if channel is not None:
        paths.append(f"/channel/create?topic={topic}&channel={channel}")
    for path in paths:
        urllib.request.urlopen(urllib.request.Request(base + path, method="POST")).read()


def tool(*cmd: str) -> str:
    """Run a load program to its end; its output."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=HERE)
    return (out.stdout + out.stderr).strip()


def rate_of(output: str) -> float:
    """msgs/s from our clients' line or NSQ's ``...ops/s``."""
    match = re.search(r"([\d,.]+) ?(?:msgs|ops)/s", output)
    if match is None:
        raise SystemExit(f"no rate in {output!r}")
    return float(match.group(1).replace(",", ""))


# -- the workloads -----------------------------------------------------------------


@dataclass
class Settings:
    runfor: float
    pub_count: int
    http_seconds: float
    http_connections: int
    latency_seconds: float
    latency_rate: int
    bench_writer: str
    bench_reader: str
    mem_count: int = 1_000_000
    latency_tick: float = 0.001


Results = dict[str, float]
Workload = Callable[[ServerSpec, Settings], Results]


def _writer(address: str, settings: Settings, topic: str, rate_guess: int) -> float:
    if settings.bench_writer:
        return rate_of(
            tool(
                settings.bench_writer,
                f"--nsqd-tcp-address={address}",
                f"--topic={topic}",
                f"--runfor={settings.runfor}s",
            )
        )
    count = str(int(settings.runfor * rate_guess))
    return rate_of(
        tool(
            PY, "bench_writer.py", "--nsqd-tcp-address", address, "--topic", topic, "--count", count
        )
    )


def tcp_ingest_consume(spec: ServerSpec, settings: Settings) -> Results:
    results: Results = {}
    with running(spec, "--mem-queue-size=1000000", *steady_flags(spec)) as server:
        create_channel(server, "sub_bench")
        with server.cores(results, "mpub200"):
            results["mpub200"] = _writer(server.tcp_address, settings, "sub_bench", 300_000)
        with server.cores(results, "consume", "consumed"):
            if settings.bench_reader:
                out = tool(
                    settings.bench_reader,
                    f"--nsqd-tcp-address={server.tcp_address}",
                    f"--runfor={settings.runfor / 2}s",
                )
            else:
                count = str(int(settings.runfor * 300_000 / 2))
                out = tool(
                    PY, "bench_reader.py", "--nsqd-tcp-address", server.tcp_address,
                    "--count", count,
                )  # fmt: skip
        results["consume"] = rate_of(out)
        return results


def memory_mpub1000(spec: ServerSpec, settings: Settings) -> Results:
    with running(spec, "--mem-queue-size=1000000") as server:
        create_channel(server, "mem_bench")
        time.sleep(0.5)
        idle = server.rss_mb()
        args = ["--topic", "mem_bench", "--size", "100", "--batch-size", "1000"]
        results = {"rss_idle": idle}
        with server.cores(results, "mpub1000"):
            out = tool(PY, "bench_writer.py", "--nsqd-tcp-address", server.tcp_address, *args,
                       "--count", str(settings.mem_count))  # fmt: skip
        results["mpub1000"] = rate_of(out)
        results["rss_1m"] = server.rss_mb()
        return results


def pub_one_at_a_time(spec: ServerSpec, settings: Settings) -> Results:
    with running(spec, "--mem-queue-size=1000000") as server:
        create_channel(server, "pub_bench")
        args = ["--topic", "pub_bench", "--batch-size", "1", "--count", str(settings.pub_count)]
        results: Results = {}
        with server.cores(results, "pub"):
            out = tool(PY, "bench_writer.py", "--nsqd-tcp-address", server.tcp_address, *args)
        results["pub"] = rate_of(out)
        return results


def disk_ingest(spec: ServerSpec, settings: Settings) -> Results:
    with running(spec, "--mem-queue-size=0") as server:
        create_channel(server, "disk_bench")
        results: Results = {}
        with server.cores(results, "disk"):
            results["disk"] = _writer(server.tcp_address, settings, "disk_bench", 100_000)
        return results


def http_load(spec: ServerSpec, settings: Settings) -> Results:
    results: Results = {}
    loads = [(spec, "http_pub", 0), (spec, "http_mpub", 100)]
    if spec.script:  # the floor's turn: the h11 server on the /pub load too
        loads.append((ServerSpec("h11", tree=spec.tree, script=H11), "http_pub_h11", 0))
    for server_spec, key, batch in loads:
        with running(server_spec, "--mem-queue-size=100000000") as server:
            if server_spec.script != H11:
                # the topic exists before the count: its creation (imports, a metadata file)
                # is a one-off cost a closed loop would share out over a load-dependent count
                create_channel(server, "http_load", None)
            with server.cores(results, key):
                res = run_load(
                    server.http,
                    "http_load",
                    100,
                    settings.http_connections,
                    2,
                    settings.http_seconds,
                    10.0,
                    batch=batch,
                    pace=server.callgrind.pace(batch) if server.callgrind else None,
                )
        results[key] = res.in_window * (batch or 1) / settings.http_seconds
    return results


def latency(spec: ServerSpec, settings: Settings) -> Results:
    results: Results = {}
    with running(spec, "--mem-queue-size=1000000", *steady_flags(spec)) as server:
        create_channel(server, "latency_probe")  # a one-off, not the load's
        counted = server.callgrind.counted if server.callgrind else None
        with counted(results, "lat_p50", server.http, "published") if counted else nullcontext():
            out = tool(PY, "latency_probe.py", "--nsqd-tcp-address", server.tcp_address,
                       "--rate", str(settings.latency_rate),
                       "--duration", str(settings.latency_seconds),
                       "--tick", str(settings.latency_tick))  # fmt: skip
    p50, p99 = percentiles_of(out)
    return {**results, "lat_p50": p50, "lat_p99": p99}


WORKLOADS: dict[str, tuple[Workload, tuple[str, ...]]] = {
    "tcp": (tcp_ingest_consume, ("mpub200", "consume")),
    "memory": (memory_mpub1000, ("rss_idle", "mpub1000", "rss_1m")),
    "pub": (pub_one_at_a_time, ("pub",)),
    "disk": (disk_ingest, ("disk",)),
    "http": (http_load, ("http_pub", "http_mpub", "http_pub_h11")),
    "latency": (latency, ("lat_p50", "lat_p99")),
    "idle": (idle_rows, ("idle_identify", "idle_sub")),
}


def ceiling(tree: str) -> Results:
    """bench/ceiling.py's bare loops (with ``tree``'s message type): msgs/s by row."""
    out = subprocess.run(
        [PY, str(HERE / "ceiling.py")],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": tree},
    ).stdout
    return {line.split()[0]: rate_of(line) for line in out.splitlines() if "msgs/s" in line}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nsqd-bin", help="real nsqd: measured too, and the reference")
    parser.add_argument("--bench-writer", help="NSQ's bench_writer (else bench/bench_writer.py)")
    parser.add_argument("--bench-reader", help="NSQ's bench_reader (else bench/bench_reader.py)")
    parser.add_argument(
        "--nsqbox",
        action="append",
        help="an nsqbox source tree to measure (repeat: A/B); default: this one",
    )
    parser.add_argument(
        "--also-with",
        action="append",
        default=[],
        metavar="FLAGS",
        help="the last nsqbox tree again with these flags (space-separated), e.g. "
        "--also-with=--journal-size=0: on vs off, alternating as every server does",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-ceiling", action="store_true", help="skip bench/ceiling.py's bare loops"
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="skip bench/floor_server.py (and the h11 row)"
    )
    parser.add_argument("--quick", action="store_true", help="short runs, for iteration")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions: the nsqbox servers under callgrind on the rows that do CPU "
        "work (instructions per message, bench/instructions.py), the RSS rows as without it",
    )
    parser.add_argument("--only", help=f"comma-separated workloads of {','.join(WORKLOADS)}")
    args = parser.parse_args(argv)
    quick = args.quick
    settings = Settings(
        runfor=2.0 if quick else 6.0,
        pub_count=100_000 if quick else 400_000,
        http_seconds=2.0 if quick else 6.0,
        http_connections=100 if quick else 400,
        latency_seconds=2.0 if quick else 5.0,
        latency_rate=20_000,
        bench_writer=os.path.abspath(args.bench_writer) if args.bench_writer else "",
        bench_reader=os.path.abspath(args.bench_reader) if args.bench_reader else "",
    )
    specs: list[ServerSpec] = []
    if args.nsqd_bin:
        specs.append(ServerSpec("nsqd", binary=os.path.abspath(args.nsqd_bin)))
    trees = [os.path.abspath(t) for t in args.nsqbox or [str(ROOT)]]
    for tree in trees:
        label = "nsqbox" if len(trees) == 1 else f"nsqbox@{Path(tree).name}"
        specs.append(ServerSpec(label, tree=tree))
    for flags in args.also_with:
        specs.append(
            ServerSpec(f"{specs[-1].label} {flags}", tree=trees[-1], extra=tuple(flags.split()))
        )
    if args.callgrind:  # the floor and the bare loops count nothing of nsqbox's
        args.no_floor = args.no_ceiling = True
    if not args.no_floor:
        specs.append(ServerSpec(FLOOR, tree=trees[-1], script="floor_server.py"))
    names = args.only.split(",") if args.only else list(WORKLOADS)
    phases = [(name, False) for name in names]
    if args.callgrind:
        phases = [(n, True) for n in names if n in COUNTED] + [
            (n, False) for n in names if n in MEMORY
        ]
    loads = callgrind_loads(quick)
    cg_settings = Settings(**loads, bench_writer="", bench_reader="")  # type: ignore[arg-type]
    raise_fd_limit(max(2 * settings.http_connections, 2 * 1000 + 64))
    print(
        f"{len(specs)} servers x {len(names)} workloads x {args.rounds} rounds"
        f"{' (quick)' if quick else ''}; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}; writer {settings.bench_writer or 'bench_writer.py'}, "
        f"reader {settings.bench_reader or 'bench_reader.py'}",
        flush=True,
    )
    samples: Samples = {}
    for rnd in range(args.rounds):
        order = specs[rnd % len(specs) :] + specs[: rnd % len(specs)]
        for name, counted in phases:
            workload, _ = WORKLOADS[name]
            for spec in order:
                if spec.script and name not in FLOOR_WORKLOADS:
                    continue
                if counted and (spec.binary or spec.script):
                    continue  # callgrind counts Python's instructions, not Go's
                if counted:
                    results = workload(dataclasses.replace(spec, callgrind=True), cg_settings)
                    results, shown = counted_only(results)
                else:
                    results = workload(spec, settings)
                    if args.callgrind:
                        results = {k: v for k, v in results.items() if k in MEMORY_ROWS}
                    shown = ", ".join(
                        f"{k} {_figure(v, ROWS[k].unit)}" for k, v in results.items() if k in ROWS
                    )
                print(f"  round {rnd + 1} {name:<8} {spec.label:<16} {shown}", flush=True)
                for key, value in results.items():
                    samples.setdefault((spec.label, key), []).append(value)
        if not args.no_ceiling:
            for key, value in ceiling(trees[-1]).items():
                samples.setdefault((CEILING, key), []).append(value)
    print()
    if any(key in ROWS for _, key in samples):
        print_table(specs, samples)
    if args.callgrind:
        print(f"\nServer instructions per message under callgrind ({describe_loads(loads)}):\n")
        print_instruction_table(specs, samples)
        print(f"\n{WALL_CLOCK_ONLY}")
        return
    print("\nServer CPU during each row (cores busy: CPU seconds / wall seconds; the load")
    print("generators share the same cores), and the rate per busy core:\n")
    print_cpu_table(specs, samples)


if __name__ == "__main__":
    main()
