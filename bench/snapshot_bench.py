"""Saving and loading a big box state: throughput and peak memory (issue #34).

    python bench/snapshot_bench.py                     # 1,000,000 messages of 100 bytes
    python bench/snapshot_bench.py --messages 100000 --body-bytes 1000 --gzip

Starts ``nsqbox up`` (a child process, ports the OS picks, a data path of its own), publishes
``--messages`` messages to topic ``snap`` with channel ``c`` (nsqd's default
``--mem-queue-size`` of 10,000 keeps most on disk), then:

- ``save``: ``nsqbox snapshot save FILE`` through the admin service (one cut), timed from the
  command's start to its exit; the box's peak RSS during the save (``VmHWM`` after resetting
  it with ``/proc/PID/clear_refs``) and the command's own (``wait4``'s ``ru_maxrss``);
- ``up --load``: a fresh box started with ``--load FILE``, timed from start to its ready line,
  its peak RSS beside a fresh box started without a snapshot.

Throughput is the snapshot's bytes (uncompressed, for ``.gz``) and messages over the elapsed
time. Beside them, in the same run, what the machine itself does with the same bytes:

- ``disk_write_mb_per_s``: a ``dd``-like write of a file of that size, 1 MiB at a time,
  then ``fsync``; ``disk_read_mb_per_s``: reading it back once dropped from the page cache
  (``posix_fadvise(DONTNEED)`` after the fsync);
- ``decode_floor_s``: msgspec decoding the file's lines into the format's records, a MiB at
  a time, nothing else (the least a strict reader in Python does); ``encode_floor_s``:
  msgspec encoding those records as lines again (the least a saver in Python does);
  ``check_s``: the format's own strict read (:func:`~nsqbox.snapshot.files.check_snapshot`);
- CPU seconds (user + system) beside the elapsed ones: the box's during the save
  (``/proc/PID/stat``) and the command's, and the loaded box's at its ready line less an
  empty box's, since elapsed time on a shared machine also counts other work;
- ``load_average``: the machine's 1-minute load average at the start and at the end.

Figures go to stdout as JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

TOPIC = "snap"
BATCH = 1000


def _box(data: Path, *extra: str) -> tuple[subprocess.Popen[str], dict[str, Any], float]:
    """``nsqbox up`` started; its ready line and how long it took to print it."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nsqbox",
            "up",
            "--ephemeral-ports",
            "--ready-json",
            f"--data-path={data}",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"nsqbox up {' '.join(extra)} exited with {proc.wait()}")
    return proc, json.loads(line), time.perf_counter() - start


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _status(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` figure in bytes (``VmHWM``, ``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _publish(address: str, messages: int, body_bytes: int) -> None:
    host, _, port = address.rpartition(":")
    body = (b"x" * body_bytes)[:body_bytes]
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"  V2")
        reader = sock.makefile("rb")
        sent = 0
        while sent < messages:
            n = min(BATCH, messages - sent)
            payload = b"".join(struct.pack(">i", len(body)) + body for _ in range(n))
            payload = struct.pack(">i", n) + payload
            sock.sendall(f"MPUB {TOPIC}\n".encode() + struct.pack(">i", len(payload)) + payload)
            size, frame_type = struct.unpack(">ii", reader.read(8))
            answer = reader.read(size - 4)
            if frame_type != 0 or answer != b"OK":
                raise SystemExit(f"MPUB failed: {answer!r}")
            sent += n


def _data_bytes(path: Path) -> int:
    """The snapshot's bytes, uncompressed."""
    if path.suffix != ".gz":
        return path.stat().st_size
    with gzip.open(path, "rb") as stream:
        return sum(len(chunk) for chunk in iter(lambda: stream.read(1 << 20), b""))


def _timed_child(args: list[str]) -> tuple[float, int, int, float]:
    """Run a child; its wall time, exit status, peak RSS (bytes) and CPU seconds."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start, proc.returncode, usage.ru_maxrss * 1024, cpu


def _cpu(pid: int) -> float:
    """A process's CPU seconds so far (user + system, ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _disk(directory: Path, size: int) -> tuple[float, float]:
    """MB/s of writing ``size`` bytes to a new file in ``directory`` (1 MiB writes, then
    fsync) and of reading it back once dropped from the page cache."""
    path = directory / "dd.bin"
    block = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        left = size
        while left > 0:
            left -= os.write(fd, block[: min(left, len(block))])
        os.fsync(fd)
        write_s = time.perf_counter() - start
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        start = time.perf_counter()
        while os.read(fd, 1 << 20):
            pass
        read_s = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return size / 1e6 / write_s, size / 1e6 / read_s


def _decode_floor(path: Path) -> float:
    """Seconds to msgspec-decode the snapshot's records, a MiB of lines per call."""
    import msgspec

    from nsqbox.snapshot.files import open_for_reading
    from nsqbox.snapshot.format import Record

    decoder = msgspec.json.Decoder(Record)
    start = time.perf_counter()
    with open_for_reading(path) as stream:
        rest = stream.readline()[:0]  # the header is not a record
        while block := stream.read(1 << 20):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            decoder.decode_lines(block[:cut])
    return time.perf_counter() - start


def _encode_floor(path: Path) -> float:
    """Seconds msgspec takes to encode the snapshot's records as lines again, a MiB of lines
    per call (decoded first, untimed): the least a saver in Python does."""
    import msgspec

    from nsqbox.snapshot.files import open_for_reading
    from nsqbox.snapshot.format import Record

    decoder = msgspec.json.Decoder(Record)
    encoder = msgspec.json.Encoder()
    spent = 0.0
    with open_for_reading(path) as stream:
        rest = stream.readline()[:0]
        while block := stream.read(1 << 20):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            records = decoder.decode_lines(block[:cut])
            start = time.perf_counter()
            encoder.encode_lines(records)
            spent += time.perf_counter() - start
    return spent


def _create_channel(http: str) -> None:
    """The topic, then its channel ``c``, so the messages reach a channel (as nsqd, nsqbox
    answers ``404 TOPIC_NOT_FOUND`` to a channel of a topic it does not have)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy
    for path in (f"/topic/create?topic={TOPIC}", f"/channel/create?topic={TOPIC}&channel=c"):
        request = urllib.request.Request(f"http://{http}{path}", method="POST")
        with opener.open(request, timeout=10) as answer:  # an error status raises
            answer.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--gzip", action="store_true", help="save FILE.jsonl.gz")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    mb = 1_000_000
    figures: dict[str, Any] = {"messages": args.messages, "body_bytes": args.body_bytes}
    load_average = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="nsqbox-snapshot-bench-") as tmp:
        root = Path(tmp)
        snapshot = root / ("box.jsonl.gz" if args.gzip else "box.jsonl")
        box, ready, _ = _box(root / "a")
        try:
            http = ready["nsqd_http_address"]
            _create_channel(http)
            start = time.perf_counter()
            _publish(ready["nsqd_tcp_address"], args.messages, args.body_bytes)
            figures["publish_s"] = round(time.perf_counter() - start, 2)
            figures["box_rss_before_save_mb"] = round(_status(box.pid, "VmRSS") / mb, 1)
            _reset_peak(box.pid)
            box_cpu = _cpu(box.pid)
            elapsed, status, peak, command_cpu = _timed_child(
                [
                    sys.executable,
                    "-m",
                    "nsqbox",
                    "snapshot",
                    "save",
                    str(snapshot),
                    f"--admin-http-address={ready['admin_http_address']}",
                ]
            )
            if status:
                raise SystemExit(f"snapshot save exited with {status}")
            figures["file_mb"] = round(snapshot.stat().st_size / mb, 1)
            size = _data_bytes(snapshot)
            figures["data_mb"] = round(size / mb, 1)
            figures["save_s"] = round(elapsed, 2)
            figures["save_box_cpu_s"] = round(_cpu(box.pid) - box_cpu, 2)
            figures["save_command_cpu_s"] = round(command_cpu, 2)
            figures["save_mb_per_s"] = round(size / mb / elapsed, 1)
            figures["save_messages_per_s"] = round(args.messages / elapsed)
            figures["save_box_peak_rss_mb"] = round(_status(box.pid, "VmHWM") / mb, 1)
            figures["save_command_peak_rss_mb"] = round(peak / mb, 1)
        finally:
            _stop(box)
        empty, _, empty_s = _box(root / "empty")
        try:
            figures["empty_box_start_s"] = round(empty_s, 2)
            figures["empty_box_peak_rss_mb"] = round(_status(empty.pid, "VmHWM") / mb, 1)
            empty_cpu = _cpu(empty.pid)
        finally:
            _stop(empty)
        loaded, _, load_s = _box(root / "b", f"--load={snapshot}")
        try:
            figures["up_load_s"] = round(load_s, 2)
            figures["up_load_less_empty_start_s"] = round(load_s - empty_s, 2)
            figures["up_load_cpu_s_less_empty_start"] = round(_cpu(loaded.pid) - empty_cpu, 2)
            figures["up_load_mb_per_s"] = round(size / mb / load_s, 1)
            figures["up_load_messages_per_s"] = round(args.messages / load_s)
            figures["up_load_peak_rss_mb"] = round(_status(loaded.pid, "VmHWM") / mb, 1)
        finally:
            _stop(loaded)
        from nsqbox.snapshot.files import check_snapshot

        start = time.perf_counter()
        check_snapshot(snapshot)
        figures["check_s"] = round(time.perf_counter() - start, 2)
        figures["decode_floor_s"] = round(_decode_floor(snapshot), 2)
        figures["encode_floor_s"] = round(_encode_floor(snapshot), 2)
        write, read = _disk(root, size)
        figures["disk_write_mb_per_s"] = round(write, 1)
        figures["disk_read_mb_per_s"] = round(read, 1)
    figures["load_average"] = [load_average, round(os.getloadavg()[0], 2)]
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
