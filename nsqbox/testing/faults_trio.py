"""``nsqbox_trio.faults``: the faults of a trio-native box (:class:`TrioFaults`).

The servers run on the test's own loop, so every fault acts at once and its
method is a plain call, as in :class:`~.faults.Faults`; restarting, crashing and
starting a node wait for the node to go down or come back, so those three are
awaited here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .faults import Faults

if TYPE_CHECKING:
    from .server_ops import ClusterOps

__all__ = ["TrioFaults"]


class TrioFaults(Faults):
    """:class:`~.faults.Faults` on the test's loop; :meth:`restart`, :meth:`crash` and
    :meth:`start` are awaited."""

    def __init__(self, ops: ClusterOps) -> None:
        super().__init__(lambda fn: fn(), lambda: ops.cluster, mode="trio")
        self._ops = ops

    async def restart(self, node: int = 0) -> None:  # type: ignore[override]
        """Shut nsqd ``node`` down cleanly and start it again (see :meth:`.Faults.restart`)."""
        await self._ops.stop_nsqd(node)
        await self._ops.start_nsqd(node)

    async def crash(self, node: int = 0, *, restart: bool = False) -> None:  # type: ignore[override]
        """Stop nsqd ``node`` as a SIGKILL would (see :meth:`.Faults.crash`)."""
        await self._ops.crash_nsqd(node)
        if restart:
            await self._ops.start_nsqd(node)

    async def start(self, node: int = 0) -> None:  # type: ignore[override]
        """Start a crashed (or stopped) nsqd again: same ports, same data path."""
        await self._ops.start_nsqd(node)
