"""nsqbox's step replay: publish a recording as the manual broker clock reaches it (issue #34).

Not part of NSQ. ``nsqbox replay FILE --step`` (and the test handle's ``replay(..., step=True)``)
uploads a snapshot file as ``nsqbox snapshot load`` does (``POST /nsqbox/snapshot/upload``) and
hands it to this node, which publishes each of its message lines, in the file's order, when
broker time reaches the message's recorded offset from the first (its ``timestamp`` minus the
first's, divided by ``speed``), counted from when the replay started. A :class:`StepReplay` is
one more :class:`~nsqbox.broker.clock.TimerNode` of the box's clock: an advance steps to each
message's time as it steps to a deferred message's deadline, publishes it there (its broker
timestamp is that time), and returns once every message due inside the span was published and
handed to the consumers. Nothing follows wall time: a replay whose clock is never moved
publishes only its messages at offset 0, at once.

- ``POST /nsqbox/replay/step?id=U&topic=T[&channel=C][&speed=F]``: upload ``U``, checked whole
  first (a bad file is ``400 {"message": "INVALID_SNAPSHOT", "line", "reason"}``, as a load,
  and publishes nothing; a body over ``--max-msg-size`` or a ``delay_ms`` over
  ``--max-req-timeout`` is refused the same way, naming its line), then replayed into topic
  ``T`` (created as ``/pub`` creates it), or into its channel ``C`` only (as
  ``/nsqbox/channel/mpub``). Answers ``{"id", "messages", "published"}``: the replay, the
  file's messages and those published at once. ``409 CLOCK_NOT_MANUAL`` on a real-time clock.
- ``GET /nsqbox/replay/step``: ``{"replays": [{"id", "topic", "channel", "messages",
  "published", "next_in"}]}`` (``next_in``: broker seconds until the next message is due).
- ``DELETE /nsqbox/replay/step?id=U``: stop it (``404 REPLAY_NOT_FOUND``).

A replay ends when its last message is published, when its topic or channel is deleted (a test's
cleanup deletes it) or the node stops. The file is kept in the data path while it runs
(``nsqbox.replay.<id>.jsonl``, read one line at a time: memory does not grow with it) and
removed then. At most :data:`MAX_STEP_REPLAYS` run on a node at once (``503 TOO_MANY_REPLAYS``).
Like every ``/nsqbox/`` route, guarded by the Host allowlist and the same-origin check, and off
(``404``) under ``--auth-http-address``: it publishes without the authorization ``PUB`` needs.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final

from ...http import HTTPError, Request, Response, Router
from ...snapshot.speed import MAX_SPEED, MIN_SPEED, STEP_PATH
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..domain.channel import Channel, ChannelError
from ..domain.clock import delivered_at
from ..domain.topic import Topic, TopicError

if TYPE_CHECKING:
    from ...snapshot.format import MessageLine
    from ..domain.nsqd import NSQD

__all__ = ["MAX_STEP_REPLAYS", "StepReplay", "add_step_replay_routes"]

#: The most step replays one node runs at once.
MAX_STEP_REPLAYS: Final = 16
_UPLOAD: Final = "nsqbox.snapshot.{}.upload"
_FILE: Final = "nsqbox.replay.{}.jsonl"


def _file_messages(path: str) -> Generator[MessageLine, None, None]:
    from ...snapshot.files import SnapshotReader, open_for_reading
    from ...snapshot.format import MessageLine

    with open_for_reading(path) as stream:
        for record in SnapshotReader(stream):
            if type(record) is MessageLine:
                yield record


def check_replay_file(path: str, max_msg_size: int, max_delay: float) -> int:
    """Read the whole file strictly; its message count. SnapshotError (with the line) for a
    bad file, a body over ``max_msg_size`` or a delay over ``max_delay`` seconds."""
    from ...snapshot.files import SnapshotReader, open_for_reading
    from ...snapshot.format import MessageLine, SnapshotError, message_body

    with open_for_reading(path) as stream:
        reader = SnapshotReader(stream)
        count = 0
        for record in reader:
            if type(record) is not MessageLine:
                continue
            count += 1
            if len(message_body(record)) > max_msg_size:
                raise SnapshotError(reader.line, f"a body over --max-msg-size ({max_msg_size})")
            if record.delay_ms / 1000 > max_delay:
                raise SnapshotError(reader.line, f"delay_ms over --max-req-timeout ({max_delay}s)")
        return count


class StepReplay:
    """One file replayed into ``topic`` (or ``channel`` of it) under the broker clock: a
    :class:`~nsqbox.broker.clock.TimerNode` (module doc)."""

    def __init__(
        self,
        nsqd: NSQD,
        replay_id: str,
        path: str,
        topic: Topic,
        channel: Channel | None,
        speed: float,
        messages: int,
    ) -> None:
        from ...snapshot.format import message_body

        self._body_of = message_body
        self.nsqd = nsqd
        self.id = replay_id
        self.path = path
        self.topic = topic
        self.channel = channel
        self.speed = speed
        self.messages = messages
        self.published = 0
        self.done = False
        self._lines = _file_messages(path)
        self._next = next(self._lines, None)
        self._first = 0 if self._next is None else self._next.timestamp
        self._start = nsqd.now()

    def _due(self, record: MessageLine) -> float:
        return self._start + max(0, record.timestamp - self._first) / 1e9 / self.speed

    def describe(self) -> dict[str, Any]:
        """The replay as ``GET /nsqbox/replay/step`` lists it."""
        record = self._next
        next_in = None if record is None else max(0.0, self._due(record) - self.nsqd.now())
        return {
            "id": self.id,
            "topic": self.topic.name,
            "channel": self.channel.name if self.channel is not None else "",
            "messages": self.messages,
            "published": self.published,
            "next_in": next_in,
        }

    def next_due(self) -> tuple[float, float] | None:
        """When the next message is due (it is published exactly then), None when done."""
        if self.done or self._next is None:
            return None
        due = self._due(self._next)
        return due, due

    def fire(self, now: float, resume: float | None = None) -> int:
        """Publish every message due by ``now``, in order; how many. With ``resume`` (the end
        of the advance), what this delivered to consumers is in flight from then on, as the
        node's own timers treat deliveries inside a jump."""
        published = 0
        while not self.done and self._next is not None and self._due(self._next) <= now:
            record = self._next
            if not self._publish(record, now):
                self.finish()
                break
            published += 1
            self._next = next(self._lines, None)
        self.published += published
        if published and resume is not None and resume != now:
            channel = self.channel
            for each in [channel] if channel is not None else list(self.topic.channels.values()):
                delivered_at(each.in_flight, now, resume)
        if self._next is None:
            self.finish()
        return published

    def _publish(self, record: MessageLine, now: float) -> bool:
        """Publish one message at broker time ``now``; False when its topic or channel (or
        the node) is gone, which ends the replay."""
        body = self._body_of(record)
        delay = record.delay_ms / 1000
        channel = self.channel
        if self.nsqd.exiting or self.topic.exiting:
            return False
        try:
            if channel is None:
                self.topic.put_messages([body], delay, now)
                return True
            if channel.exiting:
                return False
            msg = self.topic.id_factory.message(body, self.nsqd.wall_ns())
            if delay:
                channel.put_deferred(msg, delay, now)
            else:
                channel.put_batch([msg], now)
        except (TopicError, ChannelError):
            return False
        return True

    async def settle(self) -> None:
        """Leave the clock once done (the clock iterates a copy of its nodes here)."""
        if self.done:
            self.nsqd.clock.detach(self)

    def finish(self) -> None:
        """End the replay: close and remove its file (the clock lets go at :meth:`settle`)."""
        if self.done:
            return
        self.done = True
        self._next = None
        self._lines.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def running(nsqd: NSQD) -> list[StepReplay]:
    """The step replays running on ``nsqd``: the clock's nodes are where they live."""
    return [
        node
        for node in nsqd.clock.nodes
        if isinstance(node, StepReplay) and node.nsqd is nsqd and not node.done
    ]


def _remove_stale(nsqd: NSQD, live: list[StepReplay]) -> None:
    """Remove replay files no running replay reads (a crash, or a stopped node, left them)."""
    keep = {r.path for r in live}
    for path in glob.glob(os.path.join(glob.escape(nsqd.data_path), _FILE.format("*"))):
        if path not in keep:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _existing_upload(nsqd: NSQD, upload_id: str) -> str:
    path = os.path.join(nsqd.data_path, _UPLOAD.format(upload_id))
    if not os.path.exists(path):
        raise HTTPError(404, "SNAPSHOT_NOT_FOUND")
    return path


def _arg(request: Request, name: str) -> str:
    value = (request.args().get(name) or [""])[0]
    if not value:
        raise HTTPError(400, f"MISSING_ARG_{name.upper()}")
    return value


def _speed(request: Request) -> float:
    raw = (request.args().get("speed") or ["1"])[0]
    try:
        speed = float(raw) if len(raw) <= 32 else float("nan")
    except ValueError:
        raise HTTPError(400, "INVALID_SPEED") from None
    if not MIN_SPEED <= speed <= MAX_SPEED:  # NaN too
        raise HTTPError(400, "INVALID_SPEED")
    return speed


def add_step_replay_routes(router: Router, nsqd: NSQD) -> None:
    """Add ``/nsqbox/replay/step`` (module doc) for ``nsqd`` to its HTTP router."""

    async def start(request: Request) -> Response:
        import trio

        upload_id = _arg(request, "id")
        if len(upload_id) != 32 or not all(c in "0123456789abcdef" for c in upload_id):
            raise HTTPError(400, "INVALID_ID")
        topic_name = _arg(request, "topic")
        if not is_valid_topic_name(topic_name):
            raise HTTPError(400, "INVALID_TOPIC")
        channel_name = (request.args().get("channel") or [""])[0]
        if channel_name and not is_valid_channel_name(channel_name):
            raise HTTPError(400, "INVALID_CHANNEL")
        speed = _speed(request)
        upload = _existing_upload(nsqd, upload_id)
        path = os.path.join(nsqd.data_path, _FILE.format(upload_id))
        try:
            if not nsqd.clock.manual:
                raise HTTPError(409, "CLOCK_NOT_MANUAL")
            live = running(nsqd)
            if len(live) >= MAX_STEP_REPLAYS:
                raise HTTPError(503, "TOO_MANY_REPLAYS")
            _remove_stale(nsqd, live)
            os.replace(upload, path)  # its own name: the next upload removes older uploads
            opts = nsqd.options
            from ...snapshot.format import SnapshotError

            try:  # the whole file first, off the loop: a bad one publishes nothing
                messages = await trio.to_thread.run_sync(
                    check_replay_file, path, opts.max_msg_size, opts.max_req_timeout
                )
            except SnapshotError as exc:
                os.unlink(path)
                body = {"message": "INVALID_SNAPSHOT", "line": exc.line, "reason": exc.reason}
                return Response.json(body, 400)
            if nsqd.exiting:
                raise HTTPError(503, "EXITING")
            topic = nsqd.get_topic(topic_name)
            channel = topic.get_channel(channel_name) if channel_name else None
            replay = StepReplay(nsqd, upload_id, path, topic, channel, speed, messages)
        except BaseException:
            for leftover in (upload, path):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
            raise
        published = replay.fire(nsqd.now())  # what is due at offset 0 goes now
        if not replay.done:
            nsqd.clock.attach(replay)
        return Response.json({"id": replay.id, "messages": messages, "published": published})

    async def listing(request: Request) -> dict[str, object]:
        return {"replays": [r.describe() for r in running(nsqd)]}

    async def stop(request: Request) -> None:
        replay_id = _arg(request, "id")
        for replay in running(nsqd):
            if replay.id == replay_id:
                replay.finish()
                nsqd.clock.detach(replay)
                return
        raise HTTPError(404, "REPLAY_NOT_FOUND")

    router.add("POST", STEP_PATH, start)
    router.add("GET", STEP_PATH, listing)
    router.add("DELETE", STEP_PATH, stop)
