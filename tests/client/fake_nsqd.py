"""A scripted nsqd for what the real one never does: coalesced upgrade replies, an old IDENTIFY.

It answers IDENTIFY with a fixed reply and, for ``upgrade="snappy"|"deflate"``,
sends the compressed ``OK`` in the same write as that reply (so the client has
compressed bytes buffered before it switches layers). It answers SUB and PUB
with ``OK`` and CLS with ``CLOSE_WAIT``, records every command line, and
delivers its queued messages as RDY allows.
"""

from __future__ import annotations

from itertools import count

import trio

from nsqbox.net.streams import Decoder, Encoder
from nsqbox.wire.deflate import DeflateDecoder, DeflateEncoder
from nsqbox.wire.frames import MAGIC_V2, encode_response
from nsqbox.wire.message import encode_message_frame
from nsqbox.wire.parser import NEED_DATA, Body, Command, CommandParser
from nsqbox.wire.snappy import SnappyDecoder, SnappyEncoder


class FakeNSQD:
    def __init__(self, identify_reply: bytes, *, upgrade: str | None = None) -> None:
        self.identify_reply = identify_reply
        self.upgrade = upgrade
        self.port = 0
        self.commands: list[bytes] = []
        self.messages: list[bytes] = []
        self._ids = count()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        parser = CommandParser()
        encoder: Encoder | None = None
        decoder: Decoder | None = None
        magic = b""
        rdy = in_flight = 0
        async with stream:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                if len(magic) < 4:
                    take = 4 - len(magic)
                    magic, data = magic + data[:take], data[take:]
                    assert magic[:4] == MAGIC_V2[: len(magic)]
                if decoder is not None:
                    decoder.receive_data(data)
                    data = decoder.read(1 << 20)
                parser.receive_data(data)
                out = b""
                while (event := parser.next_event()) is not NEED_DATA:
                    if isinstance(event, Command):
                        self.commands.append(b" ".join(event.params))
                        if event.name in (b"IDENTIFY", b"PUB", b"AUTH"):
                            parser.expect_body(event.name.decode(), 1 << 20, message=False)
                        elif event.name == b"SUB":
                            out += encode_response(b"OK")
                        elif event.name == b"RDY":
                            rdy = int(event.params[1])
                        elif event.name in (b"FIN", b"REQ"):
                            in_flight -= 1
                        elif event.name == b"CLS":
                            rdy = 0
                            out += encode_response(b"CLOSE_WAIT")
                        continue
                    assert isinstance(event, Body)
                    if self.commands[-1] == b"IDENTIFY":
                        out += encode_response(self.identify_reply)
                        if self.upgrade == "snappy":
                            encoder, decoder = SnappyEncoder(), SnappyDecoder()
                        elif self.upgrade == "deflate":
                            encoder, decoder = DeflateEncoder(6), DeflateDecoder()
                        if encoder is not None:
                            # the compressed OK rides in the same write as the reply
                            await stream.send_all(out + encoder.encode(encode_response(b"OK")))
                            out = b""
                    else:
                        out += encode_response(b"OK")
                while self.messages and in_flight < rdy:
                    body = self.messages.pop(0)
                    msg_id = b"%016d" % next(self._ids)
                    out += encode_message_frame(1, 1, msg_id, body)
                    in_flight += 1
                if out:
                    await stream.send_all(encoder.encode(out) if encoder is not None else out)
