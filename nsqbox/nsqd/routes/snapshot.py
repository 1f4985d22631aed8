"""nsqbox's snapshot routes: save one nsqd's state, and load a snapshot into it (issue #34).

Not part of NSQ: real nsqd answers ``404`` under ``/nsqbox/``. The routes exist only while
nsqd has no ``--auth-http-address`` (they read and write every message) and check Host and
Origin as every nsqbox route does. Both directions go in bounded pieces, so neither side holds
a whole snapshot:

- ``POST /nsqbox/snapshot?node=N`` takes the cut: in one synchronous pass (nothing else runs
  on the node meanwhile) it writes this node's records, as node ``N``, to a spool file in the
  data path (:func:`spool_node`; its sections are :mod:`nsqbox.snapshot.spool`'s, which the
  saver makes lines), and answers ``{"id", "bytes", "topics", "channels",
  "messages", "clock", "clock_offset", "saved_at_ns"}``. One spool at a time: a new cut
  removes the last one.
- ``GET /nsqbox/snapshot?id=X&offset=O`` answers the spool's bytes from ``O`` on
  (``application/octet-stream``), at most :data:`READ_PIECE_BYTES`;
  ``DELETE /nsqbox/snapshot?id=X`` removes it.
- ``POST /nsqbox/snapshot/upload?id=X&offset=O`` appends its body (at most
  :data:`PIECE_BYTES`) to an upload at ``O`` (``offset=0`` starts a new one, replacing any);
  (an upload holds at most :data:`MAX_UPLOAD_BYTES`: ``413 UPLOAD_TOO_BIG``);
  ``POST /nsqbox/snapshot/load?id=X&node=N`` then reads the whole upload once, strictly (off
  the event loop), staging node ``N``'s records, and only if it passed applies them
  (:class:`~nsqbox.nsqd.domain.snapshot.NodeLoader`), answering ``{"messages", "skipped",
  "removed"}``; a bad file is ``400`` with ``{"message": "INVALID_SNAPSHOT", "line",
  "reason"}`` and loads nothing. The upload is removed either way. ``replace=true`` replaces
  what the node holds (every topic, channel and message the file does not list for node ``N``
  goes, in the same pass as the load: ``removed`` counts them); ``name`` (the file's name)
  and ``load`` (an id shared by the nodes of one load) are kept as the node's last load.

The snapshot format and files (:mod:`nsqbox.snapshot`, gzip) are imported when a route is
first used, not with nsqd: a box that never saves or loads does not pay for them at start.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import TYPE_CHECKING, Final

import msgspec

from ...go.syntax import parse_count
from ...http import HTTPError, Request, Response, Router

if TYPE_CHECKING:
    from ..domain.nsqd import NSQD

__all__ = [
    "MAX_UPLOAD_BYTES",
    "PIECE_BYTES",
    "READ_PIECE_BYTES",
    "SNAPSHOT_PATH",
    "Spool",
    "add_snapshot_routes",
    "spool_node",
]

SNAPSHOT_PATH: Final = "/nsqbox/snapshot"
#: The most bytes one upload takes.
PIECE_BYTES: Final = 1024 * 1024
#: The most bytes one GET answers (a save of 235 MB is 59 requests, not 235: a fifth less
#: time moving the bytes).
READ_PIECE_BYTES: Final = 4 * 1024 * 1024
#: The most bytes an upload may hold in all (about 150 million messages of 100 bytes).
MAX_UPLOAD_BYTES: Final = 32 * 1024**3
_SPOOL: Final = "nsqbox.snapshot.{}.spool"
_UPLOAD: Final = "nsqbox.snapshot.{}.upload"
_SPOOL_TYPE: Final = (("Content-Type", "application/octet-stream"),)
#: The highest node number a snapshot holds (:data:`nsqbox.snapshot.format.MAX_NODES` - 1,
#: kept here so that registering the routes imports no snapshot module).
_LAST_NODE: Final = 63


class Spool(msgspec.Struct, frozen=True):
    """One node's cut, written to a file in its data path."""

    id: str
    path: str
    bytes: int
    topics: int
    channels: int
    messages: int
    clock: str
    clock_offset: float
    saved_at_ns: int


def _remove(data_path: str, pattern: str) -> None:
    import glob

    for stale in glob.glob(os.path.join(glob.escape(data_path), pattern.format("*"))):
        with contextlib.suppress(OSError):
            os.unlink(stale)


def spool_node(nsqd: NSQD, node: int) -> Spool:
    """Cut ``nsqd``'s state (as node ``node``) into a new spool file, removing older ones.

    Synchronous: the cut is consistent, and several nodes cut one after the other in the same
    call (a box's) make one consistent cut of them all. OSError when it cannot be written.
    """
    from ..domain.snapshot_cut import cut_node

    _remove(nsqd.data_path, _SPOOL)
    spool_id = uuid.uuid4().hex
    path = os.path.join(nsqd.data_path, _SPOOL.format(spool_id))
    saved_at_ns = nsqd.wall_ns()
    try:
        with open(path, "wb") as stream:
            topics, channels, messages = cut_node(nsqd, node, stream)
            size = stream.tell()
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    clock = nsqd.clock
    return Spool(
        spool_id,
        path,
        size,
        topics,
        channels,
        messages,
        clock.mode,
        clock.offset,
        saved_at_ns,
    )


def _arg(request: Request, name: str) -> str:
    value = (request.args().get(name) or [""])[0]
    if not value:
        raise HTTPError(400, f"MISSING_ARG_{name.upper()}")
    return value


def _number(request: Request, name: str, most: int) -> int:
    try:
        return parse_count(_arg(request, name), most)
    except ValueError:
        raise HTTPError(400, f"INVALID_{name.upper()}") from None


def _file_id(request: Request) -> str:
    value = _arg(request, "id")
    if len(value) != 32 or not all(c in "0123456789abcdef" for c in value):
        raise HTTPError(400, "INVALID_ID")
    return value


def _existing(nsqd: NSQD, pattern: str, file_id: str) -> str:
    path = os.path.join(nsqd.data_path, pattern.format(file_id))
    if not os.path.exists(path):
        raise HTTPError(404, "SNAPSHOT_NOT_FOUND")
    return path


def _read_piece(path: str, offset: int) -> bytes:
    with open(path, "rb") as stream:
        stream.seek(offset)
        return stream.read(READ_PIECE_BYTES)


def _append(data_path: str, file_id: str, offset: int, data: bytes) -> None:
    """Add ``data`` to upload ``file_id`` at ``offset`` (0: a new upload, replacing any)."""
    path = os.path.join(data_path, _UPLOAD.format(file_id))
    if offset + len(data) > MAX_UPLOAD_BYTES:
        raise HTTPError(413, "UPLOAD_TOO_BIG")
    if offset == 0:
        _remove(data_path, _UPLOAD)
        mode = "wb"
    else:
        mode = "r+b"
        if not os.path.exists(path):
            raise HTTPError(404, "SNAPSHOT_NOT_FOUND")
        if os.path.getsize(path) != offset:
            raise HTTPError(400, "INVALID_OFFSET")
    with open(path, mode) as stream:
        stream.seek(offset)
        stream.write(data)


def _flag(request: Request, name: str) -> bool:
    value = (request.args().get(name) or ["false"])[0]
    if value not in ("true", "false", "1", "0"):
        raise HTTPError(400, f"INVALID_{name.upper()}")
    return value in ("true", "1")


def _bounded(request: Request, name: str, most: int) -> str:
    value = (request.args().get(name) or [""])[0]
    if len(value) > most:
        raise HTTPError(400, f"INVALID_{name.upper()}")
    return value


def add_snapshot_routes(router: Router, nsqd: NSQD) -> None:
    """Add the snapshot routes (module doc) for ``nsqd`` to its HTTP router."""

    async def cut(request: Request) -> Response:
        node = _number(request, "node", _LAST_NODE)
        try:
            spool = spool_node(nsqd, node)
        except OSError as exc:
            raise HTTPError(500, f"SNAPSHOT_FAILED: {exc}") from None
        doc = msgspec.structs.asdict(spool)
        del doc["path"]
        return Response.json(doc)

    async def read(request: Request) -> Response:
        path = _existing(nsqd, _SPOOL, _file_id(request))
        offset = _number(request, "offset", 2**62)
        return Response(200, _read_piece(path, offset), _SPOOL_TYPE)

    async def remove(request: Request) -> None:
        os.unlink(_existing(nsqd, _SPOOL, _file_id(request)))

    async def upload(request: Request) -> None:
        file_id = _file_id(request)
        offset = _number(request, "offset", MAX_UPLOAD_BYTES)
        _append(nsqd.data_path, file_id, offset, request.body)

    async def load(request: Request) -> Response:
        import trio

        from ...snapshot.format import SnapshotError
        from ...snapshot.loaded import MAX_NAME_CHARS
        from ..domain.snapshot import NodeLoader, stage_file

        file_id = _file_id(request)
        node = _number(request, "node", _LAST_NODE)
        replace = _flag(request, "replace")
        name = _bounded(request, "name", 4 * MAX_NAME_CHARS)
        load_id = _bounded(request, "load", 64)
        path = _existing(nsqd, _UPLOAD, file_id)
        loader = NodeLoader(nsqd, node, replace=replace)
        try:
            try:  # read once, off the loop, staging: a bad file stages nothing, loads nothing
                await trio.to_thread.run_sync(stage_file, path, lambda _: (loader,))
            except SnapshotError as exc:
                body = {"message": "INVALID_SNAPSHOT", "line": exc.line, "reason": exc.reason}
                return Response.json(body, 400)
            loader.finish()  # one synchronous pass: nothing happens on the node meanwhile
            loader.remember(name, load_id)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        removed = {
            "topics": loader.removed_topics,
            "channels": loader.removed_channels,
            "messages": loader.removed_messages,
        }
        doc = {"messages": loader.messages, "skipped": loader.skipped, "removed": removed}
        return Response.json(doc)

    router.add("POST", SNAPSHOT_PATH, cut)
    router.add("GET", SNAPSHOT_PATH, read, log=False)
    router.add("DELETE", SNAPSHOT_PATH, remove)
    router.add("POST", f"{SNAPSHOT_PATH}/upload", upload, max_body_size=PIECE_BYTES, log=False)
    router.add("POST", f"{SNAPSHOT_PATH}/load", load)
