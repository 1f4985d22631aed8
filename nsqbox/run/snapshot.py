"""The box's snapshots: one consistent cut of every nsqd, and ``nsqbox up --load FILE``.

:func:`cut_box` spools every nsqd's records in one synchronous pass (the nodes share one event
loop, so nothing happens on any of them meanwhile): what the admin service's
``POST /api/snapshot`` answers (:mod:`nsqbox.admin.routes.snapshot`). :func:`load_box` reads
a snapshot whole and strictly first (off the event loop: a bad file loads nothing), then
applies it to the nodes in one pass over the file, before the box reports it is ready
(:func:`seed_box` does the same with a seed, ``nsqbox up --seed FILE``, turned into one). A
snapshot taken under a manual clock moves a manual clock to the broker time it was saved at,
so deferred messages fall due at the same broker time as in the box it came from.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from nsqbox.snapshot.files import SnapshotReader, check_snapshot, open_for_reading
from nsqbox.snapshot.format import ChannelLine, MessageLine, SnapshotError, TopicLine

if TYPE_CHECKING:
    from nsqbox.broker.clock import BrokerClock
    from nsqbox.nsqd.domain.nsqd import NSQD

__all__ = ["BoxNodes", "cut_box", "load_box", "seed_box"]


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
        doc = asdict(spool_node(nsqd, index))
        del doc["path"]
        cuts.append({"node": index, "http_address": names[index], **doc})
    return cuts


async def load_box(path: str | os.PathLike[str], control: BoxNodes, clock: BrokerClock) -> int:
    """Load the snapshot at ``path`` into the box's nsqds; how many messages it held.

    ValueError (naming the line, from a :class:`SnapshotError`) when the file does not pass,
    or when the box has fewer nsqds than the snapshot; nothing is loaded then.
    """
    import trio

    from nsqbox.nsqd.domain.snapshot import NodeLoader

    try:
        summary = await trio.to_thread.run_sync(check_snapshot, path)
    except SnapshotError as exc:
        raise ValueError(f"cannot load {os.fspath(path)}, nothing loaded: {exc}") from exc
    header = summary.header
    if header.nodes > len(control):
        raise ValueError(
            f"{os.fspath(path)} holds {header.nodes} nsqds; the box runs {len(control)} "
            f"(--nsqd-count {header.nodes})"
        )
    nodes = _running(control)
    if clock.manual and header.clock == "manual" and header.clock_offset > clock.offset:
        clock.check_room(header.clock_offset - clock.offset)
        clock.offset = header.clock_offset  # nothing is due yet: the box holds nothing
    loaders = [NodeLoader(nodes[index], index) for index in range(header.nodes)]
    with open_for_reading(path) as stream:
        for record in SnapshotReader(stream):
            if isinstance(record, TopicLine | ChannelLine | MessageLine):
                loaders[record.node].apply(record)
    for loader in loaders:
        loader.finish()
    return summary.messages


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
        return await load_box(spool, control, clock)
    finally:
        os.unlink(spool)
