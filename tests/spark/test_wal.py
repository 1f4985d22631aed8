"""The partitioned reader's write-ahead log: pure, pyarrow and files only."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from nsqbox.spark.wal import Segment, WriteAheadLog, slot_file_name

SCHEMA = pa.schema([("id", pa.string())])


def batch(*ids: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(ids, pa.string())], schema=SCHEMA)


def test_a_segment_is_staged_once_and_read_back(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path / "wal")
    assert wal.read(1, "127.0.0.1:4150/0") is None
    assert wal.stage(1, "127.0.0.1:4150/0", Segment(batch("a", "b")))
    # a second attempt of the same partition cannot replace it
    assert not wal.stage(1, "127.0.0.1:4150/0", Segment(batch("c")))
    segment = wal.read(1, "127.0.0.1:4150/0")
    assert segment is not None
    assert segment.batch.column(0).to_pylist() == ["a", "b"]
    assert segment.batch.schema == SCHEMA
    assert not segment.newer
    assert wal.summary(1, "127.0.0.1:4150/0") == (2, False)
    assert wal.summary(2, "127.0.0.1:4150/0") is None
    # no draft files are left behind
    assert [p.name for p in (tmp_path / "wal").rglob("*")] == [
        "00000000000000000001",
        "127.0.0.1%3A4150%2F0.arrow",
    ]


def test_empty_and_newer_segments(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path)
    assert wal.stage(3, "a/0", Segment(batch(), newer=True))
    segment = wal.read(3, "a/0")
    assert segment is not None
    assert segment.batch.num_rows == 0
    assert segment.newer
    assert wal.summary(3, "a/0") == (0, True)
    assert segment.batch.schema == SCHEMA  # the flag is not part of the rows' schema


def test_trim_removes_committed_sequences(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path / "wal")
    assert wal.sequences() == []
    for seq in (1, 2, 3, 10):
        wal.stage(seq, "n/0", Segment(batch(str(seq))))
    assert wal.sequences() == [1, 2, 3, 10]
    assert wal.trim(2) == 2
    assert wal.sequences() == [3, 10]
    assert wal.read(2, "n/0") is None
    assert wal.trim(0) == 0


@pytest.mark.parametrize(
    ("slot", "name"),
    [("127.0.0.1:4150/0", "127.0.0.1%3A4150%2F0"), ("[::1]:4150/12", "%5B%3A%3A1%5D%3A4150%2F12")],
)
def test_slot_file_names(slot: str, name: str) -> None:
    assert slot_file_name(slot) == name


def test_trim_records_the_committed_sequence_first(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path / "wal")
    assert wal.committed() == 0
    wal.stage(4, "n/0", Segment(batch("x")))
    wal.trim(4)
    assert wal.committed() == 4
    wal.trim(2)  # an older commit (a restarted query) never lowers the mark
    assert wal.committed() == 4
    assert sorted(p.name for p in (tmp_path / "wal").iterdir()) == ["committed"]


# -- the same log on S3 (moto's server) ------------------------------------------------------------


def test_on_s3_a_segment_is_one_object_staged_once_and_trimmed(s3_wal_url: str) -> None:
    wal = WriteAheadLog(s3_wal_url)
    assert wal.sequences() == []
    assert wal.committed() == 0
    assert wal.read(1, "127.0.0.1:4150/0") is None
    assert wal.stage(1, "127.0.0.1:4150/0", Segment(batch("a", "b")))
    assert not wal.stage(1, "127.0.0.1:4150/0", Segment(batch("c")))  # exists: not replaced
    assert wal.stage(1, "127.0.0.1:4151/0", Segment(batch(), newer=True))
    segment = wal.read(1, "127.0.0.1:4150/0")
    assert segment is not None
    assert segment.batch.column(0).to_pylist() == ["a", "b"]
    assert segment.batch.schema == SCHEMA  # the attempt id is not part of the rows' schema
    assert wal.summary(1, "127.0.0.1:4151/0") == (0, True)
    # one object per segment, no drafts
    store = wal.store
    assert sorted(info.base_name for info in _objects(store)) == [
        "127.0.0.1%3A4150%2F0.arrow",
        "127.0.0.1%3A4151%2F0.arrow",
    ]
    for seq in (2, 3):
        assert wal.stage(seq, "n/0", Segment(batch(str(seq))))
    assert wal.sequences() == [1, 2, 3]
    assert wal.trim(2) == 2
    assert (wal.sequences(), wal.committed()) == ([3], 2)
    wal.trim(1)  # never lowers the mark
    assert WriteAheadLog(s3_wal_url).committed() == 2  # a new process (an executor) sees it
    hadoop_name = s3_wal_url.replace("s3://", "s3a://", 1)  # Hadoop's name for the same store
    assert WriteAheadLog(hadoop_name).sequences() == [3]


def test_on_s3_the_attempt_whose_segment_was_overwritten_loses(s3_wal_url: str) -> None:
    wal = WriteAheadLog(s3_wal_url)
    # Another attempt wrote the name between this attempt's check and its read-back: the
    # object store has no create-if-absent, so the last writer's segment is the one.
    original_create = wal.store.create

    def racing_create(name: str, data: bytes) -> bool:
        assert original_create(name, data)
        other = WriteAheadLog(s3_wal_url)
        other.store.replace(name, _encoded(batch("theirs")))
        return True

    wal.store.create = racing_create  # type: ignore[method-assign]
    assert not wal.stage(5, "n/0", Segment(batch("mine")))
    segment = WriteAheadLog(s3_wal_url).read(5, "n/0")
    assert segment is not None
    assert segment.batch.column(0).to_pylist() == ["theirs"]


def _encoded(rows: pa.RecordBatch) -> bytes:
    from nsqbox.spark.wal import _encode

    return _encode(Segment(rows), "another-attempt")


def _objects(store: object) -> list[pa.fs.FileInfo]:
    import pyarrow.fs as pafs

    from nsqbox.spark.wal_store import ObjectStore

    assert isinstance(store, ObjectStore)
    selector = pafs.FileSelector(store.root, recursive=True)
    return [i for i in store.fs.get_file_info(selector) if i.type == pafs.FileType.File]


def test_wal_urls_choose_the_store() -> None:
    from nsqbox.spark.wal_store import LocalStore, is_url, open_store

    assert not is_url("/data/wal")
    assert not is_url("file:///data/wal")
    assert is_url("s3a://bucket/wal")
    assert isinstance(open_store("file:///tmp/wal"), LocalStore)
    with pytest.raises(ValueError, match="no filesystem for ftp"):
        open_store("ftp://host/wal")
