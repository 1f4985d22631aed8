"""Bookkeeping for messages handed to Spark but not yet committed by it.

The stream reader numbers the messages it reads: a micro-batch's offsets are
``{"messages": n}``, the count read before and after it, a logical position
of this query (NSQ has none of its own). Every batch stays *pending* here,
its messages in flight on nsqd, until Spark has committed it; then its
messages are FINished if Spark actually *took* the batch's rows, and handed
back (REQ) if it did not (Spark planned the range but read it some other way,
as pyspark 4.0's reader wrapper can after a restart). Pure: no I/O, no pyspark.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["PendingBatch", "PendingBatches", "split_taken"]

M = TypeVar("M")


@dataclass(eq=False)
class PendingBatch(Generic[M]):
    """One micro-batch: the offsets it spans, its messages, and whether Spark took them."""

    start: int
    end: int
    messages: list[M]
    taken: bool = False


class PendingBatches(Generic[M]):
    """Micro-batches in the order they were read, each waiting for Spark's commit."""

    def __init__(self) -> None:
        self._batches: deque[PendingBatch[M]] = deque()
        self._count = 0

    def __len__(self) -> int:
        """Messages pending over all batches."""
        return self._count

    def __iter__(self) -> Iterator[M]:
        """Every pending message, oldest batch first."""
        for batch in self._batches:
            yield from batch.messages

    @property
    def batches(self) -> list[PendingBatch[M]]:
        """The pending batches, oldest first."""
        return list(self._batches)

    def add(self, start: int, end: int, messages: list[M]) -> PendingBatch[M]:
        """Record ``messages`` as the batch ``start..end`` (returned, to mark it taken)."""
        if end - start != len(messages):
            raise ValueError(f"batch {start}..{end} cannot hold {len(messages)} messages")
        if self._batches and start < self._batches[-1].end:
            raise ValueError(f"batch {start}..{end} overlaps a pending batch")
        batch = PendingBatch(start, end, messages)
        if messages:
            self._batches.append(batch)
            self._count += len(messages)
        return batch

    def pop_committed(self, end: int) -> list[PendingBatch[M]]:
        """Remove and return every batch that ends at or before ``end``."""
        out: list[PendingBatch[M]] = []
        while self._batches and self._batches[0].end <= end:
            out.append(self._batches.popleft())
        self._count -= sum(len(b.messages) for b in out)
        return out

    def pop_abandoned(self, start: int) -> list[PendingBatch[M]]:
        """Remove and return every batch that ends after ``start``, oldest first.

        Spark asking for data from ``start`` means it will never commit a batch
        beyond it (it plans batches in order and moves on only after a commit),
        so those messages must go back to nsqd.
        """
        out: list[PendingBatch[M]] = []
        while self._batches and self._batches[-1].end > start:
            out.insert(0, self._batches.pop())
        self._count -= sum(len(b.messages) for b in out)
        return out


def split_taken(batches: Iterable[PendingBatch[M]]) -> tuple[list[M], list[M]]:
    """The messages of the batches Spark took, and of those it did not."""
    taken: list[M] = []
    untaken: list[M] = []
    for batch in batches:
        (taken if batch.taken else untaken).extend(batch.messages)
    return taken, untaken
