"""The partitioned reader's write-ahead log: immutable segments of staged messages.

A micro-batch of the partitioned stream reader is numbered by a *sequence*
(its end offset's ``seq``), and each of its partitions (a *slot*: one nsqd
node and an index) stages what it pulled from NSQ as one segment:
``<root>/<seq>/<slot>.arrow``, an Arrow IPC file holding the batch's rows
exactly as Spark gets them. A segment is written once and never changed:

- it is created whole unless its name exists (:mod:`.wal_store`: on a POSIX
  directory written aside, ``fsync``ed and hard-linked into its name; on an
  object store one PUT, then read back), so of two attempts of the same task
  (a retry, a speculative copy) one stages its messages; the other reads the
  winner's segment and hands its own messages back to nsqd;
- a segment that exists is the partition's rows for good: a replay reads it
  instead of pulling from NSQ.

Only then are the messages FINished (by the caller). The log is trimmed when
Spark commits a batch: the highest committed sequence is recorded, then every
sequence up to it is removed.

``root`` is a local path or a URL (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``).
Pure: pyarrow and the storage, no pyspark, no NSQ.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass

import pyarrow as pa

from .wal_store import LocalStore, ObjectStore, open_store

__all__ = ["Segment", "WriteAheadLog", "slot_file_name"]

#: Schema metadata of a segment whose partition met a message published after an
#: ``availableNow`` run began (handed back, not staged): that run is done.
NEWER_KEY = b"nsqbox.newer"
#: Schema metadata naming the attempt that wrote a segment (read back on object stores).
ATTEMPT_KEY = b"nsqbox.attempt"
_SEQ = re.compile(r"^\d{20}$")
#: The object holding the highest committed sequence.
COMMITTED = "committed"


def slot_file_name(slot: str) -> str:
    """A file name for a slot key such as ``127.0.0.1:4150/0`` (stable, no separators)."""
    return re.sub(r"[^A-Za-z0-9._-]", lambda m: f"%{ord(m.group()):02X}", slot)


@dataclass(frozen=True)
class Segment:
    """A staged segment: its rows, and whether its partition met a newer message."""

    batch: pa.RecordBatch
    newer: bool = False


def _encode(segment: Segment, attempt: str) -> bytes:
    schema = segment.batch.schema
    metadata = {**(schema.metadata or {}), ATTEMPT_KEY: attempt.encode()}
    if segment.newer:
        metadata[NEWER_KEY] = b"1"
    schema = schema.with_metadata(metadata)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(segment.batch.replace_schema_metadata(schema.metadata))
    return bytes(sink.getvalue().to_pybytes())


def _open(data: bytes) -> pa.ipc.RecordBatchFileReader:
    return pa.ipc.open_file(pa.BufferReader(data))


class WriteAheadLog:
    """Segments under ``root``, one "directory" per sequence (see the module docstring).

    Picklable (Spark ships it to executors): the storage is opened on first use.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        self._store: LocalStore | ObjectStore | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"root": self.root}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.root = str(state["root"])
        self._store = None

    @property
    def store(self) -> LocalStore | ObjectStore:
        """The storage of ``root`` (:func:`~.wal_store.open_store`)."""
        if self._store is None:
            self._store = open_store(self.root)
        return self._store

    @staticmethod
    def name(seq: int, slot: str) -> str:
        """The segment's name under the root: ``<seq>/<slot>.arrow``."""
        return f"{seq:020d}/{slot_file_name(slot)}.arrow"

    def stage(self, seq: int, slot: str, segment: Segment) -> bool:
        """Write the segment durably unless it exists: True if this call wrote it."""
        attempt = uuid.uuid4().hex
        name = self.name(seq, slot)
        if not self.store.create(name, _encode(segment, attempt)):
            return False
        if isinstance(self.store, ObjectStore):
            # no create-if-absent on an object store: the segment is whoever wrote last
            written = self.store.get(name)
            if written is None:
                return False
            metadata = _open(written).schema.metadata or {}
            return metadata.get(ATTEMPT_KEY) == attempt.encode()
        return True

    def read(self, seq: int, slot: str) -> Segment | None:
        """The staged segment, or None when this partition never staged one."""
        data = self.store.get(self.name(seq, slot))
        if data is None:
            return None
        table = _open(data).read_all()
        metadata = table.schema.metadata or {}
        newer = metadata.get(NEWER_KEY) == b"1"
        table = table.replace_schema_metadata(None)
        batches = table.combine_chunks().to_batches()
        batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)
        return Segment(batch, newer)

    def summary(self, seq: int, slot: str) -> tuple[int, bool] | None:
        """``(rows, newer)`` of a staged segment (None: not staged)."""
        data = self.store.get(self.name(seq, slot))
        if data is None:
            return None
        reader = _open(data)
        rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        return rows, (reader.schema.metadata or {}).get(NEWER_KEY) == b"1"

    def sequences(self) -> list[int]:
        """The sequences present, in order."""
        return sorted(int(name) for name in self.store.children() if _SEQ.match(name))

    def committed(self) -> int:
        """The highest sequence Spark committed (0 before the first :meth:`trim`)."""
        data = self.store.get(COMMITTED)
        try:
            return int(data) if data is not None else 0
        except ValueError:
            return 0

    def trim(self, upto: int) -> int:
        """Remove every sequence ``<= upto`` (Spark committed it); how many were removed.

        The committed mark is written first: a straggling task of a committed batch
        (a speculative copy Spark has not stopped yet) sees it and stages nothing.
        """
        if upto > self.committed():
            self.store.replace(COMMITTED, str(upto).encode())
        removed = 0
        for seq in self.sequences():
            if seq > upto:
                break
            self.store.remove_tree(f"{seq:020d}")
            removed += 1
        return removed
