"""Reading a peer's HTTP answer: a bounded body within one overall deadline.

The admin service reads every nsqd's ``/stats`` and every lookupd's ``/nodes`` and
``/lookup``; nsqd reads lookupds' ``/channels`` and its auth server's replies. Any of
those peers may be a stranger: a producer registered with a lookupd names its own
address. :func:`fetch` is the one way they are read, so that no answer costs more
than :data:`MAX_PEER_DOCUMENT` bytes of memory or more than the request timeout:

- the body is streamed and refused (:class:`DocumentTooLarge`) once it passes the cap,
  or at once when its ``Content-Length`` says it will;
- the whole exchange (connect, headers, body) runs within one deadline, the client's
  request timeout as a total (:class:`DocumentLate`), as Go's ``http.Client.Timeout``
  bounds NSQ's own reads; httpx's timeouts are per operation, so a peer trickling a
  byte a second would never trip them.

Both errors are :class:`httpx.HTTPError`, so a caller that handles a refused
connection handles these the same way: as that one peer's error.
It runs under trio and asyncio alike (anyio), as the admin's cluster reading does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import anyio
import httpx

__all__ = ["MAX_PEER_DOCUMENT", "DocumentLate", "DocumentTooLarge", "PeerResponse", "fetch"]

#: The largest answer read from a peer (16 MiB: a /stats of some 10,000 topics and channels).
MAX_PEER_DOCUMENT: Final = 16 * 1024 * 1024


class DocumentTooLarge(httpx.HTTPError):
    """The peer's answer is larger than the cap: nothing of it is used."""


class DocumentLate(httpx.TimeoutException):
    """The peer's answer was not complete within the overall deadline."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class PeerResponse:
    """A peer's complete, bounded answer."""

    status_code: int
    reason_phrase: str
    content: bytes
    headers: httpx.Headers

    @property
    def text(self) -> str:
        """The body as text (UTF-8, bad bytes replaced)."""
        return self.content.decode("utf-8", "replace")


def _declared_length(headers: httpx.Headers) -> int | None:
    value = headers.get("content-length")
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > 19:
        return None
    return int(value)


async def fetch(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    max_bytes: int = MAX_PEER_DOCUMENT,
    deadline: float | None = None,
    **kwargs: Any,
) -> PeerResponse:
    """``client.request(method, url, **kwargs)``, its body read whole but bounded.

    ``deadline`` (seconds for everything; default: the client's read timeout, which
    :func:`nsqbox.admin.clusterinfo.make_http_client` sets to the request timeout).
    :class:`DocumentTooLarge` past ``max_bytes``, :class:`DocumentLate` past the
    deadline, any other :class:`httpx.HTTPError` as httpx raises it.
    """
    total = deadline if deadline is not None else client.timeout.read
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(total):
            async with client.stream(method, url, **kwargs) as response:
                declared = _declared_length(response.headers)
                if declared is not None and declared > max_bytes:
                    raise DocumentTooLarge(f"answer of {declared} bytes is over {max_bytes}")
                # Past the cap the read is cancelled rather than abandoned: the cancellation
                # comes up through httpx's nested stream generators and ends each of them
                # (breaking out would leave them to the garbage collector, half read).
                with anyio.CancelScope() as cap:
                    async for chunk in response.aiter_bytes():
                        if cap.cancel_called:
                            continue  # buffered already: dropped until the next checkpoint
                        size += len(chunk)
                        if size > max_bytes:
                            chunks.clear()
                            cap.cancel()  # raised at the stream's next read
                            continue
                        chunks.append(chunk)
                if cap.cancel_called:
                    raise DocumentTooLarge(f"answer is over {max_bytes} bytes")
    except TimeoutError:
        raise DocumentLate(f"no complete answer within {total:g}s") from None
    return PeerResponse(
        response.status_code, response.reason_phrase, b"".join(chunks), response.headers
    )
