"""The box's snapshots: one consistent cut of every nsqd, and ``nsqbox up --load FILE``.

:func:`cut_box` spools every nsqd's records in one synchronous pass (the nodes share one event
loop, so nothing happens on any of them meanwhile): what the admin service's
``POST /api/snapshot`` answers (:mod:`nsqbox.admin.routes.snapshot`). :func:`load_box` reads
a snapshot once, strictly, off the event loop, staging each node's records
(:func:`~nsqbox.nsqd.domain.snapshot.stage_file`: a bad file stages nothing and loads
nothing), then applies what was staged to the nodes, before the box reports it is ready
(:func:`seed_box` does the same with a seed, ``nsqbox up --seed FILE``, turned into one). A
snapshot taken under a manual clock moves a manual clock to the broker time it was saved at,
so deferred messages fall due at the same broker time as in the box it came from.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Protocol

import msgspec

from nsqbox.snapshot.format import Header, SnapshotError

if TYPE_CHECKING:
    from nsqbox.broker.clock import BrokerClock
    from nsqbox.nsqd.domain.nsqd import NSQD
    from nsqbox.nsqd.routes.snapshot import Spool

__all__ = ["BoxNodes", "cut_box", "load_box", "loaded_box", "save_box", "seed_box"]


class BoxNodes(Protocol):
    """What this module needs of the box's nsqds (:class:`~nsqbox.run.box.BoxControl`)."""

    def __len__(self) -> int: ...

    def nsqd(self, index: int) -> NSQD | None:
        """Node ``index``'s live NSQD, None while it is down."""
        ...

    def state(self, index: int) -> str:
        """``"running"``, ``"stopped"`` or ``"crashed"``."""
        ...


def _running(control: BoxNodes) -> list[NSQD]:
    nodes = []
    for index in range(len(control)):
        nsqd = control.nsqd(index)
        if nsqd is None:
            raise OSError(f"nsqd {index} is {control.state(index)}: start it before a snapshot")
        nodes.append(nsqd)
    return nodes


def cut_box(control: BoxNodes, names: Sequence[str]) -> list[dict[str, Any]]:
    """Every nsqd's cut (spooled in its data path), in node order, in one synchronous pass;
    OSError when a node is down or a spool cannot be written."""
    from nsqbox.nsqd.routes.snapshot import spool_node

    cuts = []
    for index, nsqd in enumerate(_running(control)):
        doc = msgspec.structs.asdict(spool_node(nsqd, index))
        del doc["path"]
        cuts.append({"node": index, "http_address": names[index], **doc})
    return cuts


def _cut_and_open(control: BoxNodes) -> tuple[list[Spool], list[IO[bytes]]]:
    """Every nsqd's cut in one synchronous pass, each spool opened then removed from its
    data path (the open file keeps it readable); OSError when a node is down."""
    from nsqbox.nsqd.routes.snapshot import spool_node

    spools: list[Spool] = []
    sources: list[IO[bytes]] = []
    try:
        for index, nsqd in enumerate(_running(control)):
            spools.append(spool_node(nsqd, index))
        for spool in spools:
            sources.append(open(spool.path, "rb"))  # noqa: SIM115 - the caller closes them
    except BaseException:
        for source in sources:
            source.close()
        raise
    finally:
        for spool in spools:
            with contextlib.suppress(OSError):
                os.unlink(spool.path)
    return spools, sources


async def save_box(control: BoxNodes, directory: str, name: str) -> dict[str, Any]:
    """Save one consistent cut of every nsqd as the snapshot ``name`` in ``directory``.

    The nodes are cut in one synchronous pass (:func:`cut_box`'s), their spools opened and
    removed at once (nothing is left in the data paths), then turned into the file's lines off
    the event loop (:class:`~nsqbox.snapshot.spool.SpoolConverter`), confined to ``directory``
    (:func:`~nsqbox.snapshot.confined.open_confined`).
    SaveNameError for a name that is not a snapshot's file name, FileExistsError when the
    directory has that name, OSError when a node is down or a file cannot be written. What
    was saved: ``{"file", "directory", "bytes", "nodes", "topics", "channels", "messages"}``.
    """
    import trio

    from nsqbox.snapshot.confined import check_save_name, open_confined
    from nsqbox.snapshot.files import SnapshotWriter
    from nsqbox.snapshot.format import Header
    from nsqbox.snapshot.spool import SpoolConverter, SpoolError

    check_save_name(name)
    spools, sources = _cut_and_open(control)
    first = spools[0]
    saved_at_ns = min(s.saved_at_ns for s in spools)
    header = Header(0, len(spools), saved_at_ns, first.clock, first.clock_offset)

    def write() -> SnapshotWriter:
        with open_confined(directory, name) as stream:
            writer = SnapshotWriter(stream, header)
            for source in sources:
                converter = SpoolConverter(writer)
                try:
                    while data := source.read(1024 * 1024):
                        converter.feed(data)
                    converter.close()
                except SpoolError as exc:  # a disk queue's files hold what they should not
                    raise OSError(f"a node's cut is damaged: {exc}") from None
            writer.finish()
        return writer

    try:
        writer = await trio.to_thread.run_sync(write)
    finally:
        for source in sources:
            source.close()
    return {
        "file": name,
        "directory": directory,
        "bytes": os.stat(os.path.join(directory, name), follow_symlinks=False).st_size,
        "nodes": len(spools),
        "topics": writer.topics,
        "channels": writer.channels,
        "messages": writer.messages,
    }


def loaded_box(control: BoxNodes) -> dict[str, Any] | None:
    """The box's last load (:func:`~nsqbox.snapshot.loaded.latest` over its running nsqds)."""
    from nsqbox.snapshot.loaded import latest

    nodes = [control.nsqd(index) for index in range(len(control))]
    return latest(nsqd.loaded_snapshot for nsqd in nodes if nsqd is not None)


async def load_box(
    path: str | os.PathLike[str], control: BoxNodes, clock: BrokerClock, name: str | None = None
) -> int:
    """Load the snapshot at ``path`` into the box's nsqds; how many messages it held. Each
    node keeps the load as its last one, under ``name`` (default: the file's base name).

    ValueError (naming the line, from a :class:`SnapshotError`) when the file does not pass,
    or when the box has fewer nsqds than the snapshot; nothing is loaded then.
    """
    import trio

    from nsqbox.nsqd.domain.snapshot import NodeLoader, stage_file

    where = os.fspath(path)

    def loaders_for(header: Header) -> list[NodeLoader]:
        if header.nodes > len(control):
            raise _TooFewNodes(
                f"{where} holds {header.nodes} nsqds; the box runs {len(control)} "
                f"(--nsqd-count {header.nodes})"
            )
        nodes = _running(control)
        return [NodeLoader(nodes[index], index) for index in range(header.nodes)]

    try:  # read once, off the loop, staging; a bad file stages nothing and loads nothing
        summary, loaders = await trio.to_thread.run_sync(stage_file, path, loaders_for)
    except SnapshotError as exc:
        raise ValueError(f"cannot load {where}, nothing loaded: {exc}") from exc
    except _TooFewNodes as exc:
        raise ValueError(str(exc)) from None
    header = summary.header
    if clock.manual and header.clock == "manual" and header.clock_offset > clock.offset:
        try:
            clock.check_room(header.clock_offset - clock.offset)
        except BaseException:
            for loader in loaders:
                loader.discard()
            raise
        clock.offset = header.clock_offset  # nothing is due yet: the box holds nothing
    load_id = uuid.uuid4().hex
    for index, loader in enumerate(loaders):
        try:
            loader.finish()
        except BaseException:
            for rest in loaders[index + 1 :]:
                rest.discard()
            raise
        loader.remember(where if name is None else name, load_id)
    return summary.messages


class _TooFewNodes(Exception):
    """The snapshot holds more nsqds than the box runs."""


async def seed_box(
    path: str | os.PathLike[str], control: BoxNodes, clock: BrokerClock, spool_dir: str
) -> int:
    """Apply the seed at ``path`` (:mod:`nsqbox.snapshot.seed`) to the box's nsqds; how many
    messages it declared.

    The seed is read and checked whole, then written as a snapshot in ``spool_dir`` and
    loaded (:func:`load_box`); the spool is removed afterwards. ValueError (naming the key
    path) when the seed does not pass; nothing is applied then.
    """
    import tempfile

    import trio

    from nsqbox.snapshot.seed import SeedError, read_seed, write_seed_snapshot

    name = os.fspath(path)
    try:
        seed = await trio.to_thread.run_sync(read_seed, path)
    except SeedError as exc:
        raise ValueError(f"cannot seed from {name}, nothing applied: {exc}") from exc
    if seed.nodes > len(control):
        node = seed.nodes - 1
        culprit = next(t.name for t in seed.topics if t.node == node)
        raise ValueError(
            f"cannot seed from {name}, nothing applied: topics.{culprit}.node: nsqd {node} does "
            f"not exist: the box runs {len(control)} nsqd(s) (start it with --nsqd-count "
            f"{seed.nodes})"
        )
    for topic in seed.topics:  # nsqd refuses such a PUB (E_BAD_MESSAGE)
        nsqd = control.nsqd(topic.node)
        most = max((len(m.body) for m in topic.messages), default=0)
        if nsqd is not None and most > nsqd.options.max_msg_size:
            raise ValueError(
                f"cannot seed from {name}, nothing applied: topics.{topic.name}.messages: a body "
                f"of {most} bytes is over --max-msg-size ({nsqd.options.max_msg_size})"
            )
    fd, spool = tempfile.mkstemp(prefix=".nsqbox-seed-", suffix=".jsonl", dir=spool_dir)
    os.close(fd)
    try:
        await trio.to_thread.run_sync(write_seed_snapshot, seed, spool)
        return await load_box(spool, control, clock, os.path.basename(name))
    finally:
        os.unlink(spool)
