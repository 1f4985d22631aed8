"""The streaming reader: NSQ messages into Spark micro-batches, at least once.

Spark runs a :class:`~pyspark.sql.datasource.SimpleDataSourceStreamReader` in
one long-lived Python process next to the driver, and that is what NSQ needs:
a message can only be FINished over the connection that received it, so the
process that reads a batch must be the one that later finishes it.

The life of a message:

1. nsqd pushes it (the reader holds at most twice ``maxMessagesPerBatch`` in
   flight in total, over all nsqd nodes, RDY split between its connections);
   it waits in the fetcher's buffer. The keep-alive thread reads whatever
   has arrived into that buffer and TOUCHes everything held, so no message
   the reader holds, read or not, reaches ``msg_timeout``.
2. :meth:`NSQStreamReader.read` hands it to Spark in a micro-batch whose
   offsets ``{"messages": n}`` count the messages this query has read. The
   batch is *pending*: in flight on nsqd, TOUCHed by a keep-alive thread.
3. Spark takes the batch's rows (the reader notices), runs the batch and
   writes it to its commit log. Only then does it ask for the next batch,
   ``read(start)`` with ``start`` at the end of the committed one; that call
   FINs the pending batches up to ``start``. ``commit(end)``, which Spark
   sends one batch late (when it plans the batch after), FINs too, whichever
   comes first. A batch Spark committed without taking its rows is REQ'd.

So a message is FINished only after Spark took and committed the batch that
holds it.
Nothing is lost when the query stops or its process dies: unfinished messages
go back to nsqd when their connection closes and ``msg_timeout`` expires (or
at once, REQ'd, on a clean stop). What Spark had committed but not yet told
the reader about is delivered again: duplicates, as with Kafka's source.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from ..client.message import Message
from .admission import Admission, Bounds, total_depth
from .depth import DepthProbe
from .fetch import Fetcher, discover_nsqd
from .options import ReadOptions
from .pending import PendingBatch, PendingBatches, split_taken
from .rows import messages_to_batch

if TYPE_CHECKING:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
else:
    try:  # pyspark >= 4.2; older versions run availableNow without telling the source
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    except ImportError:  # pragma: no cover - depends on the installed pyspark

        class SupportsTriggerAvailableNow:
            """Stand-in for pyspark < 4.2."""


__all__ = ["NSQStreamReader"]

log = logging.getLogger("nsqbox.spark")

OFFSET_KEY = "messages"
#: The end offset's record of the lag: messages waiting when the batch was planned.
DEPTH_KEY = "depth"
#: While fewer than ``minMessagesPerTrigger`` wait, the depth is asked this often.
DEPTH_POLL = 0.1
#: TOUCH held messages at least this often, whatever msg_timeout is (nsqd's
#: heartbeats, answered by the same thread, come every 30 s by default).
MAX_KEEPALIVE_INTERVAL = 10.0


def in_flight_bound(options: ReadOptions) -> int:
    """The most messages a streaming reader holds in flight, over all nsqd nodes."""
    return 2 * options.max_messages_per_batch


def _position(offset: dict[str, Any]) -> int:
    try:
        return int(offset[OFFSET_KEY])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"not an offset of format('nsq'): {offset!r}") from None


class _Session:
    """Connections, pending batches and the keep-alive thread of one running query."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        connection = options.connection
        config = connection.client_config(
            msg_timeout=options.msg_timeout, output_buffer_timeout=0.025
        )
        self.fetcher = Fetcher(
            options.topic,
            options.channel,
            config,
            lambda: discover_nsqd(connection, options.topic),
            # Room for the batch Spark is running and the next one, over all nodes.
            max_in_flight=in_flight_bound(options),
            reconnect_interval=options.lookupd_poll_interval if connection.lookupd else 5.0,
        )
        self.pending: PendingBatches[Message] = PendingBatches()
        # until nsqd told its msg_timeout (unset: its --msg-timeout), TOUCH at the cap
        self.interval = min((options.msg_timeout or 30.0) / 3, MAX_KEEPALIVE_INTERVAL)
        #: Keep-alive rounds completed (for tests and debugging).
        self.keepalive_rounds = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._keep_alive, name="nsqbox-spark-keepalive", daemon=True
        )

    def open(self) -> None:
        self.fetcher.connect(force=True)
        self._update_interval()
        self._thread.start()

    def _update_interval(self) -> None:
        # what nsqd granted (its --msg-timeout when the option is unset), a third of it
        granted = self.fetcher.msg_timeout(default=self.options.msg_timeout or 30.0)
        self.interval = min(granted / 3, MAX_KEEPALIVE_INTERVAL)

    # -- keeping messages alive --------------------------------------------------------
    def touch_held(self) -> None:
        """Read what has arrived, then TOUCH every message held; answer heartbeats.

        Reading first matters: nsqd's in-flight timeout runs from when it sent
        a message, read or not, and only a message read off the socket can be
        TOUCHed. Buffered messages that would outlive nsqd's max-msg-timeout
        before being used are handed back instead.
        """
        with self.fetcher.lock:
            self.fetcher.drain()
            self._update_interval()  # nodes come and go, each with its own msg_timeout
            self.fetcher.give_back_stale(margin=3 * self.interval)
            self.fetcher.touch([*self.pending, *self.fetcher.buffered])

    def _keep_alive(self) -> None:
        # Spark may spend longer than msg_timeout on a batch, and calls nothing on the
        # reader meanwhile: this thread keeps the batch in flight and the connections
        # alive. nsqd caps a message's total time in flight at --max-msg-timeout.
        while not self._stopping.wait(self.interval):
            try:
                self.touch_held()
            except Exception:  # keep the thread alive whatever one round met
                log.exception("keep-alive round failed")
            self.keepalive_rounds += 1

    # -- settling batches ----------------------------------------------------------------
    def commit(self, position: int) -> None:
        """Spark committed every batch up to ``position``: FIN what it took, REQ the rest."""
        with self.fetcher.lock:
            taken, untaken = split_taken(self.pending.pop_committed(position))
            self.fetcher.finish(taken)
            if untaken:
                log.warning("Spark moved past %d messages it never took: requeueing", len(untaken))
                self.fetcher.requeue(untaken)

    def settle(self, position: int) -> None:
        """Spark asks for data from ``position``: batches up to it are committed, others not."""
        with self.fetcher.lock:
            self.commit(position)
            abandoned = [m for b in self.pending.pop_abandoned(position) for m in b.messages]
            if abandoned:
                log.warning("Spark went back to offset %d: requeueing %d", position, len(abandoned))
                self.fetcher.requeue(abandoned)

    def close(self) -> None:
        """Stop the keep-alive thread; REQ everything held; close the connections."""
        self._stopping.set()
        with self.fetcher.lock:
            self.fetcher.requeue([m for b in self.pending.pop_abandoned(-1) for m in b.messages])
            self.fetcher.close(requeue_buffered=True)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.interval + 5)


class _BatchRows:
    """The rows of one micro-batch as Spark takes them: marks the pending batch *taken*.

    Spark keeps what :meth:`NSQStreamReader.read` returns in a cache and copies
    it when it plans the batch; iterating a copy is Spark taking the rows. A
    batch Spark never takes (it planned the range but read it elsewhere) is
    REQ'd, not FINished, when Spark moves past it.
    """

    def __init__(self, batch: pa.RecordBatch, pending: PendingBatch[Message]) -> None:
        self._batch = batch
        self._pending = pending
        self._done = False

    def __iter__(self) -> _BatchRows:
        return self

    def __next__(self) -> pa.RecordBatch:
        if self._done:
            raise StopIteration
        self._done = True
        self._pending.taken = True
        return self._batch

    def __copy__(self) -> _BatchRows:
        return _BatchRows(self._batch, self._pending)


class NSQStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("nsq")``: see the module docstring for the guarantees.

    Connections open on the first :meth:`read`, never in ``__init__`` (Spark
    builds readers in planning processes that never read).
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._session: _Session | None = None
        #: Set by prepareForTriggerAvailableNow: publish times after it are not read.
        self._cutoff_ns: int | None = None
        self._exhausted = False
        self._probe = DepthProbe(options.connection, options.topic, options.channel)
        self._admission = Admission(options.max_trigger_delay)

    def _waiting(self, session: _Session) -> int | None:
        """Messages waiting for this reader: the nodes' depth plus what it has received."""
        with session.fetcher.lock:
            session.fetcher.drain()
            nodes = session.fetcher.addresses
            held = len(session.fetcher.buffered)
        if not nodes:
            return None
        depth = total_depth(self._probe.depths(nodes))
        return None if depth is None else depth + held

    def _admit(self, session: _Session) -> tuple[int | None, int | None]:
        """``(how many to take or None for no batch, messages waiting)``, after waiting up
        to ``pollTimeout`` for ``minMessagesPerTrigger`` (or its delay)."""
        options = self.options
        minimum = None if self._cutoff_ns is not None else options.min_messages_per_trigger
        bounds = Bounds(options.max_messages_per_batch, minimum)
        if minimum is None and not (options.connection.nsqd_http or options.connection.lookupd):
            return options.max_messages_per_batch, None  # no depth to ask
        deadline = time.monotonic() + options.poll_timeout
        while True:
            waiting = self._waiting(session)
            if minimum is None:
                return options.max_messages_per_batch, waiting
            rows = self._admission.rows(bounds, waiting, options.max_messages_per_batch)
            if rows is not None or time.monotonic() >= deadline:
                return rows, waiting
            time.sleep(min(DEPTH_POLL, max(0.0, deadline - time.monotonic())))

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles readers to executors for readBetweenOffsets: no sockets or threads.
        state = self.__dict__.copy()
        state["_session"] = None
        return state

    def _open(self) -> _Session:
        if self._session is None:
            session = _Session(self.options)
            session.open()
            self._session = session
            atexit.register(_close_at_exit, weakref.ref(session))
        return self._session

    # -- SimpleDataSourceStreamReader --------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        """A new query starts at ``{"messages": 0}``: nothing read yet."""
        return {OFFSET_KEY: 0}

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow: read what was published before now, then report no more data.

        The run ends at the first read that finds nothing within ``pollTimeout``
        or meets a message published after this call (held back, not read).
        """
        self._cutoff_ns = time.time_ns()

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        """FIN what Spark committed, then the next micro-batch (up to ``maxMessagesPerTrigger``).

        With ``minMessagesPerTrigger``, no batch (``start``) while fewer wait on the
        nodes (asked over HTTP) and ``maxTriggerDelay`` has not passed since the last
        batch. The end offset records the messages waiting when the batch was
        planned (``depth``, its own included) where the nodes can be asked.
        """
        position = _position(start)
        session = self._open()
        options = self.options
        with session.fetcher.lock:
            session.settle(position)
            if self._exhausted:
                return iter(()), start
            session.fetcher.connect()
        limit, waiting = self._admit(session)
        if limit is None:
            return iter(()), start
        with session.fetcher.lock:
            messages = session.fetcher.take(
                limit,
                options.poll_timeout,
                keep_alive=session.touch_held,
                keep_alive_interval=session.interval,
            )
            if self._cutoff_ns is not None:
                messages = self._before_cutoff(session, messages)
            if not messages:
                return iter(()), start
            end = position + len(messages)
            pending = session.pending.add(position, end, messages)
        self._admission.planned()
        rows = _BatchRows(messages_to_batch(messages, options.topic, options.channel), pending)
        offset: dict[str, Any] = {OFFSET_KEY: end}
        if waiting is not None:
            offset[DEPTH_KEY] = max(waiting, len(messages))
        # Spark accepts Arrow record batches where it documents tuples (and converts
        # tuples to Arrow anyway); one batch per micro-batch, no object per cell.
        return cast(Iterator[tuple[Any, ...]], rows), offset

    def _before_cutoff(self, session: _Session, messages: list[Message]) -> list[Message]:
        cutoff = self._cutoff_ns
        assert cutoff is not None
        older = [m for m in messages if m.timestamp <= cutoff]
        if len(older) < len(messages) or not messages:
            # Published after the run began, or nothing left: this run is done. No more
            # deliveries (RDY 0); newer messages go back to nsqd at once.
            self._exhausted = True
            session.fetcher.stop_receiving()
            session.fetcher.requeue(m for m in messages if m.timestamp > cutoff)
        return older

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        """Recovery replays a batch that was planned but not committed: empty, by design.

        NSQ cannot replay. The replayed batch's messages were never FINished,
        so nsqd delivers them again (once their old connection's ``msg_timeout``
        expires) and they arrive in a later batch. The replayed batch itself is
        empty. Spark calls this on an executor, never on the reading process.
        """
        _position(start), _position(end)
        return iter(())

    def commit(self, end: dict[str, Any]) -> None:
        """FIN every pending message up to ``end`` (usually done already by :meth:`read`)."""
        if self._session is not None:
            self._session.commit(_position(end))

    def stop(self) -> None:
        """REQ held messages and close the connections (also run at process exit)."""
        if self._session is not None:
            self._session.close()
            self._session = None


def _close_at_exit(ref: weakref.ref[_Session]) -> None:
    # Spark ends the reader's process when the query stops without calling stop()
    # on simple readers; hand held messages back at once instead of at msg_timeout.
    session = ref()
    if session is not None:
        try:
            session.close()
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("closing the NSQ reader at exit")
