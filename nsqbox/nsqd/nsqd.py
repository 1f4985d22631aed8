"""The NSQD container: options, topics, clients, health, notifications, the queue scan."""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .backend import BackendQueue, DummyBackend
from .message import Message
from .options import NSQDOptions
from .topic import Topic

if TYPE_CHECKING:
    from .channel import Channel
    from .quantile import Quantile


class NSQD:
    """Everything one nsqd owns, independent of sockets.

    Transports (the TCP protocol, the HTTP API, lookupd registration) call into
    it; it never calls into them except through the notify callbacks.
    """

    def __init__(self, options: NSQDOptions, *, now: Callable[[], float] = time.monotonic) -> None:
        options.validate()
        self.options = options
        self.now = now
        self.logger = logging.getLogger("nsqbox.nsqd")
        self.start_time = time.time()
        self.hostname = socket.gethostname()
        self.topics: dict[str, Topic] = {}
        self.clients: dict[int, Any] = {}
        self.tcp_port = 0
        self.http_port = 0
        self.https_port = 0
        self.exiting = False
        self.loading = False
        self._health_error: str | None = None
        self._client_ids = 0
        self._notify_callbacks: list[Callable[[Topic | Channel], None]] = []
        #: Called with each topic created at runtime; lookupd support replaces it
        #: to pre-create channels known to lookupd before the topic starts.
        self.on_new_topic: Callable[[Topic], None] = Topic.start
        self.data_path = options.data_path or os.getcwd()

    # -- ids, health ---------------------------------------------------------
    def next_client_id(self) -> int:
        """A new client id (nsqd counts from 1)."""
        self._client_ids += 1
        return self._client_ids

    def set_health(self, error: str | None) -> None:
        """Record a backend failure (or its end, with None)."""
        self._health_error = error

    def is_healthy(self) -> bool:
        """False after a failed backend write, until one succeeds."""
        return self._health_error is None

    def get_health(self) -> str:
        """``OK`` or ``NOK - <error>``, as /ping and /stats report it."""
        if self._health_error is None:
            return "OK"
        return f"NOK - {self._health_error}"

    # -- topics --------------------------------------------------------------
    def get_topic(self, name: str) -> Topic:
        """The topic, created (and started) if needed."""
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        topic = Topic(name, self)
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
        self.persist_metadata()
        return True

    def channels(self) -> list[Channel]:
        """Every channel of every topic."""
        return [c for t in self.topics.values() for c in t.channels.values()]

    # -- notifications and persistence ----------------------------------------
    def add_notify_callback(self, callback: Callable[[Topic | Channel], None]) -> None:
        """Call ``callback(obj)`` whenever a topic or channel is created or deleted."""
        self._notify_callbacks.append(callback)

    def notify(self, obj: Topic | Channel) -> None:
        """A topic or channel was created or deleted (``obj.exiting`` tells which)."""
        for callback in self._notify_callbacks:
            callback(obj)
        if not self.loading and not obj.ephemeral:
            self.persist_metadata()

    def persist_metadata(self) -> None:
        """Write nsqd.dat (the durability layer installs the real writer)."""

    def save_deferred(self, channel: Channel, msgs: list[Message]) -> None:
        """Remember deferred deadlines across a restart (the durability layer installs it)."""

    # -- backends ------------------------------------------------------------
    def new_backend(self, name: str, ephemeral: bool) -> BackendQueue:
        """The spill queue for a topic (``name``) or channel (``topic:channel``)."""
        if ephemeral:
            return DummyBackend()
        return _MemoryBackend()

    def write_to_backend(self, backend: BackendQueue, msg: Message) -> bool:
        """Spill one message; on failure mark the node unhealthy and return False."""
        try:
            backend.put(msg.encode())
        except (OSError, ValueError) as exc:
            self.set_health(str(exc))
            self.logger.error("failed to write message to backend - %s", exc)
            return False
        if self._health_error is not None:
            self.set_health(None)
        return True

    def new_e2e_latency(self) -> Quantile | None:
        """A latency tracker when --e2e-processing-latency-percentile is set."""
        if not self.options.e2e_processing_latency_percentiles:
            return None
        from .quantile import Quantile

        return Quantile(
            self.options.e2e_processing_latency_window_time,
            self.options.e2e_processing_latency_percentiles,
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
            for channel in random.sample(channels, num):
                in_flight = channel.process_in_flight(now)
                deferred = channel.process_deferred(now)
                if in_flight or deferred:
                    dirty += 1
            if dirty / num <= opts.queue_scan_dirty_percent:
                return

    def close(self) -> None:
        """Shutdown: persist metadata, close every topic (they flush to their backends)."""
        self.exiting = True
        self.persist_metadata()
        for topic in list(self.topics.values()):
            topic.close()


class _MemoryBackend:
    """Stand-in spill queue until the disk queue is wired in: keeps records in memory."""

    def __init__(self) -> None:
        self._records: list[bytes] = []
        self._head = 0

    @property
    def depth(self) -> int:
        return len(self._records) - self._head

    def put(self, data: bytes) -> None:
        self._records.append(data)

    def read(self) -> bytes | None:
        if self._head >= len(self._records):
            return None
        data = self._records[self._head]
        self._head += 1
        if self._head > 1024 and self._head * 2 > len(self._records):
            del self._records[: self._head]
            self._head = 0
        return data

    def empty(self) -> None:
        self._records.clear()
        self._head = 0

    def delete(self) -> None:
        self.empty()

    def close(self) -> None:
        pass
