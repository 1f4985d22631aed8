"""Admin actions fanned out to the right lookupds and nsqds, as nsqadmin does them.

Every action first finds the nsqds it concerns (the topic's producers, by the lookupds' ``/lookup``
or among the configured nsqds), then POSTs to each in turn, and reports the hosts that failed
instead of stopping at the first: the result is the tuple of :class:`UpstreamError` (empty when
everything worked). :class:`ClusterError` is raised only when the nsqds to act on could not be
found at all.

=====================  ===========================================================================
action                 requests (NSQ v1.3.0 nsqadmin)
=====================  ===========================================================================
create topic/channel   lookupds: ``/topic/create`` (and ``/channel/create``); the topic's nsqds:
                       ``/channel/create``. With no lookupds (nsqds only), nsqbox creates the
                       topic and channel on every nsqd instead, where nsqadmin does nothing.
delete topic           the topic's nsqds found first; lookupds: ``/topic/delete``; nsqds:
                       ``/topic/delete``
delete channel         the same with ``/channel/delete``
pause, unpause, empty  the topic's nsqds: ``/topic/<action>`` or ``/channel/<action>``
tombstone              lookupds: ``/topic/tombstone?topic=&node=``; then ``/topic/delete`` on
                       that node (found by its ``/info``), so it stops serving the topic
=====================  ===========================================================================

Like :mod:`nsqbox.admin.clusterinfo` this runs under trio and asyncio alike.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from .clusterinfo import ClusterError, ClusterInfo, UpstreamError
from .stats import Producer

__all__ = ["Action", "ClusterActions"]


class Action(enum.Enum):
    """What ``POST /api/topics/:topic[/:channel] {"action": ...}`` may ask for."""

    PAUSE = "pause"
    UNPAUSE = "unpause"
    EMPTY = "empty"


class ClusterActions:
    """Admin actions against a cluster known by its lookupds (or, without any, its nsqds).

    Each method returns the errors of the hosts that failed (an empty tuple on full success).
    """

    def __init__(
        self,
        info: ClusterInfo,
        *,
        lookupd_http_addresses: Sequence[str] = (),
        nsqd_http_addresses: Sequence[str] = (),
    ) -> None:
        self.info = info
        self.lookupds = list(lookupd_http_addresses)
        self.nsqds = list(nsqd_http_addresses)

    async def _post_each(
        self, addresses: Sequence[str], path: str, params: dict[str, str]
    ) -> list[UpstreamError]:
        errors = []
        for address in addresses:  # one after another, as nsqadmin does
            try:
                await self.info.post(address, path, params)
            except UpstreamError as exc:
                errors.append(exc)
        return errors

    async def _topic_producers(self, topic: str) -> tuple[list[Producer], list[UpstreamError]]:
        try:
            found = await self.info.topic_producers(topic, self.lookupds, self.nsqds)
        except ClusterError as exc:
            if self.lookupds and all(e.status == 404 for e in exc.errors):
                return [], []  # no lookupd knows the topic: there is nothing to act on
            raise
        return found.value, list(found.errors)

    async def _on_producers(
        self, topic: str, path: str, params: dict[str, str]
    ) -> tuple[UpstreamError, ...]:
        producers, errors = await self._topic_producers(topic)
        errors += await self._post_each([p.http_address for p in producers], path, params)
        return tuple(errors)

    # -- create and delete ----------------------------------------------------------------------

    async def create_topic(self, topic: str, channel: str = "") -> tuple[UpstreamError, ...]:
        """Create ``topic`` (and ``channel`` if given) across the cluster."""
        topic_params = {"topic": topic}
        channel_params = {"topic": topic, "channel": channel}
        if not self.lookupds:
            errors = await self._post_each(self.nsqds, "/topic/create", topic_params)
            if channel:
                errors += await self._post_each(self.nsqds, "/channel/create", channel_params)
            return tuple(errors)
        errors = await self._post_each(self.lookupds, "/topic/create", topic_params)
        if channel:
            errors += await self._post_each(self.lookupds, "/channel/create", channel_params)
            errors += await self._on_producers(topic, "/channel/create", channel_params)
        return tuple(errors)

    async def create_channel(self, topic: str, channel: str) -> tuple[UpstreamError, ...]:
        """Create ``channel`` of ``topic`` (and the topic in the lookupds' registry)."""
        return await self.create_topic(topic, channel)

    async def delete_topic(self, topic: str) -> tuple[UpstreamError, ...]:
        """Delete ``topic`` from the lookupds' registry and from every nsqd that has it."""
        producers, errors = await self._topic_producers(topic)
        params = {"topic": topic}
        errors += await self._post_each(self.lookupds, "/topic/delete", params)
        errors += await self._post_each(
            [p.http_address for p in producers], "/topic/delete", params
        )
        return tuple(errors)

    async def delete_channel(self, topic: str, channel: str) -> tuple[UpstreamError, ...]:
        """Delete ``channel`` of ``topic`` from the lookupds and every nsqd that has the topic."""
        producers, errors = await self._topic_producers(topic)
        params = {"topic": topic, "channel": channel}
        errors += await self._post_each(self.lookupds, "/channel/delete", params)
        nodes = [p.http_address for p in producers]
        errors += await self._post_each(nodes, "/channel/delete", params)
        return tuple(errors)

    # -- pause, unpause, empty ------------------------------------------------------------------

    async def topic_action(self, topic: str, action: Action) -> tuple[UpstreamError, ...]:
        """Pause, unpause or empty ``topic`` on every nsqd that has it."""
        return await self._on_producers(topic, f"/topic/{action.value}", {"topic": topic})

    async def channel_action(
        self, topic: str, channel: str, action: Action
    ) -> tuple[UpstreamError, ...]:
        """Pause, unpause or empty ``channel`` of ``topic`` on every nsqd that has the topic."""
        params = {"topic": topic, "channel": channel}
        return await self._on_producers(topic, f"/channel/{action.value}", params)

    async def pause_topic(self, topic: str) -> tuple[UpstreamError, ...]:
        """Pause ``topic`` everywhere (messages stay at the topic)."""
        return await self.topic_action(topic, Action.PAUSE)

    async def unpause_topic(self, topic: str) -> tuple[UpstreamError, ...]:
        """Unpause ``topic`` everywhere."""
        return await self.topic_action(topic, Action.UNPAUSE)

    async def empty_topic(self, topic: str) -> tuple[UpstreamError, ...]:
        """Drop the messages queued at ``topic`` everywhere."""
        return await self.topic_action(topic, Action.EMPTY)

    async def pause_channel(self, topic: str, channel: str) -> tuple[UpstreamError, ...]:
        """Pause ``channel`` everywhere (no deliveries to its clients)."""
        return await self.channel_action(topic, channel, Action.PAUSE)

    async def unpause_channel(self, topic: str, channel: str) -> tuple[UpstreamError, ...]:
        """Unpause ``channel`` everywhere."""
        return await self.channel_action(topic, channel, Action.UNPAUSE)

    async def empty_channel(self, topic: str, channel: str) -> tuple[UpstreamError, ...]:
        """Drop ``channel``'s queued, in-flight and deferred messages everywhere."""
        return await self.channel_action(topic, channel, Action.EMPTY)

    # -- tombstone ------------------------------------------------------------------------------

    async def tombstone_topic_producer(self, topic: str, node: str) -> tuple[UpstreamError, ...]:
        """Tombstone ``node`` for ``topic`` in every lookupd, then delete the topic on ``node``.

        ``node`` is the nsqd's HTTP address as lookupd announces it (``broadcast:http_port``).
        Raises ClusterError when ``node`` does not answer ``/info`` and ``/stats``.
        """
        errors = await self._post_each(
            self.lookupds, "/topic/tombstone", {"topic": topic, "node": node}
        )
        found = await self.info.nsqd_producers([node])  # ClusterError: the node is gone
        errors += found.errors
        nodes = [p.http_address for p in found.value]
        errors += await self._post_each(nodes, "/topic/delete", {"topic": topic})
        return tuple(errors)
