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
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from ..client.message import Message
from .admission import Admission, Bounds
from .depth import DepthProbe
from .fetch import Fetcher, discover_nsqd
from .lag import waiting as waiting_of
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
        """Stop the keep-alive thread; RDY 0; REQ everything held; close the connections."""
        self._stopping.set()
        with self.fetcher.lock:
            # RDY 0 first, so what is REQ'd now is not sent straight back to this reader
            self.fetcher.stop_receiving()
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
        """Messages no micro-batch holds yet: the nodes' depth plus what this reader has
        prefetched (buffered, in the socket or still in nsqd's output buffer; see .lag)."""
        with session.fetcher.lock:
            counts = session.fetcher.connection_counts()
        if not counts:
            return None
        # What each connection released only changes in this thread (take) or when the
        # keep-alive hands a stale message back: counted before nsqd answers, it stays true.
        return waiting_of(self._probe.channel_stats(counts), counts)

    @property
    def _depth_known(self) -> bool:
        connection = self.options.connection
        return bool(connection.nsqd_http or connection.lookupd)

    def _admit(self, session: _Session, waiting: int | None) -> tuple[int | None, int | None]:
        """``(how many to take or None for no batch, messages waiting)`` from ``waiting``
        (asked already), after waiting up to ``pollTimeout`` for ``minMessagesPerTrigger``
        (or its delay), asking again every ``DEPTH_POLL``."""
        options = self.options
        minimum = None if self._cutoff_ns is not None else options.min_messages_per_trigger
        bounds = Bounds(options.max_messages_per_batch, minimum)
        if minimum is None:
            return options.max_messages_per_batch, waiting
        deadline = time.monotonic() + options.poll_timeout
        while True:
            rows = self._admission.rows(bounds, waiting, options.max_messages_per_batch)
            if rows is not None or time.monotonic() >= deadline:
                return rows, waiting
            time.sleep(min(DEPTH_POLL, max(0.0, deadline - time.monotonic())))
            waiting = self._waiting(session)

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
            _exit_on_sigterm()
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
        planned (``depth``: every message of the channel no earlier batch holds, its
        own included) where the nodes can be asked; once the channel is empty, one
        empty batch records a depth of 0.
        """
        position = _position(start)
        session = self._open()
        options = self.options
        with session.fetcher.lock:
            if not self._exhausted:
                session.fetcher.connect()
        # Asked before this call FINs anything: between micro-batches nsqd fills the
        # reader's in-flight budget and then sends nothing, so no message moves from the
        # queue to the reader while /stats is read (real nsqd reads its clients' counts
        # a moment before the depth; a message moving in between would be missed).
        waiting = self._waiting(session) if self._depth_known and not self._exhausted else None
        with session.fetcher.lock:
            session.settle(position)
            if self._exhausted:
                return iter(()), start
        limit, waiting = self._admit(session, waiting)
        if limit is None:
            return self._idle(start, position, waiting)
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
                return self._idle(start, position, waiting)
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

    def _idle(
        self, start: dict[str, Any], position: int, waiting: int | None
    ) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        """No batch to plan: ``start`` again, unless the channel just emptied.

        pyspark never asks a simple reader for a latest offset, and an idle trigger's
        progress repeats the last batch's end offset, whose depth is stale once the
        channel is empty. So the first idle trigger after a batch that recorded a depth
        above 0 plans one empty batch whose end offset records 0; later ones plan none.
        """
        recorded = start.get(DEPTH_KEY)
        if waiting == 0 and self._cutoff_ns is None and isinstance(recorded, int) and recorded:
            return iter([]), {OFFSET_KEY: position, DEPTH_KEY: 0}
        return iter(()), start

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


#: A SIGTERM this soon after the first is ignored: Spark sends its stop twice (see
#: :func:`_terminated`). A later one ends the process at once (a close that hangs).
SIGTERM_REPEAT_GRACE = 30.0

#: When this process got its first SIGTERM (``time.monotonic()``), if it has.
_first_sigterm: float | None = None


def _terminated(signum: int, frame: object) -> None:
    # Spark's PythonStreamingSourceRunner.stop sends SIGTERM twice, a moment apart:
    # stopWorker destroys the process, then the factory's stop destroys every worker it
    # started again, while this one still runs. Raising SystemExit again would cut the
    # exit-time close short (before a single REQ when it lands early): only the first
    # one counts.
    global _first_sigterm
    now = time.monotonic()
    if _first_sigterm is None:
        _first_sigterm = now
        raise SystemExit(128 + signum)
    if now - _first_sigterm < SIGTERM_REPEAT_GRACE:
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


#: The module Spark runs a streaming source's Python process as.
_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def _in_spark_worker() -> bool:
    # Spark sets SPARK_PYTHON_RUNTIME for the Python workers it starts (4.1 and later);
    # the source's process runs the runner module as __main__.
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return bool(os.environ.get("SPARK_PYTHON_RUNTIME")) or getattr(spec, "name", "") == _RUNNER


def _exit_on_sigterm() -> None:
    """Make SIGTERM a normal exit in this process, so :func:`_close_at_exit` runs.

    When a query stops (``query.stop()``, the end of a ``Trigger.Once`` or
    ``availableNow`` run, ``spark.stop()``), Spark ends the simple reader's process
    with SIGTERM (its Python worker factory's ``stopWorker``) and never calls
    :meth:`NSQStreamReader.stop` (pyspark's bridge for simple readers does nothing
    there). Python's default for SIGTERM ends the process at once, skipping exit
    handlers, and real nsqd leaves a vanished client's messages in flight until
    ``msg_timeout``. Spark's second SIGTERM for the same stop, which often arrives
    while that close runs, is ignored (within :data:`SIGTERM_REPEAT_GRACE`). Only
    in a Python worker Spark started (not in a program that drives the reader
    itself), from the main thread (Python's rule), and only where no one else
    handles SIGTERM.
    """
    if not _in_spark_worker() or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _terminated)
    except (ValueError, OSError):  # pragma: no cover - no signals here (an embedded interpreter)
        log.debug("cannot handle SIGTERM in this process")


def _close_at_exit(ref: weakref.ref[_Session]) -> None:
    # Spark ends the reader's process when the query stops without calling stop()
    # on simple readers (with SIGTERM: see _exit_on_sigterm); hand held messages back
    # at once instead of at msg_timeout.
    session = ref()
    if session is not None:
        try:
            session.close()
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("closing the NSQ reader at exit")
