"""A topic: receives published messages and copies each one to every channel.

Until its first channel exists (or while paused, or before it is started) a
topic holds messages itself: memory queue first, then its backend. When it can
deliver, each message goes to every channel; the first channel gets the
original object and the others copies with the same id, as nsqd does.

A topic knows its node only as a :class:`~.node.Node` and reaches it otherwise
through the callbacks it was made with (as nsqd's ``NewTopic(name, nsqd,
deleteCallback)``): it imports its channels, not its node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ...wire.names import is_ephemeral
from .channel import Channel, ChannelError
from .journal_entries import Published
from .message import GUIDFactory, Message

if TYPE_CHECKING:
    from .backend import BackendQueue
    from .node import Node


class Publisher(Protocol):
    """Who published a batch (a TCP client, an HTTP request's peer), as a tap records it."""

    def publisher_fields(self) -> dict[str, str]:
        """``{"protocol": "tcp" or "http", ...}``: the client's ``client_id``, ``hostname``,
        ``user_agent`` and ``remote_address`` as far as it has them, each bounded."""
        ...


#: The longest a publisher's field is recorded (IDENTIFY and headers may say more).
MAX_PUBLISHER_FIELD = 256


def publisher_fields(protocol: str, **fields: str) -> dict[str, str]:
    """A publisher as taps record it: ``protocol`` and the non-empty ``fields``, each cut to
    :data:`MAX_PUBLISHER_FIELD` characters."""
    out = {"protocol": protocol}
    for name, value in fields.items():
        if value:
            out[name] = value[:MAX_PUBLISHER_FIELD]
    return out


class TopicTap(Protocol):
    """A ``Topic.taps`` entry: sees every batch as it is published, before fan-out."""

    def tapped(self, msgs: list[Message], publisher: Publisher | None) -> None:
        """Record ``msgs`` (their ``deadline`` holds a DPUB's delay until fan-out)."""
        ...


class TopicError(Exception):
    """A publish the topic refused (``exiting``, or the backend failed)."""

    #: Of a run of PUBs (:meth:`Topic.put_each`), how many were published before it.
    done = 0


class Topic:
    """One topic: its channels, its own queue, and its ID factory.

    ``notify`` is called with the topic when it is deleted and with each channel
    created or deleted (``exiting`` tells which); ``on_delete`` when the last
    channel of an ephemeral topic goes (the node then deletes the topic).
    """

    def __init__(
        self,
        name: str,
        node: Node,
        *,
        notify: Callable[[Topic | Channel], None],
        on_delete: Callable[[Topic], None],
    ) -> None:
        self.name = name
        self.node = node
        self._notify = notify
        self._on_delete = on_delete
        self.ephemeral = is_ephemeral(name)
        self.channels: dict[str, Channel] = {}
        self._channel_list: list[Channel] = []
        #: What the journal records a publish under: the topic, and the channels that take
        #: its messages straight into memory (None: the topic holds them).
        self._held_key: tuple[str, tuple[str, ...] | None] = (name, None)
        self._journal_key: tuple[str, tuple[str, ...] | None] = self._held_key
        self._journal = node.journal  # None: --journal-size=0
        self.memory: deque[Message] = deque()
        self.mem_limit = node.options.mem_queue_size
        self.backend: BackendQueue = node.new_backend(name, self.ephemeral)
        self.id_factory = GUIDFactory(node.options.node_id)
        self.paused = False
        self.started = False
        self.exiting = False
        self.message_count = 0
        self.message_bytes = 0
        #: Called with each message batch as published (the test plugin's capture tap,
        #: nsqbox's ``/nsqbox/tap`` routes).
        self.taps: list[TopicTap] = []

    def __repr__(self) -> str:
        return f"Topic({self.name})"

    def depth(self) -> int:
        """Messages held by the topic itself (not its channels)."""
        return len(self.memory) + self.backend.depth

    def backend_depth(self) -> int:
        """Messages held in the topic's backend."""
        return self.backend.depth

    @property
    def _delivering(self) -> bool:
        return self.started and not self.paused and bool(self._channel_list)

    # -- publishing ----------------------------------------------------------
    def put_message(self, body: bytes, defer: float = 0.0) -> None:
        """Publish one message (DPUB when ``defer`` > 0 seconds)."""
        self.put_messages([body], defer)

    def put_messages(
        self,
        bodies: list[bytes],
        defer: float = 0.0,
        now: float | None = None,
        publisher: Publisher | None = None,
        run: list[Message] | None = None,
        *,
        packed: bytes = b"",
        lined: bool = False,
    ) -> None:
        """Publish a batch: ids, one timestamp, fan-out or buffering. TopicError on failure.

        ``now`` is the node's clock if the caller has just read it (a connection reads
        it once per turn); ``publisher`` who published it, for the topic's taps; ``run``
        the journal's list of a run of PUBs (:meth:`put_each`) that this PUB is one of;
        ``packed`` an MPUB's bodies as sent, each after its size (``lined``: each line a
        body, a text /mpub's), if the caller has them (the journal reads their sizes there).
        """
        if self.exiting:
            raise TopicError("exiting")
        node = self.node
        fault = node.publish_fault
        if fault is not None and (error := fault(self.name)) is not None:
            raise TopicError(error)
        refs: Message | list[Message]  # what the journal refers to: a PUB's message alone
        if len(bodies) == 1:  # a PUB: its id without the lists of a batch's
            refs = self.id_factory.message(bodies[0], node.wall_ns())
            msgs = [refs]
            size = len(bodies[0])
        else:
            refs = msgs = self.id_factory.messages(bodies, node.wall_ns())
            size = sum(map(len, bodies))
        if defer:
            lease = (0, 0.0, defer)  # the delay rides in the deadline until fan-out
            for m in msgs:
                m.lease = lease
        if self.taps:
            for tap in self.taps:
                tap.tapped(msgs, publisher)
        channels = self._channel_list
        delivering = (  # _delivering, spelt out on the hot path, and nothing held before these
            channels
            and self.started
            and not self.paused
            and not self.memory
            and not self.backend.depth
        )
        if run:  # a later PUB of a run (journal on): the run's entry, the first's, holds it
            run.append(refs)  # type: ignore[arg-type]  # a PUB's message
        elif (journal := self._journal) is not None:  # one entry a run: the journal's cost
            key = self._journal_key if delivering and not defer else self._held_key
            if refs is msgs:  # an MPUB: the journal tells how to keep its messages
                journal.published(key, msgs, bodies, size, defer, packed, lined)
            else:  # a PUB's entry (a run's first: the run's list, which its next PUBs join)
                if run is not None:
                    run.append(msgs[0])
                    refs = run
                journal.open.append(Published(key, refs, defer, size, True))
            journal.open_bytes += size
        if delivering:
            if now is None:
                now = node.now()
            try:
                if defer:
                    self._fan_out(msgs, now)
                elif len(channels) == 1:
                    channels[0].put_batch(msgs, now)
                else:
                    self._put_batch(channels, msgs, now)
            except ChannelError as err:
                raise TopicError(str(err)) from None
        else:
            self._hold(msgs)
        self.message_count += len(msgs)
        self.message_bytes += size

    def put_each(
        self,
        bodies: list[bytes],
        defer: float,
        now: float,
        publisher: Publisher | None,
        nbytes: int = -1,
    ) -> int:
        """A run of PUBs (DPUBs, ``defer`` > 0) from one connection in one turn: each body
        its own message, published in order by :meth:`put_messages`, the journal's one
        entry for the run. ``nbytes``: the bodies' total size if the caller knows it (the
        journal's count of bytes, without a pass over them). Returns how many; a
        :class:`TopicError` stops the run, its ``done`` attribute saying how many were
        published before it."""
        put = self.put_messages
        # the run's list for the journal (a PUB alone is recorded as its message, no list)
        run: list[Message] | None = None if self._journal is None or len(bodies) == 1 else []
        done = 0
        try:
            for body in bodies:
                put([body], defer, now, publisher, run)
                done += 1
        except TopicError as err:
            err.done = done
            raise
        finally:
            if done > 1 and (journal := self._journal) is not None:  # the first counted its own
                if done < len(bodies) or nbytes < 0:
                    nbytes = sum(map(len, bodies[:done]))
                journal.open_bytes += nbytes - len(bodies[0])
        return done

    def _hold(self, msgs: list[Message]) -> None:
        room = self.mem_limit - len(self.memory)
        if self.mem_limit == 0 and (self.ephemeral or msgs[0].deadline):
            # nsqd: an unbuffered channel send only succeeds while the pump is
            # receiving; ephemeral and deferred messages never wait for disk.
            room = 0
        if room >= len(msgs):
            self.memory.extend(msgs)
            return
        if room > 0:
            self.memory.extend(msgs[:room])
            msgs = msgs[room:]
        if not self.node.write_to_backend(self.backend, msgs):
            raise TopicError(self.node.health_error or "failed to write message to backend")

    def _fan_out(self, msgs: list[Message], now: float) -> None:
        """Each message to every channel: deferred ones one by one, runs of others in batches."""
        channels = self._channel_list
        start = 0
        for i, msg in enumerate(msgs):
            delay = msg.deadline
            if not delay:
                continue
            if start < i:
                self._put_batch(channels, msgs[start:i], now)
            start = i + 1
            for c in channels[1:]:
                c.put_deferred(msg.copy(), delay, now)
            channels[0].put_deferred(msg, delay, now)
        if start < len(msgs):
            self._put_batch(channels, msgs[start:] if start else msgs, now)

    @staticmethod
    def _put_batch(channels: list[Channel], msgs: list[Message], now: float) -> None:
        for c in channels[1:]:
            c.put_batch([msg.copy() for msg in msgs], now)
        channels[0].put_batch(msgs, now)

    def pump(self) -> None:
        """Move held messages to the channels, if the topic can deliver."""
        if not self._delivering:
            return
        now = self.node.now()
        if self.memory:
            msgs = list(self.memory)
            self.memory.clear()
            self._fan_out_logged(msgs, now)
        backend = self.backend
        drained = False
        # Every pass reads at least one record or stops: a wrong depth cannot spin it.
        while backend.depth and self._delivering and not drained:
            batch: list[Message] = []
            for _ in range(1024):
                data = backend.pop()
                if data is None:
                    drained = True  # whatever depth says (the backend corrects it)
                    break
                try:
                    batch.append(Message.decode(data))
                except ValueError:
                    self.node.logger.error("TOPIC(%s): failed to decode message", self.name)
                if not backend.depth:
                    break
            if batch:
                self._fan_out_logged(batch, now)

    def _fan_out_logged(self, msgs: list[Message], now: float) -> None:
        if (journal := self.node.journal) is not None:
            journal.fanned_out(self.name, msgs, self._journal_key[1] or ())
        try:
            self._fan_out(msgs, now)
        except ChannelError as err:  # the publisher already had its OK: log, as nsqd does
            self.node.logger.error("TOPIC(%s): failed to put msg to channel - %s", self.name, err)

    def start(self) -> None:
        """Begin delivering to channels (nsqd starts a topic once its channels are known)."""
        if not self.started:
            self.started = True
            self.pump()

    # -- channels ------------------------------------------------------------
    def _channels_changed(self) -> None:
        """The channel list changed: what publishing and the journal read of it."""
        self._channel_list = channels = list(self.channels.values())
        self._journal_key = (self.name, tuple(self.channels))
        if self._journal is not None:  # the first channel's messages say what it sent
            for i, channel in enumerate(channels):
                channel.record_sent_from = 1 if i else 2

    def get_channel(self, name: str) -> Channel:
        """The channel, created if needed."""
        channel = self.channels.get(name)
        if channel is None:
            channel = Channel(
                self.name,
                name,
                self.node,
                notify=self._notify,
                on_delete=self._delete_channel,
            )
            self.channels[name] = channel
            self._channels_changed()
            self.node.logger.info("TOPIC(%s): new channel(%s)", self.name, name)
            self._notify(channel)
            self.pump()
        return channel

    def get_existing_channel(self, name: str) -> Channel | None:
        """The channel if it exists."""
        return self.channels.get(name)

    def delete_existing_channel(self, name: str) -> bool:
        """Delete a channel (its consumers are disconnected); False when absent."""
        channel = self.channels.get(name)
        if channel is None:
            return False
        self.node.logger.info("TOPIC(%s): deleting channel %s", self.name, name)
        channel.delete()
        self.channels.pop(name, None)
        self._channels_changed()
        if not self.channels and self.ephemeral:
            self._on_delete(self)
        return True

    def _delete_channel(self, channel: Channel) -> None:
        """An ephemeral channel lost its last consumer (nsqd's channel deleteCallback)."""
        self.delete_existing_channel(channel.name)

    # -- operations ----------------------------------------------------------
    def pause(self) -> None:
        """Hold messages at the topic."""
        self.paused = True
        self.node.persist_metadata()

    def unpause(self) -> None:
        """Resume delivering to channels."""
        self.paused = False
        self.node.persist_metadata()
        self.pump()

    def empty(self) -> None:
        """Drop the messages held by the topic itself."""
        if (journal := self.node.journal) is not None:
            why = "topic deleted" if self.exiting else "topic emptied"
            journal.dropped(self.name, "", [*self.memory], why, self.backend.depth)
        self.memory.clear()
        self.backend.empty()

    def delete(self) -> None:
        """Delete every channel and every message, and the backend's files."""
        if self.exiting:
            return
        self.exiting = True
        self._notify(self)
        for channel in list(self.channels.values()):
            channel.delete()
        self.channels.clear()
        self._channel_list = []
        self._journal_key = self._held_key
        self.empty()
        self.backend.delete()

    def close(self) -> None:
        """Shutdown: close channels (they persist), flush memory to the backend."""
        if self.exiting:
            return
        self.exiting = True
        for channel in self.channels.values():
            channel.close()
        msgs = [] if self.ephemeral else list(self.memory)
        self.memory.clear()
        self.node.flush_backend(self.name, self.backend, msgs)
