"""A binary MPUB body read over HTTP (``/mpub?binary=true``, ``/nsqbox/channel/mpub``).

nsqd's readMPUB over a whole body, ``[4B count]([4B size][data])*``, read by the protocol's
own MPUB parser (:class:`~nsqbox.wire.parser.CommandParser`), so both routes refuse exactly
what a TCP MPUB would.
"""

from __future__ import annotations

import struct
from typing import Final

from ...http import HTTPError
from ...wire.errors import NSQError
from ...wire.parser import CommandParser, MPUBBody

_UINT32: Final = struct.Struct(">I")


def read_binary_mpub(body: bytes, max_msg_size: int, max_body_size: int) -> list[bytes]:
    """The messages of a binary MPUB body (the body's length is its declared size).

    Errors are nsqd's protocol codes without ``E_``, with status 413.
    """
    parser = CommandParser()
    parser.expect_mpub(max_body_size, max_msg_size, bounded_input=True)
    parser.receive_data(_UINT32.pack(len(body)) + body)
    try:
        event = parser.next_event()
        if isinstance(event, MPUBBody):
            return event.bodies
        error = parser.eof_error()
    except NSQError as exc:
        error = exc
    raise HTTPError(413, error.code.removeprefix("E_") if error else "BAD_BODY")
