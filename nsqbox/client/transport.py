"""The upgrade seam: stack TLS, snappy or deflate on a connection's trio stream.

nsqd answers IDENTIFY and then expects the agreed layers at once, so bytes that
arrived together with the IDENTIFY reply may already belong to the next layer
(a compressed ``OK``). Those ``buffered`` bytes are handed to the new layer,
which decodes them before anything it reads from the socket (the guide's
Encryption/Compression section; pynsq's ``bootstrap``). The layers themselves
are :mod:`nsqbox.net.streams`, shared with nsqd.
"""

from __future__ import annotations

import ssl

import trio

from ..net.streams import DeflateStream, SnappyStream, upgrade_tls
from .config import Config
from .errors import HandshakeError
from .handshake import DEFLATE, SNAPPY, TLS, Negotiated

__all__ = ["upgrade_stream"]


async def upgrade_stream(
    stream: trio.abc.Stream,
    feature: str,
    buffered: bytes,
    config: Config,
    negotiated: Negotiated,
    host: str,
) -> trio.abc.Stream:
    """``stream`` with the ``feature`` layer on top; ``buffered`` bytes are fed into it."""
    if feature == TLS:
        try:
            return await upgrade_tls(
                stream,
                config.ssl_context(),
                server_side=False,
                server_hostname=config.tls_server_hostname or host,
                initial=buffered,
            )
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, ssl.SSLError) else exc
            raise HandshakeError(f"TLS handshake failed: {cause}") from exc
    if feature == SNAPPY:
        return SnappyStream(stream, initial=buffered)
    if feature == DEFLATE:
        # compress at the level nsqd agreed to (its reply caps ours at --max-deflate-level)
        level = negotiated.deflate_level or config.deflate_level
        return DeflateStream(stream, level, initial=buffered)
    raise HandshakeError(f"unknown upgrade {feature!r}")
