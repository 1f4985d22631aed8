"""Walking a disk queue's unread records (nsqbox's snapshots): in order, across files, the
queue left as it was; a damaged file is an error that says where."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqbox.nsqd.diskqueue.walk import CHUNK, DiskWalkError, unread_records
from tests.nsqd.test_diskqueue import make_queue


def test_unread_records_cross_files_and_chunks_and_change_nothing(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, max_bytes_per_file=300, max_msg_size=2 * CHUNK)
    records = [b"r%03d" % i * (i % 7 + 1) for i in range(60)]
    big = b"B" * (CHUNK + 10)  # longer than one read
    for record in [*records[:30], big, *records[30:]]:
        queue.put(record)
    for _ in range(5):  # consumed ones are not listed
        assert queue.pop() is not None
    before = (queue.positions, queue.depth)
    walked = [r for batch in unread_records(queue) for r in batch]
    assert walked == [*records[5:30], big, *records[30:]]
    assert (queue.positions, queue.depth) == before
    assert queue.pop() == records[5]  # the read position did not move
    queue.close()


def test_a_damaged_length_says_where(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, max_bytes_per_file=10_000)
    for i in range(3):
        queue.put(b"x" * (10 + i))
    path = Path(queue.file_name(0))
    data = bytearray(path.read_bytes())
    data[14:18] = (5000).to_bytes(4, "big")  # the second record's length, past the end
    path.write_bytes(bytes(data))
    with pytest.raises(DiskWalkError, match="bad record at 0,14"):
        [r for batch in unread_records(queue) for r in batch]
    queue.close()
