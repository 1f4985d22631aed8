"""Pending micro-batches: what is FINished when, and what goes back to nsqd."""

from __future__ import annotations

import pytest

from nsqbox.spark.pending import PendingBatches, split_taken


def test_commit_pops_whole_batches_in_order() -> None:
    pending: PendingBatches[str] = PendingBatches()
    pending.add(0, 2, ["a", "b"]).taken = True
    pending.add(2, 3, ["c"])
    empty = pending.add(3, 3, [])  # an empty batch holds nothing
    assert (empty.start, empty.end, empty.messages) == (3, 3, [])
    assert len(pending) == 3
    assert list(pending) == ["a", "b", "c"]
    assert pending.pop_committed(0) == []
    assert split_taken(pending.pop_committed(2)) == (["a", "b"], [])
    assert pending.pop_committed(2) == []
    assert split_taken(pending.pop_committed(10)) == ([], ["c"])
    assert len(pending) == 0


def test_abandoned_batches_are_the_ones_after_start() -> None:
    pending: PendingBatches[str] = PendingBatches()
    pending.add(0, 1, ["a"])
    pending.add(1, 3, ["b", "c"])
    pending.add(3, 4, ["d"])
    assert [b.messages for b in pending.pop_abandoned(1)] == [["b", "c"], ["d"]]
    assert [b.end for b in pending.batches] == [1]
    assert len(pending) == 1
    assert [b.messages for b in pending.pop_abandoned(-1)] == [["a"]]


@pytest.mark.parametrize(("start", "end", "messages"), [(0, 2, ["a"]), (5, 4, [])])
def test_batch_must_match_its_offsets(start: int, end: int, messages: list[str]) -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        PendingBatches[str]().add(start, end, messages)


def test_batches_do_not_overlap() -> None:
    pending: PendingBatches[str] = PendingBatches()
    pending.add(0, 2, ["a", "b"])
    with pytest.raises(ValueError, match="overlaps"):
        pending.add(1, 2, ["c"])
