"""The test handle's snapshots and replays: ``snapshot(path)``, ``load(path)``, ``replay(path,
topic=...)`` (issue #34).

A test saves the box's state to a file (docs/state.md) and loads one, through the nsqds'
``/nsqbox/snapshot`` routes (:mod:`nsqbox.snapshot.transfer`), in every mode whose nsqds
are nsqbox's (thread, subprocess, noproc against nsqbox). The snapshot is of the whole box:
every topic in it, other tests' too on a shared session box, so a test that saves one
usually has a box of its own (``nsqbox_factory``). The nodes are cut one after the other
(``nsqbox snapshot save`` through a box's admin service makes one cut of them all).
Loading checks the whole file first: a damaged one raises
:class:`~nsqbox.snapshot.format.SnapshotError` naming its line and loads nothing. It merges
with what the box holds; ``load(path, replace=True)`` replaces it (each nsqd in one pass).

The sync handle's ``asnapshot`` and ``aload`` are their twins for asyncio and trio tests, and
the trio-native handle's ``snapshot`` and ``load`` are awaited (:class:`TrioSnapshotAccess`):
each runs the transfer in a worker thread, so the test's loop (and a trio box's servers on it)
keeps running.

``replay(path, topic=T, speed="1x", channel="", step=False)`` publishes a recording's (any
snapshot's) messages to topic ``T`` of nsqd ``node`` (:mod:`nsqbox.snapshot.replay`), as
``nsqbox replay`` does: with the recorded spacing divided by ``speed`` (``"max"``: at once), into
``channel`` only, or with ``step=True`` as the box's manual broker clock reaches each one (the
nsqd publishes them; ``clock.advance`` returns once those due were published). The whole-topic
replay works against any nsqd, real nsqd too (``/mpub``, ``/pub?defer=``); ``channel`` and
``step`` need nsqbox's nsqds and raise :class:`~nsqbox.snapshot.replay.ReplayUnsupported`
against real nsqd, before anything is published.

:func:`load_seed` applies a seed (``nsqbox_seed``, ``seed=`` of the factories) the same way: the
seed written as a snapshot file and loaded.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

import httpx

from ..snapshot.files import SnapshotSummary, check_snapshot
from ..snapshot.replay import replay, start_step_replay
from ..snapshot.speed import parse_speed
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

    def _load(self, path: str | os.PathLike[str], replace: bool) -> int:
        nodes = [str(a) for a in self.addresses.nsqd_http]
        with self._client() as client:
            answers = load(client, path, nodes, replace=replace)
        return sum(int(a.get("messages", 0)) for a in answers)

    def _replay(
        self,
        path: str | os.PathLike[str],
        topic: str,
        speed: str | float,
        channel: str,
        step: bool,
        node: int,
    ) -> int:
        rate = parse_speed(speed)
        if step and rate is None:
            raise ValueError("step=True publishes at the recorded offsets: speed='max' has none")
        check_snapshot(path)  # a bad file raises SnapshotError (its line), nothing published
        address = str(self.addresses.nsqd_http[node])
        with self._client() as client:
            if step:
                assert rate is not None
                started = start_step_replay(
                    client, path, address, topic, channel=channel, speed=rate
                )
                return started.published
            return replay(client, path, address, topic, channel=channel, speed=rate)


class SnapshotAccess(_Transfers):
    """``snapshot`` and ``load`` on the sync handle (a mixin of :class:`~.handle.NSQBox`)."""

    def snapshot(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        """Save every nsqd of the box to ``path`` (``.gz``: gzip); what it holds."""
        return self._save(path)

    def load(self, path: str | os.PathLike[str], *, replace: bool = False) -> int:
        """Load the snapshot at ``path`` into the box's nsqds (node ``i`` into nsqd ``i``,
        merged with what they hold, or with ``replace`` instead of it: every topic, channel
        and message the file does not hold is removed); how many messages it held."""
        return self._load(path, replace)

    def replay(
        self,
        path: str | os.PathLike[str],
        topic: str,
        *,
        speed: str | float = "1x",
        channel: str = "",
        step: bool = False,
        node: int = 0,
    ) -> int:
        """Publish the messages of the recording at ``path`` to ``topic`` of nsqd ``node``
        (module doc); how many were published (with ``step``: those due at once, the others
        follow the manual broker clock)."""
        return self._replay(path, topic, speed, channel, step, node)

    async def areplay(
        self,
        path: str | os.PathLike[str],
        topic: str,
        *,
        speed: str | float = "1x",
        channel: str = "",
        step: bool = False,
        node: int = 0,
    ) -> int:
        """:meth:`replay` for an asyncio or trio test (in a worker thread)."""
        return await in_worker_thread(lambda: self._replay(path, topic, speed, channel, step, node))

    async def asnapshot(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        """:meth:`snapshot` for an asyncio or trio test (in a worker thread)."""
        return await in_worker_thread(lambda: self._save(path))

    async def aload(self, path: str | os.PathLike[str], *, replace: bool = False) -> int:
        """:meth:`load` for an asyncio or trio test (in a worker thread)."""
        return await in_worker_thread(lambda: self._load(path, replace))


class TrioSnapshotAccess(_Transfers):
    """``await snapshot(path)`` and ``await load(path)`` on the trio-native handle."""

    async def snapshot(self, path: str | os.PathLike[str]) -> SnapshotSummary:
        """Save every nsqd of the box to ``path`` (``.gz``: gzip); what it holds."""
        return await in_worker_thread(lambda: self._save(path))

    async def load(self, path: str | os.PathLike[str], *, replace: bool = False) -> int:
        """Load the snapshot at ``path`` into the box's nsqds (with ``replace``, instead of
        what they hold); how many messages it held."""
        return await in_worker_thread(lambda: self._load(path, replace))

    async def replay(
        self,
        path: str | os.PathLike[str],
        topic: str,
        *,
        speed: str | float = "1x",
        channel: str = "",
        step: bool = False,
        node: int = 0,
    ) -> int:
        """Publish a recording's messages to ``topic`` (as the sync handle's ``replay``, in a
        worker thread: the box's servers on this loop keep running); how many were published."""
        return await in_worker_thread(lambda: self._replay(path, topic, speed, channel, step, node))
