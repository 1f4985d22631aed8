"""Saving and loading snapshots over nsqd's HTTP API, in bounded pieces (blocking, httpx).

:func:`save` asks each node for its cut (``POST /nsqbox/snapshot?node=i``, or takes the cuts
the admin service made in one pass over a box: ``POST /api/snapshot``), then writes the header,
each node's records as fetched piece by piece (``GET /nsqbox/snapshot?id=&offset=``) and the
end line; it removes the nodes' spools. (It does not read the file back: loading does, whole,
before it applies anything.)
:func:`load` reads the file's header, then uploads the file to each node in pieces
(``POST /nsqbox/snapshot/upload``) and has node ``i`` apply its records
(``POST /nsqbox/snapshot/load?node=i``), which reads it once, whole and strictly, before it
applies anything: a bad file is refused by the first node, with its line, and loads nothing.
With ``replace`` each node replaces what it holds with its records, and a node the file has
no records for (the box has more nsqds than the snapshot) is emptied as a fresh one would
be (an empty snapshot is uploaded to it).
Neither side holds more than a piece of the file (4 MiB fetched, :data:`PIECE_BYTES` uploaded).
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

import httpx

from .files import (
    SnapshotReader,
    SnapshotSummary,
    SnapshotWriter,
    open_for_reading,
    open_for_writing,
)
from .format import Header, SnapshotError
from .spool import SpoolConverter, SpoolError

__all__ = ["PIECE_BYTES", "Cut", "SnapshotTransferError", "cut_nodes", "load", "save", "upload"]

#: Bytes per upload (the most nsqd's upload route takes; a fetch gets what the node answers,
#: at most 4 MiB).
PIECE_BYTES: Final = 1024 * 1024
#: Bytes read from a fetched piece at a time.
_FETCH_CHUNK: Final = 256 * 1024
#: Chunks fetched ahead of the conversion (4 MiB).
_AHEAD: Final = 16


class SnapshotTransferError(Exception):
    """A node refused or could not be reached; the message says which and why, ``status``
    the HTTP status it answered (0: none)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Cut:
    """One node's cut, spooled on the node: where to fetch it and what it holds."""

    url: str
    id: str
    bytes: int
    topics: int
    channels: int
    messages: int
    clock: str = "real"
    clock_offset: float = 0.0
    saved_at_ns: int = 0

    @classmethod
    def of(cls, url: str, doc: dict[str, Any]) -> Cut:
        """The cut a node (or the admin service, for it) described in ``doc``."""
        try:
            return cls(
                url,
                str(doc["id"]),
                int(doc["bytes"]),
                int(doc["topics"]),
                int(doc["channels"]),
                int(doc["messages"]),
                str(doc.get("clock", "real")),
                float(doc.get("clock_offset", 0.0)),
                int(doc.get("saved_at_ns", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotTransferError(f"{url} described its cut wrongly ({exc})") from None


def _url(address: str) -> str:
    return address if "://" in address else f"http://{address}"


def _check(response: httpx.Response, url: str) -> httpx.Response:
    if response.status_code != 200:
        try:
            doc = response.json()
        except ValueError:
            doc = {}
        detail = doc.get("message") if isinstance(doc, dict) else None
        if detail == "INVALID_SNAPSHOT":
            raise SnapshotError(int(doc.get("line", 0)), str(doc.get("reason", "")))
        raise SnapshotTransferError(
            f"{url} answered {response.status_code} {detail or response.text.strip()}",
            response.status_code,
        )
    return response


def cut_nodes(client: httpx.Client, addresses: Sequence[str]) -> list[Cut]:
    """Each nsqd's cut, node ``i`` being ``addresses[i]`` (one after the other: not one
    consistent cut of them all; the admin service's ``/api/snapshot`` is, for a box)."""
    cuts = []
    for index, address in enumerate(addresses):
        url = _url(address)
        response = _check(client.post(f"{url}/nsqbox/snapshot", params={"node": index}), url)
        cuts.append(Cut.of(url, response.json()))
    return cuts


def _fetch(client: httpx.Client, cut: Cut, offset: int, sink: Callable[[bytes], None]) -> int:
    """Hand the piece of ``cut`` at ``offset`` to ``sink`` as it arrives (a piece is never
    held whole); how many bytes it had."""
    params: dict[str, str | int] = {"id": cut.id, "offset": offset}
    with client.stream("GET", f"{cut.url}/nsqbox/snapshot", params=params) as response:
        if response.status_code != 200:
            response.read()
            _check(response, cut.url)
        got = 0
        for data in response.iter_raw(_FETCH_CHUNK):
            sink(data)
            got += len(data)
        return got


class _Prefetch:
    """A cut's spool in chunks, fetched by a thread of its own while the caller converts
    the chunks before (at most :data:`_AHEAD` chunks ahead: the node's serving and this
    process's converting overlap, on two cores)."""

    def __init__(self, client: httpx.Client, cut: Cut) -> None:
        self._client = client
        self._cut = cut
        self._chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(_AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nsqbox-snapshot-fetch", daemon=True)

    def __enter__(self) -> Iterator[bytes]:
        self._thread.start()
        return self._take()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _take(self) -> Iterator[bytes]:
        while (item := self._chunks.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def _put(self, item: bytes | BaseException | None) -> None:
        while not self._stop.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped

    def _run(self) -> None:
        cut = self._cut
        try:
            offset = 0
            while offset < cut.bytes:
                got = _fetch(self._client, cut, offset, self._put)
                if not got:
                    raise SnapshotTransferError(f"{cut.url}'s cut ends at {offset} bytes")
                offset += got
            self._put(None)
        except _Stopped:
            pass
        except BaseException as exc:  # the caller raises it
            with contextlib.suppress(_Stopped):
                self._put(exc)


class _Stopped(Exception):
    """The caller stopped taking chunks."""


def save(
    client: httpx.Client, path: str | os.PathLike[str], cuts: Sequence[Cut]
) -> SnapshotSummary:
    """Write the snapshot of ``cuts`` (node ``i`` is ``cuts[i]``) to ``path``; its summary.

    Each node's spool is turned into snapshot lines here, as it is fetched
    (:class:`~.spool.SpoolConverter`): the per-message work is this process's, not the box's.
    """
    if not cuts:
        raise SnapshotTransferError("no nsqd to save")
    first = cuts[0]
    header = Header(0, len(cuts), min(c.saved_at_ns for c in cuts), first.clock, first.clock_offset)
    try:
        with open_for_writing(path, behind=True) as stream:
            writer = SnapshotWriter(stream, header)
            for cut in cuts:
                converter = SpoolConverter(writer)
                try:
                    with _Prefetch(client, cut) as chunks:
                        for chunk in chunks:
                            converter.feed(chunk)
                    converter.close()
                except SpoolError as exc:
                    raise SnapshotTransferError(f"{cut.url}'s cut is damaged: {exc}") from None
            writer.finish()
    finally:
        for cut in cuts:
            try:
                client.delete(f"{cut.url}/nsqbox/snapshot", params={"id": cut.id})
            except httpx.HTTPError:
                pass  # the node removes it with its next cut
    topics, channels, messages = writer.topics, writer.channels, writer.messages
    return SnapshotSummary(header, topics, channels, messages, topics + channels + messages + 2)


def _empty_snapshot() -> bytes:
    """A snapshot with nothing in it (what a node the file has no records for replaces
    its state with)."""
    buffer = io.BytesIO()
    SnapshotWriter(buffer, Header(0, 1)).finish()
    return buffer.getvalue()


def _upload(client: httpx.Client, url: str, upload_id: str, stream: IO[bytes]) -> None:
    offset = 0
    while piece := stream.read(PIECE_BYTES):
        params: dict[str, str | int] = {"id": upload_id, "offset": offset}
        _check(client.post(f"{url}/nsqbox/snapshot/upload", params=params, content=piece), url)
        offset += len(piece)


def load(
    client: httpx.Client,
    path: str | os.PathLike[str],
    addresses: Sequence[str],
    *,
    replace: bool = False,
) -> list[dict[str, Any]]:
    """Load the snapshot at ``path`` into the nsqds (node ``i`` into ``addresses[i]``),
    merged with what they hold, or with ``replace`` instead of it (every nsqd given).

    SnapshotError (naming the line) for a file that does not pass, before anything is
    loaded: the first node reads it whole, strictly, before it applies any of it (and the
    others get the same file); SnapshotTransferError when the box has fewer nodes than the
    snapshot. Each
    node's answer (``{"messages", "skipped", "removed"}``), in order. Each node records the
    load under the file's base name (the admin service's ``GET /api/snapshot``).
    """
    with open_for_reading(path) as stream:  # the header: each node checks the whole file
        nodes = SnapshotReader(stream).header.nodes
    if len(addresses) < nodes:
        raise SnapshotTransferError(
            f"the snapshot holds {nodes} nsqds; the box has {len(addresses)} "
            f"(start it with --nsqd-count {nodes})"
        )
    load_id = uuid.uuid4().hex
    name = os.path.basename(os.fspath(path))
    answers = []
    for index, address in enumerate(addresses if replace else addresses[:nodes]):
        url = _url(address)
        if index < nodes:
            upload_id = upload(client, path, url)
        else:
            upload_id = uuid.uuid4().hex
            _upload(client, url, upload_id, io.BytesIO(_empty_snapshot()))
        params: dict[str, str | int] = {
            "id": upload_id,
            "node": index,
            "replace": "true" if replace else "false",
            "name": name,
            "load": load_id,
        }
        answer = _check(client.post(f"{url}/nsqbox/snapshot/load", params=params), url)
        answers.append(answer.json())
    return answers


def upload(client: httpx.Client, path: str | os.PathLike[str], address: str) -> str:
    """Upload the snapshot at ``path`` (gunzipped) to the nsqd at ``address`` in pieces
    (``POST /nsqbox/snapshot/upload``); the upload's id. SnapshotTransferError when the node
    refuses (real nsqd: ``404``)."""
    upload_id = uuid.uuid4().hex
    with open_for_reading(path) as stream:
        _upload(client, _url(address), upload_id, stream)
    return upload_id
