"""A channel: a queue of messages shared by the consumers subscribed to it.

Messages move: topic -> :meth:`Channel.put` -> straight to a ready consumer if
there is one (round robin), else the memory queue, else the backend. Consumers
that become ready (RDY, FIN, REQ, timeouts) pull from the queues through
:meth:`Channel.client_ready`. Every step is O(1) and synchronous: no task switch
per message.

A channel knows its node only as a :class:`~.node.Node` and its topic only through
the callbacks it was made with (as nsqd's ``NewChannel(topic, name, nsqd,
deleteCallback)``): it imports neither.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ...wire.message import MESSAGE_FRAME_HEADER
from ...wire.names import is_ephemeral
from .message import Message
from .timeout_queue import TimeoutQueue

if TYPE_CHECKING:
    from .backend import BackendQueue
    from .node import Node
    from .quantile import Quantile


class ChannelError(Exception):
    """A FIN/REQ/TOUCH/SUB that the channel refused (nsqd's error text in ``str()``)."""


class Consumer(Protocol):
    """What a channel needs from a subscribed client (the TCP edge's ClientState implements it).

    ``in_flight_count`` is the channel's to write: the in-flight queue is the one book of
    what is in flight, and this is its tally for one consumer, kept by the channel beside
    each change to the queue (delivery, FIN, REQ, timeout, empty), never by the consumer.
    """

    id: int
    ready_count: int
    #: This consumer's messages in the channel's in-flight queue (written by the channel).
    in_flight_count: int
    sample_rate: int
    msg_timeout: float
    in_ring: bool

    def can_take(self) -> bool:
        """Subscribed, not closing, in_flight_count < ready_count, output buffer not full."""
        ...

    def out_room(self) -> int:
        """Bytes its output buffer may still take."""
        ...

    def send_message(self, msg: Message) -> None:
        """Append the message frame to the output buffer (the channel counted it in flight)."""
        ...

    def send_messages(self, msgs: list[Message]) -> None:
        """Append several message frames (the channel counted them in flight)."""
        ...

    def close(self) -> None:
        """Disconnect it (its channel or topic is being deleted)."""
        ...


class Channel:
    """One channel of a topic. See the module docstring for the message path.

    ``notify`` is called with the channel once it is deleted (``exiting`` is then
    True); ``on_delete`` when the last consumer of an ephemeral channel leaves (the
    topic then deletes it).
    """

    def __init__(
        self,
        topic_name: str,
        name: str,
        node: Node,
        *,
        notify: Callable[[Channel], None],
        on_delete: Callable[[Channel], None],
    ) -> None:
        self.topic_name = topic_name
        self.name = name
        self.node = node
        self._notify = notify
        self._on_delete = on_delete
        self.ephemeral = is_ephemeral(name)
        self.memory: deque[Message] = deque()
        self.mem_limit = node.options.mem_queue_size
        self.backend: BackendQueue = node.new_backend(f"{topic_name}:{name}", self.ephemeral)
        self.in_flight = TimeoutQueue()
        self.deferred = TimeoutQueue()
        self.clients: dict[int, Consumer] = {}
        self._ring: deque[Consumer] = deque()
        self.paused = False
        self.exiting = False
        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.e2e_latency: Quantile | None = node.new_e2e_latency()
        #: Deadlines (wall-clock ns by id) of deferred messages flushed to disk at the last
        #: shutdown; they wait out their delay when read back.
        self.restored_deadlines = node.restored_deadlines(topic_name, name)
        self.journal = node.journal  # None: --journal-size=0
        #: The fewest messages of a :meth:`put_batch` whose sends on at once the journal
        #: records: 1, or 2 for the topic's first channel (a PUB's message, given to it
        #: itself, says it was sent: the journal reads it back), none without a journal.
        self.record_sent_from = 1 << 62

    def __repr__(self) -> str:
        return f"Channel({self.topic_name}:{self.name})"

    # -- stats ---------------------------------------------------------------
    def depth(self) -> int:
        """Messages waiting (memory + backend), not counting in-flight or deferred."""
        return len(self.memory) + self.backend.depth

    def backend_depth(self) -> int:
        """Messages waiting in the backend."""
        return self.backend.depth

    def in_flight_count(self) -> int:
        """Messages delivered and not yet finished, requeued or timed out."""
        return len(self.in_flight)

    def deferred_count(self) -> int:
        """Messages waiting for their deferral to end."""
        return len(self.deferred)

    # -- the message path ----------------------------------------------------
    def put(self, msg: Message, now: float) -> None:
        """A new message from the topic (counted in message_count)."""
        self.message_count += 1
        self._put(msg, now)

    def put_batch(self, msgs: list[Message], now: float) -> None:
        """New messages from the topic, in order: as many :meth:`put` calls, in one pass.

        Each goes to the next ready consumer while there is one (as :meth:`put`);
        the rest are queued with one ``extend`` instead of one call each.
        """
        self.message_count += len(msgs)
        if self._ring and not self.paused:
            dispatch = self._dispatch
            for i, msg in enumerate(msgs):
                if not dispatch(msg, now):  # no consumer is ready: neither for the rest
                    if len(msgs) >= self.record_sent_from and i and self.journal is not None:
                        self.journal.sent(self.topic_name, self.name, msgs[:i])
                    msgs = msgs[i:]
                    break
            else:
                if len(msgs) >= self.record_sent_from and self.journal is not None:
                    self.journal.sent(self.topic_name, self.name, msgs)
                return
        memory = self.memory
        room = self.mem_limit - len(memory)
        if room >= len(msgs):
            memory.extend(msgs)
            return
        if room > 0:
            memory.extend(msgs[:room])
            msgs = msgs[room:]
        if (journal := self.journal) is not None:
            journal.queued_on_disk(self.topic_name, self.name, msgs, now)
        if not self.node.write_to_backend(self.backend, msgs):
            raise ChannelError(self.node.health_error or "failed to write message to backend")

    def put_deferred(self, msg: Message, delay: float, now: float) -> None:
        """A new DPUB message: held for ``delay`` seconds, then queued."""
        self.message_count += 1
        self.deferred.add(msg.data[:16], msg, now + delay)
        if (journal := self.journal) is not None:
            journal.deferred(self.topic_name, self.name, msg, delay, now)

    def _put(self, msg: Message, now: float) -> None:
        lease = msg.lease
        if self._ring and not self.paused and self._dispatch(msg, now):
            if self.journal is not None and msg.lease is not lease:  # not sampled out
                self.journal.sent(self.topic_name, self.name, [msg])
            return
        if len(self.memory) < self.mem_limit:
            self.memory.append(msg)
        elif not self.node.write_to_backend(self.backend, [msg]):
            raise ChannelError(self.node.health_error or "failed to write message to backend")

    def _dispatch(self, msg: Message, now: float) -> bool:
        """Hand ``msg`` to the next ready consumer; False when none is ready."""
        ring = self._ring
        while ring:
            client = ring.popleft()
            if not client.can_take():
                client.in_ring = False
                continue
            if client.sample_rate and self.node.random.randrange(100) > client.sample_rate:
                # nsqd's messagePump takes the message and drops it when not sampled
                ring.append(client)
                return True
            msg.attempts = (msg.attempts + 1) & 0xFFFF  # a uint16, wrapping as nsqd's does
            msg.lease = lease = (client.id, now, now + client.msg_timeout)
            self.in_flight.add(msg.data[:16], msg, lease[2])
            client.in_flight_count += 1
            client.send_message(msg)
            if client.can_take():
                ring.append(client)
            else:
                client.in_ring = False
            return True
        return False

    def pump(self, now: float) -> None:
        """Deliver queued messages (memory, then backend) to ready consumers.

        Each ready consumer takes as many as its RDY allows in one batch; consumers
        that sample go one message at a time.
        """
        if self.paused:
            return
        memory = self.memory
        backend = self.backend
        ring = self._ring
        frame_header = MESSAGE_FRAME_HEADER.size  # what a delivery adds to id + body
        while ring and (memory or backend.depth):
            client = ring[0]
            if not client.can_take():
                ring.popleft()
                client.in_ring = False
                continue
            room = client.ready_count - client.in_flight_count
            if client.sample_rate:
                room = 1
            out_room = start_room = client.out_room()  # bytes: a batch never overfills
            batch: list[Message] = []
            if memory:
                while memory and len(batch) < room and out_room > 0:
                    msg = memory.popleft()
                    out_room -= len(msg.data) + frame_header
                    batch.append(msg)
            else:
                # can_take() means room > 0 and out_room > 0: the loop reads at least once.
                drained = False
                while len(batch) < room and out_room > 0 and backend.depth:
                    data = backend.pop()
                    if data is None:
                        # depth said more: the backend has corrected it (to 0). Stop here
                        # whatever it says, so a wrong depth can never spin this loop.
                        drained = True
                        break
                    stored = self._stored_message(data, now)
                    if stored is not None:
                        out_room -= len(stored.data) + frame_header
                        batch.append(stored)
                if not batch:
                    if drained:
                        return
                    continue  # records were read (deferred again or undecodable): progress
            if client.sample_rate:  # one at a time: _dispatch samples and rotates the ring
                if not self._dispatch(batch[0], now):
                    memory.appendleft(batch[0])
                    return
                continue
            self._deliver(client, batch, now, start_room - out_room)
            if client.can_take():
                ring.rotate(-1)
            else:
                ring.popleft()
                client.in_ring = False

    def _deliver(self, client: Consumer, batch: list[Message], now: float, sent: int) -> None:
        """Hand ``batch`` (no more than its RDY allows, ``sent`` bytes as frames) to
        ``client`` in one tight loop."""
        for msg in batch:
            msg.attempts = (msg.attempts + 1) & 0xFFFF  # a uint16, wrapping as nsqd's does
        lease = (client.id, now, now + client.msg_timeout)
        self.in_flight.add_batch(batch, lease)
        client.in_flight_count += len(batch)
        client.send_messages(batch)
        if (journal := self.journal) is not None:
            nbytes = (MESSAGE_FRAME_HEADER.size * -len(batch)) + sent
            journal.delivered(self.topic_name, self.name, client, lease, batch, nbytes)

    def _stored_message(self, data: bytes, now: float) -> Message | None:
        """A record read from the backend, unless undecodable or deferred again."""
        try:
            msg = Message.decode(data)
        except ValueError:
            self.node.logger.error("CHANNEL(%s): failed to decode message", self.name)
            return None
        if self.restored_deadlines:
            deadline = self.restored_deadlines.pop(msg.id, None)
            if deadline is not None:
                delay = (deadline - self.node.wall_ns()) / 1e9
                if delay > 0:
                    self.deferred.add(msg.id, msg, now + delay)
                    return None
        return msg

    def client_ready(self, client: Consumer, now: float) -> None:
        """``client`` may take more messages now: enter the ring and pull."""
        if client.in_ring or not client.can_take():
            return
        client.in_ring = True
        self._ring.append(client)
        if not self.paused and (self.memory or self.backend.depth):
            self.pump(now)

    # -- FIN, REQ, TOUCH -----------------------------------------------------
    def _pop_in_flight(self, client_id: int, msg_id: bytes) -> Message:
        msg = self.in_flight.get(msg_id)
        if msg is None:
            raise ChannelError("ID not in flight")
        if msg.client_id != client_id:
            raise ChannelError("client does not own message")
        self.in_flight.remove(msg_id, msg)
        return msg

    def finish_messages(
        self, client: Consumer, msg_ids: list[bytes], now: float | None = None
    ) -> list[tuple[bytes, str]]:
        """FIN each, in one pass over the in-flight messages; the ids that failed, each
        with why, in order. ``now``: the node's clock if the caller has just read it."""
        taken, refused = self.in_flight.take(msg_ids, client.id)
        client.in_flight_count -= len(taken)
        if (journal := self.journal) is not None and taken:
            if now is None:
                now = self.node.now()
            journal.finished(self.topic_name, self.name, client.id, msg_ids, taken, now)
        if self.e2e_latency is not None:
            for msg in taken:
                self.e2e_latency.insert(msg.timestamp)
        return [
            (msg_id, "ID not in flight" if msg is None else "client does not own message")
            for msg_id, msg in refused
        ]

    def requeue_message(self, client: Consumer, msg_id: bytes, delay: float, now: float) -> None:
        """REQ: queue the message again, now (``delay == 0``) or after ``delay`` seconds."""
        msg = self._pop_in_flight(client.id, msg_id)
        client.in_flight_count -= 1
        self.requeue_count += 1
        if (journal := self.journal) is not None:
            journal.requeued(self.topic_name, self.name, msg, client.id, delay, now)
        if delay == 0:
            if self.exiting:
                raise ChannelError("exiting")
            self._put(msg, now)
        else:
            self.deferred.add(msg_id, msg, now + delay)

    def touch_message(
        self, client: Consumer, msg_id: bytes, msg_timeout: float, now: float
    ) -> None:
        """TOUCH: restart the message's timeout, capped at delivery + max-msg-timeout (it
        stays in flight: the in-flight count does not move)."""
        msg = self._pop_in_flight(client.id, msg_id)
        before = msg.lease
        deadline = now + msg_timeout
        max_msg_timeout = self.node.options.max_msg_timeout
        if deadline - msg.delivery_ts >= max_msg_timeout:
            deadline = msg.delivery_ts + max_msg_timeout
        self.in_flight.add(msg_id, msg, deadline)
        if (journal := self.journal) is not None:
            journal.touched(self.topic_name, self.name, msg, client.id, now, before)

    # -- periodic scan -------------------------------------------------------
    def process_in_flight(self, now: float, *, cutoff: float | None = None) -> bool:
        """Requeue timed-out messages; True when any did (the channel was dirty).

        ``cutoff`` times out what is due by then instead of by ``now`` (a fault
        that times everything out at once).
        """
        if self.exiting:
            return False
        expired = self.in_flight.pop_expired(now if cutoff is None else cutoff)
        if expired and (journal := self.journal) is not None:
            journal.timed_out(self.topic_name, self.name, expired, now)
        for msg in expired:
            self.timeout_count += 1
            client = self.clients.get(msg.client_id)
            if client is not None:
                client.in_flight_count -= 1
            self._put_logged(msg, now)
        for msg in expired:
            client = self.clients.get(msg.client_id)
            if client is not None:
                self.client_ready(client, now)
        return bool(expired)

    def process_deferred(self, now: float) -> bool:
        """Queue messages whose deferral ended; True when any did."""
        if self.exiting:
            return False
        expired = self.deferred.pop_expired(now)
        if expired and (journal := self.journal) is not None:
            journal.due(self.topic_name, self.name, expired, now)
        for msg in expired:
            self._put_logged(msg, now)
        return bool(expired)

    def _put_logged(self, msg: Message, now: float) -> None:
        try:
            self._put(msg, now)
        except ChannelError as err:  # nobody to tell but the log (and /ping's health)
            self.node.logger.error("CHANNEL(%s): failed to requeue message - %s", self.name, err)

    # -- consumers -----------------------------------------------------------
    def add_client(self, client: Consumer) -> None:
        """SUB: ChannelError when exiting or at --max-channel-consumers."""
        if self.exiting:
            raise ChannelError("exiting")
        if client.id in self.clients:
            return
        limit = self.node.options.max_channel_consumers
        if limit and len(self.clients) >= limit:
            raise ChannelError(
                f"consumers for {self.topic_name}:{self.name} exceeds limit of {limit}"
            )
        self.clients[client.id] = client
        if self.journal is not None:
            self.journal.seen(client)  # who it is, once: its deliveries only name its id

    def remove_client(self, client: Consumer) -> None:
        """A consumer left; an ephemeral channel goes with its last consumer."""
        if self.exiting or self.clients.pop(client.id, None) is None:
            return
        if client.in_ring:
            self._ring.remove(client)
            client.in_ring = False
        if not self.clients and self.ephemeral:
            self._on_delete(self)

    # -- operations ----------------------------------------------------------
    def pause(self) -> None:
        """Stop delivering to consumers (messages keep queueing)."""
        self.paused = True
        self.node.persist_metadata()

    def unpause(self) -> None:
        """Resume delivery."""
        self.paused = False
        self.node.persist_metadata()
        now = self.node.now()
        for client in list(self.clients.values()):
            self.client_ready(client, now)
        self.pump(now)

    def empty(self) -> None:
        """Drop every queued, in-flight and deferred message."""
        held = self.in_flight.clear() + self.deferred.clear()
        if (journal := self.journal) is not None:
            why = "channel deleted" if self.exiting else "channel emptied"
            journal.dropped(
                self.topic_name, self.name, [*held, *self.memory], why, self.backend.depth
            )
        self.memory.clear()
        self.backend.empty()
        now = self.node.now()
        for client in list(self.clients.values()):
            client.in_flight_count = 0  # the in-flight queue was cleared
            self.client_ready(client, now)

    def close_clients(self) -> None:
        """Disconnect every consumer."""
        for client in list(self.clients.values()):
            client.close()

    def delete(self) -> None:
        """Disconnect consumers, drop every message and the backend's files."""
        if self.exiting:
            return
        self.exiting = True
        self.close_clients()
        self.empty()
        self.backend.delete()
        self._notify(self)

    def close(self) -> None:
        """Shutdown: disconnect consumers, flush memory, in-flight and deferred to the backend."""
        if self.exiting:
            return
        self.exiting = True
        self.close_clients()
        msgs: list[Message] = []
        if not self.ephemeral:
            msgs.extend(self.memory)
            msgs.extend(self.in_flight.clear())
            deferred = self.deferred.clear()
            self.node.save_deferred(self.topic_name, self.name, deferred, self.restored_deadlines)
            msgs.extend(deferred)
            self.memory.clear()
        self.node.flush_backend(f"{self.topic_name}:{self.name}", self.backend, msgs)
