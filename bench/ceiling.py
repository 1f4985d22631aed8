"""What one CPython core can do at best: bare loops doing only each workload's unavoidable work.

    python bench/ceiling.py

No sockets, no scheduler, no validation beyond what the wire format forces, no
stats: for each workload, the per-message steps any Python broker has to take
(read each size field and copy each body out of the receive buffer, make an id,
hold the message in an object and a queue; for consume, build each frame, track
it in flight, parse each FIN line and find its message). Prints msgs/s per
workload: a ceiling for the server's figure on one core, before the kernel's
share of the work (the socket copies), the event loop and the load generator,
which share the same cores.
"""

from __future__ import annotations

import struct
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsqbox.nsqd.domain.message import Message

SIZE = struct.Struct(">i")
FRAME = struct.Struct(">iiqH")


def mpub_ingest(batch: int, size: int, batches: int) -> float:
    """Per MPUB: every size field, every body copied out, ids, messages, one queue extend."""
    body = b"a" * size
    payload = bytearray(b"MPUB t\n" + SIZE.pack(4 + batch * (4 + size)) + SIZE.pack(batch))
    payload += (SIZE.pack(size) + body) * batch
    queue: deque[Message] = deque()
    unpack = SIZE.unpack_from
    node = 1 << 12
    start = time.perf_counter()
    for n in range(batches):
        buf = payload
        pos = buf.find(b"\n") + 9
        bodies = []
        for _ in range(batch):
            (length,) = unpack(buf, pos)
            end = pos + 4 + length
            bodies.append(bytes(buf[pos + 4 : end]))
            pos = end
        ts = time.time_ns()
        base = ((ts >> 20) << 22 | node) + n * batch
        queue.extend([Message(b"%016x" % (base + i) + b, ts) for i, b in enumerate(bodies)])
        if len(queue) > 1_000_000:
            queue.clear()
    return batch * batches / (time.perf_counter() - start)


def consume(count: int, rdy: int, size: int) -> float:
    """Per message: its frame, in flight by id, then its FIN line parsed and its id removed."""
    msgs = [Message(b"%016x" % i + b"a" * size, 0) for i in range(rdy)]
    in_flight: dict[bytes, Message] = {}
    pack = FRAME.pack
    start = time.perf_counter()
    for _ in range(count // rdy):
        out = bytearray()
        for msg in msgs:
            msg.attempts += 1
            data = msg.data
            in_flight[data[:16]] = msg
            out += pack(len(data) + 14, 2, msg.timestamp, msg.attempts)
            out += data
        fins = bytearray(b"".join(b"FIN " + m.data[:16] + b"\n" for m in msgs))
        pos = 0
        while (nl := fins.find(b"\n", pos)) >= 0:
            params = bytes(fins[pos:nl]).split(b" ")
            pos = nl + 1
            if params[0] == b"FIN":
                del in_flight[params[1]]
    return count // rdy * rdy / (time.perf_counter() - start)


def pub_one(count: int, size: int) -> float:
    """Per PUB: its line parsed, its size field, its body, an id, a message, an OK frame."""
    cmd = b"PUB t\n" + SIZE.pack(size) + b"a" * size
    chunk = bytearray(cmd * 1000)
    queue: deque[Message] = deque()
    ok = struct.pack(">ii", 6, 0) + b"OK"
    unpack = SIZE.unpack_from
    start = time.perf_counter()
    for n in range(count // 1000):
        buf = chunk
        pos = 0
        out = bytearray()
        for i in range(1000):
            nl = buf.find(b"\n", pos)
            params = bytes(buf[pos:nl]).split(b" ")
            (length,) = unpack(buf, nl + 1)
            end = nl + 5 + length
            ts = time.time_ns()
            queue.append(Message(b"%016x" % (n * 1000 + i) + bytes(buf[nl + 5 : end]), ts))
            pos = end
            if params[0] == b"PUB":
                out += ok
        if len(queue) > 1_000_000:
            queue.clear()
    return count // 1000 * 1000 / (time.perf_counter() - start)


def best(fn: Callable[[], float], runs: int = 3) -> float:
    return max(fn() for _ in range(runs))


ROWS: dict[str, tuple[str, Callable[[], float]]] = {
    "mpub200": ("MPUB ingest, 200 x 200 B", lambda: mpub_ingest(200, 200, 5_000)),
    "mpub1000": ("MPUB ingest, 1,000 x 100 B", lambda: mpub_ingest(1000, 100, 1_000)),
    "consume": ("consume, RDY 2500, FIN each, 200 B", lambda: consume(1_000_000, 2500, 200)),
    "pub": ("PUB one at a time, 200 B", lambda: pub_one(300_000, 200)),
}


def main() -> None:
    for key, (name, fn) in ROWS.items():
        print(f"{key:<9} {name:<36} {best(fn):>12,.0f} msgs/s (bare loop, one core)", flush=True)


if __name__ == "__main__":
    main()
