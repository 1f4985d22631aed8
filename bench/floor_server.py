"""The I/O floor: the least a Python + trio server does per message, sockets included.

    python bench/floor_server.py --tcp-address=127.0.0.1:4150 --http-address=127.0.0.1:4151

``bench/ceiling.py``'s bare loops leave the I/O out; this server puts in the I/O a
trio server cannot avoid and nothing else, so ``bench/side_by_side.py`` runs it
beside real nsqd and nsqbox under the same load generators (NSQ's bench_writer and
bench_reader, ``bench/bench_writer.py``, ``bench/http_pub_load.py``): its figures are
about the best a broker in Python on trio, in one process, can hope for.

What it does, as nsqbox's ``nsqd/tcp/connection.py`` does it: one task pair per protocol V2
connection (a reader; a writer for what the socket did not take at once); reads with
``os.readv`` into one scratch buffer, writes with ``os.write`` on the descriptor, and
falls back to ``trio.lowlevel.wait_readable``/``wait_writable`` only when that would
block; a turn's output goes out from the task that made it. Per message only the
unavoidable work: its size field read and its body copied out of the receive buffer,
a 16-byte hex id, a :class:`nsqbox.nsqd.domain.message.Message` (from the tree on PYTHONPATH),
a deque per channel (topics fan out, copying the message for each further channel),
delivery frames (size, type 2, timestamp, attempts, id + body) within each
subscriber's RDY, in flight in a dict by id until its FIN. Commands: IDENTIFY (answered
``OK``), SUB, RDY, FIN, PUB, MPUB, NOP, CLS. HTTP: ``/pub``, ``/mpub`` (newline
separated), ``/topic/create``, ``/channel/create`` and ``/ping`` on keep-alive
connections, parsed by hand (the head's end and ``Content-Length``), answered with a
fixed ``200 OK`` carrying nsqd's headers.

What it skips: validation beyond what framing forces (a bad command closes the
connection), error frames, stats, timeouts (message, read, write), heartbeats,
REQ/TOUCH/AUTH/DPUB, what CLS means (it is answered, deliveries go on), TLS,
compression, the disk queue (``--mem-queue-size`` and ``--data-path`` are accepted
and ignored: everything stays in memory), lookupd, the output high-water mark,
fairness budgets, and requeueing a closed consumer's in-flight messages (dropped).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from email.utils import formatdate
from functools import partial
from pathlib import Path

import trio

sys.path.append(str(Path(__file__).resolve().parent.parent))  # PYTHONPATH's tree comes first

from nsqbox.net.listeners import accept_batches
from nsqbox.nsqd.domain.message import Message

SIZE = struct.Struct(">i")
#: A delivery frame's head: size, frame type (2), timestamp, attempts; id + body follow.
FRAME = struct.Struct(">iiqH")
OK_FRAME = struct.pack(">ii", 6, 0) + b"OK"
CLOSE_WAIT_FRAME = struct.pack(">ii", 14, 0) + b"CLOSE_WAIT"
INVALID_FRAME = struct.pack(">ii", 13, 1) + b"E_INVALID"
#: Commands followed by a 4-byte size and a body.
WITH_BODY = frozenset({b"PUB", b"MPUB", b"IDENTIFY"})
#: Every read lands here and is copied out before the reading task awaits anything.
SCRATCH = [bytearray(256 * 1024)]
SCRATCH_VIEW = memoryview(SCRATCH[0])
HTTP_OK = (
    b"HTTP/1.1 200 OK\r\nX-Nsq-Content-Type: nsq; version=1.0\r\nDate: %s\r\n"
    b"Content-Length: 2\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nOK"
)
HTTP_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


async def receive(fd: int, buf: bytearray) -> bool:
    """Append the next bytes from ``fd`` to ``buf``; False at EOF or when the socket broke."""
    waited = False
    while True:
        try:
            size = os.readv(fd, SCRATCH)
            break
        except BlockingIOError:
            waited = True
            await trio.lowlevel.wait_readable(fd)
        except OSError:
            return False
    buf += SCRATCH_VIEW[:size]
    if size and not waited:
        await trio.lowlevel.checkpoint()  # the others' turn, as a wait would have given
    return size > 0


async def send_all(fd: int, data: bytearray) -> None:
    """Write all of ``data``, waiting for room when the socket is full."""
    with memoryview(data) as view:
        sent = 0
        while sent < len(view):
            try:
                sent += os.write(fd, view[sent:])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)


class Client:
    """A protocol V2 connection: its output buffer and, once subscribed, its RDY state."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.out = bytearray()
        self.wake = trio.Event()
        self.sending = False  # the writer task has a send in progress
        self.channel: Channel | None = None
        self.rdy = 0
        self.in_flight = 0

    def flush(self) -> None:
        """Write what is buffered from the calling task; the writer task sends any rest."""
        out = self.out
        if not out or self.sending:
            return
        try:
            sent = os.write(self.fd, out)
        except BlockingIOError:
            sent = 0
        except OSError:  # the peer is gone: its reader sees EOF
            out.clear()
            return
        del out[:sent]
        if out:
            self.wake.set()

    async def writer(self) -> None:
        while True:
            await self.wake.wait()
            self.wake = trio.Event()
            while self.out:
                data, self.out = self.out, bytearray()
                self.sending = True
                try:
                    await send_all(self.fd, data)
                except OSError:
                    return
                finally:
                    self.sending = False


class Channel:
    """Queued messages, in-flight messages by id, and the subscribers."""

    def __init__(self) -> None:
        self.queue: deque[Message] = deque()
        self.in_flight: dict[bytes, Message] = {}
        self.clients: list[Client] = []

    def deliver(self) -> None:
        """Fill each subscriber up to its RDY from the queue, and send what it got."""
        queue, in_flight, pack = self.queue, self.in_flight, FRAME.pack
        for client in self.clients:
            room = min(client.rdy - client.in_flight, len(queue))
            if room <= 0:
                continue
            out = client.out
            for _ in range(room):
                msg = queue.popleft()
                msg.attempts += 1
                data = msg.data
                in_flight[data[:16]] = msg
                out += pack(len(data) + 14, 2, msg.timestamp, msg.attempts)
                out += data
            client.in_flight += room
            client.flush()


class Topic:
    """Channels by name; messages published before the first channel wait for it."""

    def __init__(self) -> None:
        self.channels: dict[bytes, Channel] = {}
        self.held: list[Message] = []

    def channel(self, name: bytes) -> Channel:
        channel = self.channels.get(name)
        if channel is None:
            channel = self.channels[name] = Channel()
            channel.queue.extend(self.held)
            self.held = []
        return channel


class Broker:
    """Topics, the message id counter, and the channels to deliver from after this turn."""

    def __init__(self) -> None:
        self.topics: dict[bytes, Topic] = {}
        self.next_id = 1
        self.dirty: set[Channel] = set()
        self.date = (0, b"")

    def topic(self, name: bytes) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = Topic()
        return topic

    def publish(self, name: bytes, msgs: list[Message]) -> None:
        topic = self.topic(name)
        if not topic.channels:
            topic.held += msgs
            return
        first, *others = topic.channels.values()
        for channel in others:
            channel.queue.extend([msg.copy() for msg in msgs])
            self.dirty.add(channel)
        first.queue.extend(msgs)
        self.dirty.add(first)

    def messages(self, bodies: Sequence[bytes | memoryview]) -> list[Message]:
        """Each body copied after a fresh id (out of the receive buffer for a view)."""
        base, ts = self.next_id, time.time_ns()
        self.next_id += len(bodies)
        return [Message(b"%016x" % (base + i) + body, ts) for i, body in enumerate(bodies)]

    def end_turn(self) -> None:
        """Deliver from every channel this turn touched."""
        for channel in self.dirty:
            channel.deliver()
        self.dirty.clear()

    # -- protocol V2 ---------------------------------------------------------------
    async def tcp_conn(self, sock: socket.socket) -> None:
        client = Client(sock.fileno())
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.writer)
                await self.tcp_reader(client)
                nursery.cancel_scope.cancel()
        finally:
            if client.channel is not None:
                client.channel.clients.remove(client)
            trio.lowlevel.notify_closing(sock)
            sock.close()

    async def tcp_reader(self, client: Client) -> None:
        buf = bytearray()
        while len(buf) < 4:  # the protocol magic
            if not await receive(client.fd, buf):
                return
        del buf[:4]
        while True:
            try:
                pos = self.execute(client, buf)
            except Exception:  # what no validation caught costs the connection, not the server
                pos = -1
            self.end_turn()
            client.flush()
            if pos < 0:
                return
            del buf[:pos]
            if not await receive(client.fd, buf):
                return

    def execute(self, client: Client, buf: bytearray) -> int:
        """Run the complete commands in ``buf``: how far it got, or -1 to close."""
        pos, end, out, unpack = 0, len(buf), client.out, SIZE.unpack_from
        in_flight = client.channel.in_flight if client.channel is not None else {}
        finished = 0
        with memoryview(buf) as view:
            while (nl := buf.find(b"\n", pos)) >= 0:
                if buf.startswith(b"FIN ", pos):
                    if in_flight.pop(bytes(view[pos + 4 : nl]), None) is not None:
                        finished += 1
                    pos = nl + 1
                    continue
                verb, _, arg = bytes(view[pos:nl]).partition(b" ")
                if verb in WITH_BODY:
                    if end < nl + 5 or end < (stop := nl + 5 + unpack(buf, nl + 1)[0]):
                        break  # the body is not all here yet
                    if verb == b"MPUB":  # as messages(), inline: a list of views costs 18%
                        (count,) = unpack(buf, nl + 5)
                        at, base, ts, msgs = nl + 9, self.next_id, time.time_ns(), []
                        self.next_id += count
                        for n in range(base, base + count):
                            (size,) = unpack(buf, at)
                            at += 4
                            msgs.append(Message(b"%016x" % n + view[at : at + size], ts))
                            at += size
                        self.publish(arg, msgs)
                    elif verb == b"PUB":
                        self.publish(arg, self.messages([view[nl + 5 : stop]]))
                    out += OK_FRAME
                    pos = stop
                else:
                    pos = nl + 1
                    if verb == b"RDY":
                        client.rdy = int(arg)
                        if client.channel is not None:
                            self.dirty.add(client.channel)
                    elif verb == b"SUB":
                        topic, _, name = arg.partition(b" ")
                        client.channel = self.topic(topic).channel(name)
                        client.channel.clients.append(client)
                        in_flight = client.channel.in_flight
                        out += OK_FRAME
                    elif verb == b"CLS":
                        out += CLOSE_WAIT_FRAME
                    elif verb != b"NOP":
                        out += INVALID_FRAME
                        return -1
        if finished and client.channel is not None:
            client.in_flight -= finished
            self.dirty.add(client.channel)
        return pos

    # -- HTTP ----------------------------------------------------------------------
    async def http_conn(self, sock: socket.socket) -> None:
        fd, buf = sock.fileno(), bytearray()
        try:
            while await receive(fd, buf):
                out, pos = bytearray(), 0
                with memoryview(buf) as view:
                    while (head_end := buf.find(b"\r\n\r\n", pos)) >= 0:
                        head = bytes(view[pos:head_end])
                        at, length = head.lower().find(b"\r\ncontent-length:"), 0
                        if at >= 0:
                            line_end = head.find(b"\r\n", at + 2)
                            length = int(head[at + 17 : line_end if line_end >= 0 else None])
                        stop = head_end + 4 + length
                        if len(buf) < stop:
                            break  # the body is not all here yet
                        out += self.http_request(head, view[head_end + 4 : stop])
                        pos = stop
                del buf[:pos]
                self.end_turn()
                if out:
                    await send_all(fd, out)
        except Exception:  # as on TCP: a request no validation caught costs its connection
            pass
        finally:
            trio.lowlevel.notify_closing(sock)
            sock.close()

    def http_request(self, head: bytes, body: memoryview) -> bytes:
        target = head.split(b" ", 2)[1]
        path, _, query = target.partition(b"?")
        params = dict(part.partition(b"=")[::2] for part in query.split(b"&"))
        if path == b"/pub":
            self.publish(params[b"topic"], self.messages([body]))
        elif path == b"/mpub":
            bodies = [b for b in bytes(body).split(b"\n") if b]
            self.publish(params[b"topic"], self.messages(bodies))
        elif path == b"/topic/create":
            self.topic(params[b"topic"])
        elif path == b"/channel/create":
            self.topic(params[b"topic"]).channel(params[b"channel"])
        elif path != b"/ping":
            return HTTP_NOT_FOUND
        now = int(time.time())
        if self.date[0] != now:  # nsqd's Date header, formatted once a second
            self.date = (now, HTTP_OK % formatdate(now, usegmt=True).encode())
        return self.date[1]


async def _nodelay(
    handler: Callable[[socket.socket], Awaitable[None]], sock: socket.socket
) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await handler(sock)


async def serve(tcp_address: str, http_address: str) -> None:
    broker = Broker()
    async with trio.open_nursery() as nursery:
        for name, address, handler in (
            ("TCP", tcp_address, broker.tcp_conn),
            ("HTTP", http_address, broker.http_conn),
        ):
            host, _, port = address.rpartition(":")
            listener = (await trio.open_tcp_listeners(int(port), host=host, backlog=1024))[0]
            print(f"{name}: listening on {host}:{listener.socket.getsockname()[1]}", flush=True)
            nursery.start_soon(accept_batches, listener, nursery, partial(_nodelay, handler))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tcp-address", default="127.0.0.1:4150")
    parser.add_argument("--http-address", default="127.0.0.1:4151")
    parser.add_argument("--mem-queue-size", help="ignored: everything stays in memory")
    parser.add_argument("--data-path", help="ignored: nothing goes to disk")
    args, _ = parser.parse_known_args(argv)
    trio.run(serve, args.tcp_address, args.http_address)


if __name__ == "__main__":
    main()
