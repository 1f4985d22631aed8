"""Publishing a recording's messages again over nsqd's HTTP API (issue #34; blocking, httpx).

:func:`replay` publishes a checked snapshot's message lines, in the file's order, to a topic:
through ``/mpub?binary=true`` (a message with ``delay_ms`` by itself, ``/pub?defer=``), or
into one channel only through nsqbox's ``POST /nsqbox/channel/mpub``. The first message goes at
once, each other one when its ``timestamp`` is as far from the first's as recorded, divided by
the speed (None: as fast as nsqd takes them); messages due together go in one MPUB (at most
:data:`BATCH_MESSAGES` messages or :data:`BATCH_BYTES` bytes). A message is sent when its time
comes from the start, not from the message before it, so a late one does not push the others
back. This follows wall time: the process's own monotonic clock.

:func:`start_step_replay` hands the file to the nsqd instead (uploaded in pieces, as a
snapshot load uploads it) and has the node publish each message when its *broker* clock reaches
the message's recorded offset from the first (``POST /nsqbox/replay/step``): under a manual
clock, an advance publishes exactly the messages due inside it, in order, before it returns.

Both are used by ``nsqbox replay`` and by the test handle's ``replay``. Real nsqd has neither
``/nsqbox/channel/mpub`` nor the step route (it answers ``404``): both raise
:class:`ReplayUnsupported` before anything is published.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .files import SnapshotReader, open_for_reading
from .format import MessageLine, SnapshotError, message_body
from .speed import STEP_PATH

if TYPE_CHECKING:  # httpx loads on first use
    import httpx

__all__ = [
    "BATCH_BYTES",
    "BATCH_MESSAGES",
    "ReplayError",
    "ReplayUnsupported",
    "StepReplayStarted",
    "replay",
    "start_step_replay",
]

#: The most messages, and body bytes, one MPUB carries.
BATCH_MESSAGES: Final = 1000
BATCH_BYTES: Final = 512 * 1024
_UINT32: Final = struct.Struct(">I")


class ReplayError(Exception):
    """Publishing failed part way, or the nsqd could not be reached; the message says why."""


class ReplayUnsupported(ReplayError):
    """The nsqd is not nsqbox (real nsqd answers ``404``): one-channel and step replays need
    nsqbox's routes. Nothing was published."""


def _url(address: str) -> str:
    return address if "://" in address else f"http://{address}"


def _messages(path: str | os.PathLike[str]) -> Iterator[MessageLine]:
    with open_for_reading(path) as stream:
        for record in SnapshotReader(stream):
            if type(record) is MessageLine:
                yield record


class _Publisher:
    """Sends batches to the topic, or to one channel of it."""

    def __init__(self, client: httpx.Client, url: str, topic: str, channel: str) -> None:
        self.client = client
        self.url = url
        self.topic = topic
        self.channel = channel
        self.sent = 0

    def send(self, bodies: list[bytes], defer_ms: int = 0) -> None:
        import httpx

        if not bodies:
            return
        params: dict[str, str | int] = {"topic": self.topic}
        if self.channel:
            url = f"{self.url}/nsqbox/channel/mpub"
            params["channel"] = self.channel
        elif defer_ms:
            url = f"{self.url}/pub"
        else:
            url = f"{self.url}/mpub"
            params["binary"] = "true"
        if defer_ms:
            params["defer"] = defer_ms
        if url.endswith("/pub"):
            content = bodies[0]
        else:
            parts = [_UINT32.pack(len(bodies))]
            for body in bodies:
                parts += (_UINT32.pack(len(body)), body)
            content = b"".join(parts)
        try:
            response = self.client.post(url, params=params, content=content)
        except httpx.HTTPError as exc:
            raise ReplayError(f"cannot reach nsqd at {self.url}: {exc}") from None
        if response.status_code == 404 and self.channel:
            raise ReplayUnsupported(
                f"--channel needs nsqbox: {self.url} has no /nsqbox/channel/mpub "
                "(real nsqd publishes to the whole topic only); nothing more was published"
            )
        if response.status_code != 200:
            raise ReplayError(
                f"publishing failed after {self.sent} messages: {url} answered "
                f"{response.status_code} {response.text.strip()}"
            )
        self.sent += len(bodies)


def replay(
    client: httpx.Client,
    path: str | os.PathLike[str],
    address: str,
    topic: str,
    *,
    channel: str = "",
    speed: float | None = 1.0,
) -> int:
    """Publish the (checked) file's messages to ``topic`` at the nsqd at ``address`` (module
    doc); how many were published. ReplayError when a publish fails (ReplayUnsupported for a
    ``channel`` on real nsqd: its first publish is refused, so nothing was published)."""
    import httpx

    url = _url(address)
    publisher = _Publisher(client, url, topic, channel)
    try:  # the connection made before the clock starts: the first message is not late
        client.get(f"{url}/ping")
    except httpx.HTTPError as exc:
        raise ReplayError(f"cannot reach nsqd at {url}: {exc}") from None
    batch: list[bytes] = []
    size = 0
    first: int | None = None
    start = time.monotonic()
    for record in _messages(path):
        if speed is not None:
            if first is None:
                first = record.timestamp
            due = start + max(0, record.timestamp - first) / 1e9 / speed
            wait = due - time.monotonic()
            if wait > 0:
                publisher.send(batch)
                batch, size = [], 0
                time.sleep(wait)
        body = message_body(record)
        if record.delay_ms:
            publisher.send(batch)
            batch, size = [], 0
            publisher.send([body], record.delay_ms)
            continue
        if batch and (len(batch) >= BATCH_MESSAGES or size + len(body) > BATCH_BYTES):
            publisher.send(batch)
            batch, size = [], 0
        batch.append(body)
        size += len(body)
    publisher.send(batch)
    return publisher.sent


@dataclass(frozen=True, slots=True)
class StepReplayStarted:
    """A replay the nsqd runs under its broker clock (``POST /nsqbox/replay/step``)."""

    #: Names it on the node (``DELETE /nsqbox/replay/step?id=`` stops it).
    id: str
    #: The file's messages, and how many of them were published at once (offset 0).
    messages: int
    published: int


def start_step_replay(
    client: httpx.Client,
    path: str | os.PathLike[str],
    address: str,
    topic: str,
    *,
    channel: str = "",
    speed: float = 1.0,
) -> StepReplayStarted:
    """Upload the (checked) file to the nsqd at ``address`` and have it publish each message
    when its broker clock reaches the message's recorded offset from the first, divided by
    ``speed``. ReplayUnsupported on real nsqd; ReplayError when the box's clock is real time
    or the node refuses; SnapshotError when the node finds the file bad (naming the line)."""
    import httpx

    from .transfer import SnapshotTransferError, upload

    url = _url(address)
    try:
        upload_id = upload(client, path, url)
    except SnapshotTransferError as exc:
        if exc.status == 404:
            raise ReplayUnsupported(
                f"--step needs nsqbox: {url} has no /nsqbox/snapshot/upload (real nsqd has "
                "no broker clock to follow); nothing was published"
            ) from None
        raise ReplayError(str(exc)) from None
    except httpx.HTTPError as exc:
        raise ReplayError(f"cannot reach nsqd at {url}: {exc}") from None
    params: dict[str, str] = {"id": upload_id, "topic": topic, "speed": repr(speed)}
    if channel:
        params["channel"] = channel
    try:
        response = client.post(f"{url}{STEP_PATH}", params=params)
    except httpx.HTTPError as exc:
        raise ReplayError(f"cannot reach nsqd at {url}: {exc}") from None
    doc: Any
    try:
        doc = response.json()
    except ValueError:
        doc = {}
    message = doc.get("message") if isinstance(doc, dict) else None
    if response.status_code == 200:
        return StepReplayStarted(str(doc["id"]), int(doc["messages"]), int(doc["published"]))
    if message == "INVALID_SNAPSHOT":
        raise SnapshotError(int(doc.get("line", 0)), str(doc.get("reason", "")))
    if message == "CLOCK_NOT_MANUAL":
        raise ReplayError(
            f"--step follows a manual broker clock: {url}'s clock is real time (start the box "
            "with nsqbox up --clock manual, or the fixture option clock='manual'); nothing was "
            "published"
        )
    raise ReplayError(
        f"{url}{STEP_PATH} answered {response.status_code} {message or response.text.strip()}"
    )
