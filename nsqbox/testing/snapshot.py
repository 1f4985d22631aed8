"""The test handle's snapshots: ``nsqbox.snapshot(path)`` and ``nsqbox.load(path)`` (issue #34).

A test saves the box's state to a file (docs/state.md) and loads one, through the nsqds'
``/nsqbox/snapshot`` routes (:mod:`nsqbox.snapshot.transfer`), in every mode whose nsqds
are nsqbox's (thread, subprocess, noproc against nsqbox). The snapshot is of the whole box:
every topic in it, other tests' too on a shared session box, so a test that saves one
usually has a box of its own (``nsqbox_factory``). The nodes are cut one after the other
(``nsqbox snapshot save`` through a box's admin service makes one cut of them all).
Loading checks the whole file first: a damaged one raises
:class:`~nsqbox.snapshot.format.SnapshotError` naming its line and loads nothing.

The sync handle's ``asnapshot`` and ``aload`` are their twins for asyncio and trio tests, and
the trio-native handle's ``snapshot`` and ``load`` are awaited (:class:`TrioSnapshotAccess`):
each runs the transfer in a worker thread, so the test's loop (and a trio box's servers on it)
keeps running.

:func:`load_seed` applies a seed (``nsqbox_seed``, ``seed=`` of the factories) the same way: the
seed written as a snapshot file and loaded.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

import httpx

from ..snapshot.files import SnapshotSummary
from ..snapshot.transfer import cut_nodes, load, save
from .waiting import in_worker_thread

if TYPE_CHECKING:
    from ..snapshot.seed import Seed
    from .config import BoxAddresses

__all__ = ["SnapshotAccess", "TrioSnapshotAccess", "load_seed"]


def load_seed(addresses: BoxAddresses, seed: Seed, timeout: float) -> int:
    """Apply a checked seed to the nsqds at ``addresses`` (node ``i`` into nsqd ``i``), as a
    snapshot file in a temporary directory; how many messages it held."""
    from ..snapshot.seed import write_seed_snapshot

    nodes = [str(a) for a in addresses.nsqd_http]
    with tempfile.TemporaryDirectory(prefix="nsqbox-seed-") as directory:
        path = os.path.join(directory, "seed.jsonl")
        write_seed_snapshot(seed, path)
        with httpx.Client(timeout=max(timeout, 60.0), trust_env=False) as client:
            answers = load(client, path, nodes)
    return sum(int(a.get("messages", 0)) for a in answers)


class _Transfers:
    """The blocking transfers, over the box's nsqds."""

    addresses: BoxAddresses
    timeout: float

    def _client(self) -> httpx.Client:
        return httpx.Client(timeout=max(self.timeout, 60.0), trust_env=False)

    def _save(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        nodes = [str(a) for a in self.addresses.nsqd_http]
        with self._client() as client:
            return save(client, path, cut_nodes(client, nodes))

    def _load(self, path: str | os.PathLike[str]) -> int:
        nodes = [str(a) for a in self.addresses.nsqd_http]
        with self._client() as client:
            answers = load(client, path, nodes)
        return sum(int(a.get("messages", 0)) for a in answers)


class SnapshotAccess(_Transfers):
    """``snapshot`` and ``load`` on the sync handle (a mixin of :class:`~.handle.NSQBox`)."""

    def snapshot(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        """Save every nsqd of the box to ``path`` (``.gz``: gzip); what it holds."""
        return self._save(path)

    def load(self, path: str | os.PathLike[str]) -> int:
        """Load the snapshot at ``path`` into the box's nsqds (node ``i`` into nsqd ``i``,
        merged with what they hold); how many messages it held."""
        return self._load(path)

    async def asnapshot(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        """:meth:`snapshot` for an asyncio or trio test (in a worker thread)."""
        return await in_worker_thread(lambda: self._save(path))

    async def aload(self, path: str | os.PathLike[str]) -> int:
        """:meth:`load` for an asyncio or trio test (in a worker thread)."""
        return await in_worker_thread(lambda: self._load(path))


class TrioSnapshotAccess(_Transfers):
    """``await snapshot(path)`` and ``await load(path)`` on the trio-native handle."""

    async def snapshot(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        """Save every nsqd of the box to ``path`` (``.gz``: gzip); what it holds."""
        return await in_worker_thread(lambda: self._save(path))

    async def load(self, path: str | os.PathLike[str]) -> int:
        """Load the snapshot at ``path`` into the box's nsqds; how many messages it held."""
        return await in_worker_thread(lambda: self._load(path))
