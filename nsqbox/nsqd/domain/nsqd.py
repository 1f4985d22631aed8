"""The NSQD container: options, topics, clients, health, notifications, the queue scan."""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ... import NSQ_VERSION
from ...broker.clock import BrokerClock
from ...wire.message import MIN_VALID_MSG_LENGTH
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..diskqueue.queue import DiskQueue
from . import metadata as md
from .backend import BackendQueue, DummyBackend
from .faults import NodeFaults
from .journal import Journal
from .message import Message, encode_each
from .options import NSQDOptions
from .topic import Topic

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from ...snapshot.loaded import LoadedSnapshot
    from .channel import Channel
    from .quantile import Quantile

#: Messages written per disk-queue call when a queue is flushed at exit.
_FLUSH_BATCH = 4096


class ShutdownError(RuntimeError):
    """A clean shutdown could not persist everything; each failure was logged as it happened.

    Raised by :meth:`NSQD.close` after it has flushed every queue it could.
    """

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        super().__init__(
            f"failed to persist {len(failures)} item(s) at exit: " + "; ".join(failures)
        )


class NSQD:
    """Everything one nsqd owns, independent of sockets.

    Transports (the TCP protocol, the HTTP API, lookupd registration) call into
    it; it never calls into them except through the notify callbacks. It is the
    :class:`~.node.Node` of its topics and channels, which reach it through that
    protocol and the callbacks it gives them, never by importing it.
    """

    def __init__(
        self,
        options: NSQDOptions,
        *,
        now: Callable[[], float] = time.monotonic,
        clock: BrokerClock | None = None,
    ) -> None:
        options.validate()
        self.options = options
        #: Broker time (its box's, shared with its nsqlookupd): real time unless manual.
        self.clock = clock if clock is not None else BrokerClock(real=now)
        #: The monotonic broker clock, seconds: message deadlines, the queue scan.
        self.now: Callable[[], float] = self.clock.now
        #: Broker wall time, ns since the epoch: message timestamps.
        self.wall_ns: Callable[[], int] = self.clock.wall_ns
        #: Real time (heartbeats, disk syncs, auth TTLs), whatever the broker clock says.
        self.real_now = self.clock.real
        self.logger = logging.getLogger("nsqbox.nsqd")
        #: One thread for the disk queues' counted syncs (made for the first disk queue, and
        #: started by the first sync).
        self._syncer: ThreadPoolExecutor | None = None
        self.start_time = time.time()
        self.hostname = socket.gethostname()
        self.topics: dict[str, Topic] = {}
        self.clients: dict[int, Any] = {}
        self.tcp_port = 0
        self.http_port = 0
        self.https_port = 0
        self.exiting = False
        #: Stopped by :meth:`crash`: nothing more is written to the data path.
        self.crashed = False
        self.loading = False
        #: The last snapshot loaded into this nsqd (nsqbox's snapshot routes, ``up --load``).
        self.loaded_snapshot: LoadedSnapshot | None = None
        #: This server's own random numbers (queue-scan sampling, sample rates): it
        #: runs inside test suites and applications and must not move their
        #: global random state (hypothesis checks that it does not).
        self.random = random.Random()
        self._health_error: str | None = None
        #: What a publish to a topic fails with, or None (the faults set it: None
        #: unless one is active, so the hot path pays one attribute check).
        self.publish_fault: Callable[[str], str | None] | None = None
        #: Faults on demand (tests): failed publishes, a full disk, drops...
        self.faults = NodeFaults(self)
        self._client_ids = 0
        #: What happened to each message (None: ``--journal-size=0``), issue #33.
        self.journal: Journal | None = None
        if options.journal_size:
            self.journal = Journal(
                options.journal_size, wall_ns=self.wall_ns, now=self.now, clients=self.clients
            )
        self._notify_callbacks: list[Callable[[Topic | Channel], None]] = []
        #: Every live channel, kept until a topic or channel is created or deleted: the
        #: queue scan samples it every queue-scan-interval, whatever the number of topics.
        self._channels: list[Channel] | None = None
        #: Called with each topic created at runtime; lookupd support replaces it
        #: to pre-create channels known to lookupd before the topic starts.
        self.on_new_topic: Callable[[Topic], None] = Topic.start
        #: The lookupd registration while it runs (the
        #: :class:`~nsqbox.nsqd.lookup.LookupService` sets itself here), for code given only
        #: the node; None when none runs.
        self.lookup: object | None = None
        #: What a publish to a topic that is still being announced awaits before it
        #: answers, by topic name: the lookup loop registers a new topic with every
        #: connected lookupd first, as nsqd's GetTopic blocks on lookupd.
        self.announcing: dict[str, Callable[[], Awaitable[None]]] = {}
        self.data_path = options.data_path or os.getcwd()
        # deferred deadlines read at start: (topic, channel) -> {message id: wall-clock ns}
        self._restored_deadlines: dict[tuple[str, str], dict[bytes, int]] = {}
        self._deadlines_to_save: list[md.DeferredDeadline] = []
        # what close() could not persist, one entry per queue or file
        self._shutdown_failures: list[str] = []

    # -- ids, health ---------------------------------------------------------
    def next_client_id(self) -> int:
        """A new client id (nsqd counts from 1)."""
        self._client_ids += 1
        return self._client_ids

    def set_health(self, error: str | None) -> None:
        """Record a backend failure (or its end, with None)."""
        self._health_error = error

    @property
    def health_error(self) -> str | None:
        """The last backend failure, while unhealthy (or the error of a full-disk fault)."""
        if self._health_error is None and self.publish_fault is not None:
            return self.faults.disk_error
        return self._health_error

    def is_healthy(self) -> bool:
        """False after a failed backend write, until one succeeds (or while a disk is full)."""
        return self.health_error is None

    def get_health(self) -> str:
        """``OK`` or ``NOK - <error>``, as /ping and /stats report it."""
        error = self.health_error
        if error is None:
            return "OK"
        return f"NOK - {error}"

    # -- topics --------------------------------------------------------------
    def get_topic(self, name: str) -> Topic:
        """The topic, created (and started) if needed."""
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        topic = Topic(name, self, notify=self.notify, on_delete=self._topic_deleted)
        self.topics[name] = topic
        self.logger.info("TOPIC(%s): created", name)
        self.notify(topic)
        if not self.loading:
            self.on_new_topic(topic)
        return topic

    def get_existing_topic(self, name: str) -> Topic | None:
        """The topic if it exists."""
        return self.topics.get(name)

    def delete_existing_topic(self, name: str) -> bool:
        """Delete a topic, its channels and messages; False when absent."""
        topic = self.topics.get(name)
        if topic is None:
            return False
        topic.delete()
        self.topics.pop(name, None)
        self._channels = None
        self.persist_metadata()
        return True

    def _topic_deleted(self, topic: Topic) -> None:
        """An ephemeral topic lost its last channel (nsqd's topic deleteCallback)."""
        self.delete_existing_topic(topic.name)

    def channels(self) -> list[Channel]:
        """Every live channel of every topic (one list until a topic or channel is created or
        deleted: callers must not change it)."""
        channels = self._channels
        if channels is None:
            channels = self._channels = [
                c
                for t in self.topics.values()
                if not t.exiting
                for c in t.channels.values()
                if not c.exiting
            ]
        return channels

    # -- notifications and persistence ----------------------------------------
    def add_notify_callback(self, callback: Callable[[Topic | Channel], None]) -> None:
        """Call ``callback(obj)`` whenever a topic or channel is created or deleted."""
        self._notify_callbacks.append(callback)

    def notify(self, obj: Topic | Channel) -> None:
        """A topic or channel was created or deleted (``obj.exiting`` tells which)."""
        self._channels = None
        for callback in self._notify_callbacks:
            callback(obj)
        if not self.loading and not obj.ephemeral:
            self.persist_metadata()

    def persist_metadata(self) -> None:
        """Rewrite nsqd.dat (atomically) with every non-ephemeral topic and channel."""
        if self.loading or self.crashed:
            return
        topics = tuple(
            md.TopicMetadata(
                name=t.name,
                paused=t.paused,
                channels=tuple(
                    md.ChannelMetadata(name=c.name, paused=c.paused)
                    for c in t.channels.values()
                    if not c.ephemeral
                ),
            )
            for t in self.topics.values()
            if not t.ephemeral
        )
        path = os.path.join(self.data_path, md.METADATA_FILE_NAME)
        self.logger.info("NSQ: persisting topic/channel metadata to %s", path)
        try:
            md.persist_metadata(self.data_path, md.Metadata(topics=topics, version=NSQ_VERSION))
        except OSError as exc:
            self.logger.error("failed to persist metadata - %s", exc)
            if self.exiting:
                self._shutdown_failures.append(f"{md.METADATA_FILE_NAME} ({exc})")

    def load_metadata(self) -> None:
        """Recreate topics and channels (and their pause state) from nsqd.dat, then start them.

        Also reads nsqbox's deferred-deadline side file, so that deferred messages
        flushed to disk at the last shutdown wait out the rest of their delay.
        """
        data = md.load_metadata(self.data_path)
        for (topic_name, channel_name, msg_id), deadline in md.load_deferred(
            self.data_path
        ).items():
            self._restored_deadlines.setdefault((topic_name, channel_name), {})[msg_id] = deadline
        if data is None:
            return
        self.loading = True
        try:
            for t in data.topics:
                if not is_valid_topic_name(t.name):
                    self.logger.warning("skipping creation of invalid topic %s", t.name)
                    continue
                topic = self.get_topic(t.name)
                topic.paused = t.paused
                for c in t.channels:
                    if not is_valid_channel_name(c.name):
                        self.logger.warning("skipping creation of invalid channel %s", c.name)
                        continue
                    topic.get_channel(c.name).paused = c.paused
        finally:
            self.loading = False
        for topic in self.topics.values():
            topic.start()

    def restored_deadlines(self, topic: str, channel: str) -> dict[bytes, int]:
        """Deferred deadlines (wall-clock ns by message id) saved for this channel, if any."""
        return self._restored_deadlines.pop((topic, channel), {})

    def save_deferred(
        self, topic: str, channel: str, msgs: list[Message], restored: dict[bytes, int]
    ) -> None:
        """Remember when each of a closing channel's deferred messages is due.

        ``restored`` are the deadlines read at start for messages the channel has not
        read back from its backend yet: they are saved again as they are.
        """
        now, wall = self.now(), self.wall_ns()
        for msg in msgs:
            deadline = wall + int((msg.deadline - now) * 1e9)
            self._deadlines_to_save.append(md.DeferredDeadline(topic, channel, msg.id, deadline))
        for msg_id, deadline in restored.items():
            self._deadlines_to_save.append(md.DeferredDeadline(topic, channel, msg_id, deadline))

    # -- backends ------------------------------------------------------------
    def new_backend(self, name: str, ephemeral: bool) -> BackendQueue:
        """The spill queue for a topic (``name``) or channel (``topic:channel``)."""
        if ephemeral:
            return DummyBackend()
        opts = self.options
        return DiskQueue(
            name,
            self.data_path,
            opts.max_bytes_per_file,
            MIN_VALID_MSG_LENGTH,
            opts.max_msg_size + MIN_VALID_MSG_LENGTH,
            opts.sync_every,
            opts.sync_timeout,
            clock=self.real_now,
            syncer=self._disk_syncer(),
        )

    def _disk_syncer(self) -> ThreadPoolExecutor:
        if self._syncer is None:
            from concurrent.futures import ThreadPoolExecutor  # not to start a node

            self._syncer = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="nsqbox-diskqueue-sync"
            )
        return self._syncer

    def sync_backends(self) -> None:
        """fsync disk queues whose --sync-timeout has passed (go-diskqueue's sync ticker)."""
        for topic in self.topics.values():
            topic.backend.maybe_sync()
            for channel in topic.channels.values():
                channel.backend.maybe_sync()

    def write_to_backend(self, backend: BackendQueue, msgs: list[Message]) -> bool:
        """Spill messages, one write for the lot (per data file); on failure mark the node
        unhealthy and return False (messages of earlier files may have been written)."""
        records, refused = encode_each(msgs)
        for msg in refused:
            self.logger.error("failed to encode message %r for the backend - skipped", msg.id)
        try:
            backend.put_many(records)
        except (OSError, ValueError) as exc:
            self.set_health(str(exc))
            self.logger.error("failed to write message to backend - %s", exc)
            return False
        if self._health_error is not None:
            self.set_health(None)
        return True

    def flush_backend(self, name: str, backend: BackendQueue, msgs: list[Message]) -> None:
        """Shutdown: write ``msgs`` to ``backend`` and close it; failures are logged, not raised.

        One line per queue that fails, so that one bad queue neither stops the others from
        being flushed nor floods the log with a line per message.
        """
        error: Exception | None = None
        written = 0
        records, refused = encode_each(msgs)
        if refused:
            # one record that cannot be encoded costs itself only: the rest are written
            self.logger.error(
                "diskqueue(%s) skipped %d message(s) that cannot be encoded at exit - %s",
                name,
                len(refused),
                ", ".join(repr(m.id) for m in refused[:8]),
            )
            self._shutdown_failures.append(f"diskqueue({name}): {len(refused)} unencodable")
        try:
            for start in range(0, len(records), _FLUSH_BATCH):
                batch = records[start : start + _FLUSH_BATCH]
                try:
                    backend.put_many(batch)
                except ValueError:  # a record of a size the queue refuses: one at a time
                    self._put_each(name, backend, batch)
                written += len(batch)
        except (OSError, ValueError) as exc:
            error = exc
            lost = len(records) - written
            self.logger.error(
                "diskqueue(%s) failed to write %d message(s) at exit - %s", name, lost, exc
            )
            self._shutdown_failures.append(f"diskqueue({name}): {lost} message(s) ({exc})")
        try:
            backend.close()
        except OSError as exc:
            self.logger.error("diskqueue(%s) failed to persist at exit - %s", name, exc)
            if error is None:
                self._shutdown_failures.append(f"diskqueue({name}): metadata ({exc})")

    def _put_each(self, name: str, backend: BackendQueue, records: list[bytes]) -> None:
        """Shutdown: write ``records`` one by one; one the queue refuses is logged and skipped."""
        for record in records:
            try:
                backend.put(record)
            except ValueError as exc:
                self.logger.error("diskqueue(%s) skipped a message at exit - %s", name, exc)
                self._shutdown_failures.append(f"diskqueue({name}): 1 message(s) ({exc})")

    def abandon(self) -> None:
        """A failed start (or a crash): release every file, writing nothing to the data path."""
        self.exiting = True
        for topic in self.topics.values():
            for channel in topic.channels.values():
                channel.backend.release()
            topic.backend.release()
        if self._syncer is not None:
            self._syncer.shutdown()

    def crash(self) -> None:
        """Stop as a SIGKILL would: from now on nothing is written to the data path.

        What survives is what is on disk already: every record the disk queues
        wrote (each put is a ``pwrite`` to the kernel, with no buffer in this
        process, so a killed process loses none of them), their meta files as of
        their last sync, and ``nsqd.dat`` as last persisted (it is rewritten on
        every topic or channel change). Memory queues, in-flight and deferred
        messages are lost. Opening the data path again salvages records past a
        stale meta file and reads records popped since its last sync once more
        (see :mod:`.diskqueue_files`). Topics and channels refuse further work
        (``exiting``); the caller then cancels the server, which skips :meth:`close`.
        """
        self.crashed = True
        for topic in self.topics.values():
            topic.exiting = True
            for channel in topic.channels.values():
                channel.exiting = True
        self.abandon()

    def new_e2e_latency(self) -> Quantile | None:
        """A latency tracker when --e2e-processing-latency-percentile is set."""
        if not self.options.e2e_processing_latency_percentiles:
            return None
        from .quantile import Quantile

        return Quantile(
            self.options.e2e_processing_latency_window_time,
            self.options.e2e_processing_latency_percentiles,
            wall_clock_ns=self.wall_ns,
        )

    # -- the queue scan (nsqd's queueScanLoop) ---------------------------------
    def scan_queues(self, channels: list[Channel]) -> None:
        """One queue-scan cycle: random channels, rescanned while enough are dirty.

        nsqd fans the selected channels out to a pool of goroutines; here the work
        is synchronous, so one pass does what the pool would.
        """
        opts = self.options
        while channels:
            num = min(opts.queue_scan_selection_count, len(channels))
            now = self.now()
            dirty = 0
            for channel in self.random.sample(channels, num):
                in_flight = channel.process_in_flight(now)
                deferred = channel.process_deferred(now)
                if in_flight or deferred:
                    dirty += 1
            if dirty / num <= opts.queue_scan_dirty_percent:
                return

    def close(self) -> None:
        """Shutdown: persist metadata, close every topic (they flush to their backends).

        Everything that can be persisted is, whatever fails on the way; then
        :class:`ShutdownError` lists what could not be (each failure was logged already).
        """
        self.exiting = True
        self._shutdown_failures = []
        self.persist_metadata()
        self._deadlines_to_save = []
        self.logger.info("NSQ: closing topics")
        for topic in list(self.topics.values()):
            topic.close()
        if self._syncer is not None:
            self._syncer.shutdown()  # every queue waited for its own: the thread is idle
        try:
            md.save_deferred(self.data_path, self._deadlines_to_save)
        except OSError as exc:
            self.logger.error("failed to save deferred deadlines - %s", exc)
            self._shutdown_failures.append(f"{md.DEFERRED_FILE_NAME} ({exc})")
        if self._shutdown_failures:
            failures, self._shutdown_failures = self._shutdown_failures, []
            raise ShutdownError(failures)
