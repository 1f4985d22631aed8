"""The test handle's journal: ``journey(id)``, ``events(...)`` and ``given_up(topic, channel)``
(issue #33; docs/journeys.md).

They read the box's nsqds' journals over HTTP (:mod:`nsqbox.client.journal`), in every mode
whose nsqds are nsqbox's (thread, subprocess, trio, and noproc against nsqbox). A node that
keeps no journal (real nsqd in noproc mode, or ``--journal-size=0``) raises
:class:`~nsqbox.client.journal.JournalUnsupported` ("not supported by this nsqd"); any other
node that cannot answer raises :class:`~nsqbox.client.journal.JournalError`: a test sees every
node or fails.

- ``journey(id, channel="")``: every event of message ``id`` (the 16 characters of its id,
  ``str`` or ``bytes`` as clients hand it out) on every nsqd, in broker-time order, each a
  dict as ``GET /nsqbox/journal`` lists it, with the ``node`` (its HTTP address);
- ``events(topic=..., channel=..., kind=..., id=..., client=..., since=..., until=...,
  node=None)``: the events that match, over every node (or nsqd ``node``), in the same form;
- ``given_up(topic, channel, attempts=0, node=None)``: the channel's messages clients gave up
  on (:class:`~nsqbox.client.journal.GivenUp`, with their bodies), newest first per node:
  the newest 1000 of each node (the route's most; a node keeps up to 10000).

The sync handle (:class:`JournalAccess`) has ``ajourney``, ``aevents`` and ``agiven_up`` for
asyncio and trio tests; the trio-native handle's are awaited (:class:`TrioJournalAccess`).
Both run the requests in a worker thread, so the test's loop (and a trio box's servers on
it) keeps running.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import httpx

from ..client.journal import GivenUp, given_up, merge_events, node_events
from .waiting import in_worker_thread

if TYPE_CHECKING:
    from .config import BoxAddresses

__all__ = ["JournalAccess", "TrioJournalAccess"]

Event = dict[str, Any]


def _id(msg_id: str | bytes) -> str:
    text = msg_id.decode("ascii", "replace") if isinstance(msg_id, bytes) else msg_id
    if len(text) != 16 or not text.isascii() or not text.isalnum():
        raise ValueError(f"{msg_id!r} is not a message id (16 characters)")
    return text


def _filters(
    topic: str,
    channel: str,
    kind: str | Iterable[str],
    msg_id: str | bytes,
    client: int,
    since: int,
    until: int,
) -> dict[str, str | int]:
    kinds = kind if isinstance(kind, str) else ",".join(kind)
    return {
        "topic": topic,
        "channel": channel,
        "kind": kinds,
        "id": _id(msg_id) if msg_id else "",
        "client": client,
        "since": since,
        "until": until,
    }


class _Reads:
    """The blocking reads, over the box's nsqds: the handles' methods, as they are (the sync
    handle's) or awaited (:func:`_awaited`)."""

    addresses: BoxAddresses
    timeout: float

    def _nodes(self, node: int | None) -> list[str]:
        nodes = [str(a) for a in self.addresses.nsqd_http]
        return nodes if node is None else [nodes[node]]

    def _client(self) -> httpx.Client:
        return httpx.Client(timeout=max(self.timeout, 10.0), trust_env=False)

    def _matching(self, filters: dict[str, str | int], node: int | None) -> list[Event]:
        with self._client() as client:
            per_node = [node_events(client, n, filters) for n in self._nodes(node)]
        return merge_events(per_node)

    def _journey(self, msg_id: str | bytes, *, channel: str = "") -> list[Event]:
        """Every event of message ``msg_id`` on every nsqd, in broker-time order."""
        return self._matching({"id": _id(msg_id), "channel": channel}, None)

    def _events(
        self,
        *,
        topic: str = "",
        channel: str = "",
        kind: str | Iterable[str] = "",
        id: str | bytes = "",
        client: int = 0,
        since: int = 0,
        until: int = 0,
        node: int | None = None,
    ) -> list[Event]:
        """The events that match (every given filter), over every nsqd (or nsqd ``node``),
        in broker-time order; ``kind`` is a kind or several, ``since`` and ``until`` broker
        wall times in ns, ``client`` a connection's id as ``/stats`` shows it."""
        return self._matching(_filters(topic, channel, kind, id, client, since, until), node)

    def _given_up(
        self, topic: str, channel: str, *, attempts: int = 0, node: int | None = None
    ) -> list[GivenUp]:
        """The messages of ``channel`` finished after earlier deliveries of them failed
        (at attempt ``attempts`` or later), newest first, with their bodies."""
        with self._client() as client:
            return [
                message
                for n in self._nodes(node)
                for message in given_up(client, n, topic, channel, attempts=attempts)
            ]


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _awaited(
    read: Callable[Concatenate[_Reads, _P], _T],
) -> Callable[Concatenate[_Reads, _P], Coroutine[Any, Any, _T]]:
    """``read``, awaited: it runs in a worker thread, so the test's loop (and a trio box's
    servers on it) keeps running. Same parameters and docstring, for the reference."""

    @functools.wraps(read)
    async def awaited(self: _Reads, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await in_worker_thread(lambda: read(self, *args, **kwargs))

    awaited.__doc__ = f"{read.__doc__} Awaited (the reads run in a worker thread)."
    return awaited


class JournalAccess(_Reads):
    """``journey``, ``events`` and ``given_up`` on the sync handle (a mixin of
    :class:`~.handle.NSQBox`), and their ``a``-twins for asyncio and trio tests."""

    journey = _Reads._journey
    events = _Reads._events
    given_up = _Reads._given_up
    ajourney = _awaited(_Reads._journey)
    aevents = _awaited(_Reads._events)
    agiven_up = _awaited(_Reads._given_up)


class TrioJournalAccess(_Reads):
    """``await journey(id)``, ``await events(...)``, ``await given_up(...)`` on the
    trio-native handle."""

    journey = _awaited(_Reads._journey)
    events = _awaited(_Reads._events)
    given_up = _awaited(_Reads._given_up)
