"""The partitioned stream reader: NSQ read on the executors, staged in a write-ahead log.

``.option("reader", "partitioned")`` with ``.option("walPath", ...)``. NSQ has
no offsets, so a micro-batch is not a range of a log that exists elsewhere:
the reader makes the log itself.

- **Offsets** are ``{"seq": n, "slots": [...]}``: the batch's *sequence*
  number and its *slots*, one per nsqd node and index (``partitionsPerNode``
  of them per node; ``host:port/i``). The driver decides both in
  :meth:`NSQPartitionedStreamReader.latestOffset` (nodes from ``nsqd`` and
  ``lookupd``, looked up again every ``lookupdPollInterval``), without
  touching NSQ: whatever happens later, Spark's offset log holds the same
  batch.
- **A partition** is one slot of one sequence, read on an executor: if its
  segment is in the write-ahead log it returns those rows (a replay);
  otherwise it subscribes to its nsqd over connections of its own, pulls up
  to its share of ``maxMessagesPerBatch`` (waiting at most ``pollTimeout`` for
  the first), stages them as the segment (durably, once: see :mod:`.wal`),
  and only then FINs them and returns them to Spark.
- **commit(end)** removes every segment up to the committed sequence.

So a message is FINished only once it is in a segment, a batch replayed after
a crash reads the very rows of its first attempt where a segment was staged,
and a partition that never staged (its task died first) pulls afresh: what
the dead attempt held was never FINished and nsqd delivers it again.
Duplicates arise only where a segment was staged but its FIN never reached
nsqd (see ``docs/spark.md``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..client.errors import ClientError
from ..client.message import Message
from ..wire.errors import NSQError
from .admission import Admission, Bounds, lag_report, total_depth
from .depth import MAX_DEPTH, DepthProbe
from .fetch import discover_nsqd, node_fetcher
from .options import ReadOptions
from .rows import messages_to_batch
from .wal import Segment, WriteAheadLog

if TYPE_CHECKING:
    from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
else:
    try:  # pyspark >= 4.2 (older versions cannot run this reader, but may import it)
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    except ImportError:  # pragma: no cover - depends on the installed pyspark

        class SupportsTriggerAvailableNow:
            """Stand-in for pyspark < 4.2."""


__all__ = ["NSQPartitionedStreamReader", "SegmentPartition"]

log = logging.getLogger("nsqbox.spark")

#: A pull keeps collecting while messages arrive within this gap: a short batch costs
#: Spark a whole micro-batch (a few hundred ms) more, a longer gap only this much.
PULL_LINGER = 0.2
#: With no nsqd known for the topic, lookupd is asked again after this long (Spark asks
#: for the latest offset every few milliseconds while there is no data).
NO_NODES_RETRY = 1.0
#: While the channel is empty (or below ``minMessagesPerTrigger``), its depth is asked this
#: often, up to ``pollTimeout`` per trigger.
DEPTH_POLL = 0.1


class SegmentPartition(InputPartition):
    """One slot of one sequence: which nsqd to pull from, how much, and where to stage it."""

    def __init__(self, seq: int, slot: str, quota: int, cutoff_ns: int | None = None) -> None:
        super().__init__((seq, slot))
        self.seq = seq
        self.slot = slot
        self.quota = quota
        self.cutoff_ns = cutoff_ns

    @property
    def address(self) -> str:
        """The nsqd TCP address of the slot (``host:port`` of ``host:port/i``)."""
        return self.slot.rpartition("/")[0]

    def __repr__(self) -> str:
        return f"SegmentPartition(seq={self.seq}, slot={self.slot!r}, quota={self.quota})"


def _offset(offset: dict[str, Any]) -> tuple[int, list[str]]:
    try:
        return int(offset["seq"]), [str(s) for s in offset.get("slots", [])]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"not an offset of format('nsq') partitioned: {offset!r}") from None


def pull_segment(options: ReadOptions, partition: SegmentPartition) -> Segment:
    """Pull up to the partition's quota from its nsqd, stage it, then FIN it (for :meth:`read`)."""
    wal = WriteAheadLog(_wal_root(options))
    if wal.committed() >= partition.seq:
        # A straggler of a batch Spark committed already: its rows go nowhere.
        return Segment(messages_to_batch([], options.topic, options.channel))
    fetcher = node_fetcher(options, partition.address, partition.quota)
    messages: list[Message] = []
    try:
        try:
            fetcher.connect(force=True)
        except (OSError, ClientError, NSQError) as exc:
            # A node that went away: an empty segment, its messages stay on it.
            log.warning("partition %s: cannot read nsqd: %s", partition.slot, exc)
        else:
            messages = fetcher.take(partition.quota, options.poll_timeout, linger=PULL_LINGER)
            fetcher.stop_receiving()  # RDY 0: nothing more arrives while this stages
        newer = False
        if partition.cutoff_ns is not None:
            later = [m for m in messages if m.timestamp > partition.cutoff_ns]
            if later:
                newer = True
                fetcher.requeue(later)
                messages = [m for m in messages if m.timestamp <= partition.cutoff_ns]
        segment = Segment(messages_to_batch(messages, options.topic, options.channel), newer)
        if wal.stage(partition.seq, partition.slot, segment):
            if wal.committed() < partition.seq:  # else trimmed meanwhile: hand them back
                fetcher.finish(messages)  # staged: safe to let nsqd forget them
                messages = []
            return segment
        # Another attempt of this task staged first: its rows are the partition's.
        staged = wal.read(partition.seq, partition.slot)
        assert staged is not None
        return staged
    finally:
        fetcher.stop_receiving()
        fetcher.requeue(messages)  # not staged by this attempt: back to nsqd at once
        fetcher.close(requeue_buffered=True)


def default_read_limit(options: ReadOptions) -> ReadLimit:
    """``ReadMinRows`` with ``minMessagesPerTrigger``, else ``ReadMaxRows`` of the maximum."""
    from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows  # pyspark >= 4.2

    if options.min_messages_per_trigger is not None:
        return ReadMinRows(options.min_messages_per_trigger)
    return ReadMaxRows(options.max_messages_per_batch)


def bounds_of(limit: ReadLimit, options: ReadOptions) -> Bounds:
    """What Spark's ``limit`` allows: its own number, the options for the rest."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    if isinstance(limit, ReadAllAvailable):
        return Bounds(None)
    if isinstance(limit, ReadMaxRows):
        return Bounds(max(1, int(limit.max_rows)))
    if isinstance(limit, ReadMinRows):
        return Bounds(options.max_messages_per_batch, max(1, int(limit.min_rows)))
    return Bounds(options.max_messages_per_batch)  # files and bytes mean nothing here


def _wal_root(options: ReadOptions) -> str:
    if options.wal_path is None:
        raise ValueError("the partitioned reader needs 'walPath'")
    return options.wal_path


class NSQPartitionedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("nsq").option("reader", "partitioned")``: see the module docstring.

    Runs in two places: the planning methods in a Python process beside the
    driver, :meth:`read` in executors' Python workers (pickled: no sockets).
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.wal = WriteAheadLog(_wal_root(options))
        self._nodes: list[str] = []
        self._nodes_at = float("-inf")
        #: Set by prepareForTriggerAvailableNow: messages published after it are not read.
        self._cutoff_ns: int | None = None
        #: Sequences planned in this availableNow run (their segments tell when it is done).
        self._planned: set[int] = set()
        self._probe = DepthProbe(options.connection, options.topic, options.channel)
        self._admission = Admission(options.max_trigger_delay)
        #: The depths asked at the last planning (reported as the latest offset: the lag).
        self._depths: dict[str, int | None] = {}

    # -- the driver side ---------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        """A new query starts after the last sequence in the log (none: 0)."""
        return {"seq": max([*self.wal.sequences(), self.wal.committed()]), "slots": []}

    def _known_nodes(self) -> list[str]:
        now = time.monotonic()
        connection = self.options.connection
        interval = self.options.lookupd_poll_interval
        if not self._nodes:  # no nsqd has the topic yet: look again soon, not at every call
            interval = min(interval, NO_NODES_RETRY)
        if not connection.lookupd or now - self._nodes_at >= interval:
            nodes = discover_nsqd(connection, self.options.topic)
            if nodes or not connection.lookupd:  # lookupd unreachable: keep the nodes known
                self._nodes = sorted(nodes)
            self._nodes_at = now
        return self._nodes

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow: read what was published before now, then report no more data."""
        self._cutoff_ns = time.time_ns()
        self._planned.clear()

    def _run_is_over(self, seq: int, slots: list[str]) -> bool:
        # availableNow: the last batch this run planned met no message, or a newer one.
        if seq not in self._planned:
            return False
        summaries = [self.wal.summary(seq, slot) for slot in slots]
        if any(s is None for s in summaries):
            return False
        return all(rows == 0 for rows, _ in filter(None, summaries)) or any(
            newer for _, newer in filter(None, summaries)
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxMessagesPerTrigger`` (``ReadMaxRows``), or ``ReadMinRows`` with a minimum."""
        return default_read_limit(self.options)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next sequence, or ``start`` (no batch) while nothing or too little waits.

        Asks every node for the channel's depth first: nodes known to be empty get
        no slot; the batch takes at most the limit's messages, split evenly
        over the slots (the deepest nodes first when there are more slots than
        messages).
        """
        seq, slots = _offset(start)
        if self._cutoff_ns is not None and self._run_is_over(seq, slots):
            return start
        bounds = bounds_of(limit, self.options)
        if self._cutoff_ns is not None:  # availableNow: what is there, however little
            bounds = Bounds(bounds.max_rows)
        # Idle (or too little): ask again every DEPTH_POLL, up to pollTimeout, as the simple
        # reader waits for its first message; Spark asks again at once after a "no batch".
        deadline = time.monotonic() + self.options.poll_timeout
        while True:
            nodes = self._known_nodes()
            self._depths = self._probe.depths(nodes)
            rows = self._admission.rows(
                bounds, total_depth(self._depths), self.options.max_messages_per_batch
            )
            busy = [n for n in nodes if self._depths.get(n) != 0]
            if rows is not None and busy:
                break
            if not nodes or time.monotonic() >= deadline or self._cutoff_ns is not None:
                return start
            time.sleep(min(DEPTH_POLL, max(0.0, deadline - time.monotonic())))
        busy.sort(key=lambda n: -(self._depths.get(n) or MAX_DEPTH))  # unknown: as deep
        per_node = self.options.partitions_per_node
        slots = [f"{node}/{i}" for node in busy for i in range(per_node)][: max(rows, 1)]
        end: dict[str, Any] = {"seq": seq + 1, "slots": sorted(slots)}
        end["quota"] = max(1, rows // len(slots))
        if self._cutoff_ns is not None:
            end["cutoff"] = self._cutoff_ns
            self._planned.add(seq + 1)
        self._admission.planned()
        return end

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The lag: messages waiting in the channel over all nodes when the batch was planned.

        See :func:`lag_report`; None before the first look.
        """
        return lag_report(self._depths)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per slot and sequence after ``start`` up to ``end``."""
        first, _ = _offset(start)
        last, slots = _offset(end)
        quota = int(end.get("quota", self.options.max_messages_per_batch))
        cutoff = end.get("cutoff")
        return [
            SegmentPartition(seq, slot, quota, cutoff)
            for seq in range(first + 1, last + 1)
            for slot in slots
        ]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed every batch up to ``end``: remove their segments."""
        seq, _ = _offset(end)
        self.wal.trim(seq)

    # -- the executor side -------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's segment: staged before (a replay), or pulled, staged, FINished now."""
        assert isinstance(partition, SegmentPartition)
        segment = self.wal.read(partition.seq, partition.slot)
        if segment is None:
            segment = pull_segment(self.options, partition)
        if segment.batch.num_rows:
            yield segment.batch
