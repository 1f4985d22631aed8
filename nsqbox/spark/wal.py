"""The partitioned reader's write-ahead log: immutable segments of staged messages.

A micro-batch of the partitioned stream reader is numbered by a *sequence*
(its end offset's ``seq``), and each of its partitions (a *slot*: one nsqd
node and an index) stages what it pulled from NSQ as one segment:
``<root>/<seq>/<slot>.arrow``, an Arrow IPC file holding the batch's rows
exactly as Spark gets them. A segment is written once and never changed:

- it is written aside, flushed to disk (``fsync``), then hard-linked into its
  name, which fails when the name exists, so of two attempts of the same task
  (a retry, a speculative copy) exactly one stages its messages; the other
  reads the winner's segment and hands its own messages back to nsqd;
- a segment that exists is the partition's rows for good: a replay reads it
  instead of pulling from NSQ.

Only then are the messages FINished (by the caller). The log is trimmed when
Spark commits a batch: the highest committed sequence is recorded, then every
sequence up to it is removed.

Pure: pyarrow and the filesystem, no pyspark, no NSQ.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

__all__ = ["Segment", "WriteAheadLog", "slot_file_name"]

#: Schema metadata of a segment whose partition met a message published after an
#: ``availableNow`` run began (handed back, not staged): that run is done.
NEWER_KEY = b"nsqbox.newer"
_SEQ = re.compile(r"^\d{20}$")
#: The file holding the highest committed sequence.
COMMITTED = "committed"


def slot_file_name(slot: str) -> str:
    """A file name for a slot key such as ``127.0.0.1:4150/0`` (stable, no separators)."""
    return re.sub(r"[^A-Za-z0-9._-]", lambda m: f"%{ord(m.group()):02X}", slot)


@dataclass(frozen=True)
class Segment:
    """A staged segment: its rows, and whether its partition met a newer message."""

    batch: pa.RecordBatch
    newer: bool = False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WriteAheadLog:
    """Segments under ``root``, one directory per sequence (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _dir(self, seq: int) -> Path:
        return self.root / f"{seq:020d}"

    def path(self, seq: int, slot: str) -> Path:
        """Where the segment of ``slot`` in sequence ``seq`` lives."""
        return self._dir(seq) / f"{slot_file_name(slot)}.arrow"

    def stage(self, seq: int, slot: str, segment: Segment) -> bool:
        """Write the segment durably unless it exists: True if this call wrote it."""
        target = self.path(seq, slot)
        if target.exists():
            return False
        directory = target.parent
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            _fsync_dir(directory.parent)
        draft = directory / f".{target.name}.{uuid.uuid4().hex}.tmp"
        schema = segment.batch.schema
        if segment.newer:
            schema = schema.with_metadata({**(schema.metadata or {}), NEWER_KEY: b"1"})
        try:
            with open(draft, "wb") as raw:
                with pa.ipc.new_file(raw, schema) as writer:
                    writer.write_batch(segment.batch.replace_schema_metadata(schema.metadata))
                raw.flush()
                os.fsync(raw.fileno())
            try:
                os.link(draft, target)  # atomic, and never replaces an existing segment
            except FileExistsError:
                return False
            _fsync_dir(directory)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                draft.unlink()

    def read(self, seq: int, slot: str) -> Segment | None:
        """The staged segment, or None when this partition never staged one."""
        try:
            with pa.OSFile(str(self.path(seq, slot)), "rb") as source:
                table = pa.ipc.open_file(source).read_all()
        except FileNotFoundError:
            return None
        metadata = table.schema.metadata or {}
        newer = metadata.get(NEWER_KEY) == b"1"
        table = table.replace_schema_metadata(None)
        batches = table.combine_chunks().to_batches()
        batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)
        return Segment(batch, newer)

    def summary(self, seq: int, slot: str) -> tuple[int, bool] | None:
        """``(rows, newer)`` of a staged segment without reading its rows (None: not staged)."""
        try:
            with pa.memory_map(str(self.path(seq, slot))) as source:
                reader = pa.ipc.open_file(source)
                rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
                return rows, (reader.schema.metadata or {}).get(NEWER_KEY) == b"1"
        except FileNotFoundError:
            return None

    def sequences(self) -> list[int]:
        """The sequences present, in order."""
        if not self.root.is_dir():
            return []
        return sorted(int(p.name) for p in self.root.iterdir() if _SEQ.match(p.name))

    def committed(self) -> int:
        """The highest sequence Spark committed (0 before the first :meth:`trim`)."""
        try:
            return int((self.root / COMMITTED).read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def trim(self, upto: int) -> int:
        """Remove every sequence ``<= upto`` (Spark committed it); how many were removed.

        The committed mark is written first: a straggling task of a committed batch
        (a speculative copy Spark has not stopped yet) sees it and stages nothing.
        """
        if upto > self.committed():
            self.root.mkdir(parents=True, exist_ok=True)
            draft = self.root / f".{COMMITTED}.{uuid.uuid4().hex}.tmp"
            draft.write_text(str(upto))
            os.replace(draft, self.root / COMMITTED)
        removed = 0
        for seq in self.sequences():
            if seq > upto:
                break
            shutil.rmtree(self._dir(seq), ignore_errors=True)
            removed += 1
        return removed
