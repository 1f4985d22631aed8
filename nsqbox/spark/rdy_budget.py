"""One in-flight budget for all of a reader's connections: which RDY each one gets.

nsqd sends a connection messages while the connection holds fewer in flight
than its RDY count, so the messages a reader holds (read or still on the
wire) never exceed the sum over its connections of ``max(rdy, held)``: RDY
bounds what nsqd may still send, and a connection whose RDY was lowered keeps
what it holds until the reader answers it. :class:`RdyBudget` keeps that sum
within one total, whatever the number of nsqd nodes and connections:

- The total is split evenly over the connections (each at most its nsqd's
  ``max_rdy_count``), and re-split when connections come and go.
- Lowering a RDY is always allowed; raising one only takes what is free, so
  a connection that joins gets its share as the others' held messages are
  answered, never on top of them.
- A lowered RDY frees nothing by itself: nsqd may have sent up to the old RDY
  before it saw the new one, and those messages may still be on the wire,
  unread. The connection stays committed to what it was committed to when
  its RDY went down (:attr:`LinkRdy.draining`), less what the reader answers
  since, until a read finds its socket empty once nsqd has had ``settle``
  seconds to flush (:meth:`RdyBudget.idle`): nothing more is on the way.
- With fewer messages in the budget than connections, RDY 1 rotates (as
  go-nsq's redistribution does): a connection gives its RDY up after holding
  it ``rotate_after`` seconds when another one waits, and the longest-waiting
  connections get it next, so every nsqd is drained.

Pure: no I/O; the caller sends the RDY changes :meth:`RdyBudget.plan` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["LinkRdy", "RdyBudget"]

K = TypeVar("K", bound=Hashable)


@dataclass(eq=False)
class LinkRdy:
    """The RDY bookkeeping of one connection."""

    max_rdy: int
    #: The last RDY sent.
    rdy: int = 0
    #: Messages received on it and not yet answered (FIN or REQ).
    held: int = 0
    #: When RDY last went from 0 to positive or back (or it joined): how long it has
    #: held RDY, or waited for some.
    since: float = 0.0
    #: What nsqd may still have in flight on it from before RDY was last lowered:
    #: the commitment then, less the messages answered since (0: nothing pending).
    draining: int = 0
    #: When RDY was last lowered.
    lowered_at: float = 0.0

    @property
    def committed(self) -> int:
        """What this connection may hold at most until the reader answers or lowers RDY."""
        return max(self.rdy, self.held, self.draining)


class RdyBudget(Generic[K]):
    """RDY per connection so that everything held stays within ``total`` messages."""

    def __init__(
        self,
        total: int,
        *,
        clock: Callable[[], float],
        rotate_after: float,
        settle: float = 1.0,
    ) -> None:
        if total < 1:
            raise ValueError("the in-flight budget must be at least 1")
        self.total = total
        self.rotate_after = rotate_after
        #: How long after a RDY went down a read that finds nothing shows that
        #: nsqd has nothing more on the way (it flushes every output_buffer_timeout).
        self.settle = settle
        self._clock = clock
        self.links: dict[K, LinkRdy] = {}

    # -- connections and messages ------------------------------------------------------
    def add(self, key: K, max_rdy: int) -> None:
        """A connection subscribed (at RDY 0); the next :meth:`plan` gives it its share."""
        self.links[key] = LinkRdy(max_rdy=max(1, max_rdy), since=self._clock())

    def remove(self, key: K) -> None:
        """A connection closed: what it held and its RDY are free again."""
        self.links.pop(key, None)

    def received(self, key: K, count: int = 1) -> None:
        """``count`` messages arrived on ``key``."""
        link = self.links.get(key)
        if link is not None:
            link.held += count

    def answered(self, key: K, count: int = 1) -> None:
        """``count`` messages of ``key`` were FINished or REQ'd."""
        link = self.links.get(key)
        if link is not None:
            link.held = max(0, link.held - count)
            link.draining = max(0, link.draining - count)

    def idle(self, key: K) -> None:
        """A read on ``key`` found nothing: once ``settle`` has passed since its RDY went
        down, nothing nsqd sent under the old RDY is still on the way.
        """
        link = self.links.get(key)
        if link is not None and link.draining and self._clock() - link.lowered_at >= self.settle:
            link.draining = 0

    @property
    def committed(self) -> int:
        """The most messages the connections may hold now: never above :attr:`total`."""
        return sum(link.committed for link in self.links.values())

    # -- planning -------------------------------------------------------------------------
    def _targets(self) -> dict[K, int]:
        links = self.links
        if self.total >= len(links):
            share, extra = divmod(self.total, len(links))
            return {
                key: min(share + (1 if index < extra else 0), link.max_rdy)
                for index, (key, link) in enumerate(links.items())
            }
        # Fewer messages than connections: RDY 1 takes turns.
        now = self._clock()
        waiting = sorted(
            (key for key, link in links.items() if link.rdy == 0),
            key=lambda key: links[key].since,
        )
        targets = dict.fromkeys(links, 0)
        keep = [
            key
            for key, link in links.items()
            if link.rdy > 0 and (not waiting or now - link.since < self.rotate_after)
        ]
        for key in keep[: self.total]:
            targets[key] = 1
        for key in waiting[: self.total - min(len(keep), self.total)]:
            targets[key] = 1
        return targets

    def plan(self) -> dict[K, int]:
        """The RDY changes to send now, ``{key: count}``; lowers first, then raises what fits."""
        if not self.links:
            return {}
        targets = self._targets()
        changes: dict[K, int] = {}
        now = self._clock()
        for key, target in targets.items():
            link = self.links[key]
            if target < link.rdy:
                if target == 0:
                    link.since = now
                link.draining = link.committed
                link.lowered_at = now
                link.rdy = target
                changes[key] = target
        free = self.total - self.committed
        for key, target in targets.items():
            link = self.links[key]
            if target <= link.rdy or free <= 0:
                continue
            # Raising RDY from r to t commits max(t, held) - max(r, held) more messages.
            new = min(target, max(link.rdy, link.held) + free)
            if new <= link.rdy:
                continue
            free -= max(new, link.held) - link.committed
            if link.rdy == 0:
                link.since = now
            link.rdy = new
            changes[key] = new
        return changes
