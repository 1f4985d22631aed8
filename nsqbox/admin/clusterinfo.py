"""Reading an NSQ cluster over HTTP, as nsqadmin's ``clusterinfo`` package does.

:class:`ClusterInfo` asks lookupds (``/topics``, ``/channels``, ``/nodes``, ``/lookup``) and nsqds
(``/info``, ``/stats?format=json``) and merges their answers. It uses only public HTTP endpoints,
so it works against real NSQ as well as nsqbox. Requests to several hosts run concurrently.

It runs under trio and asyncio alike: it uses an ``httpx.AsyncClient`` the caller owns and anyio
task groups, and never imports trio (the Textual TUI runs it on asyncio).

Failures follow nsqadmin: a query that some hosts answer returns what they said together with the
errors of the others (:class:`Partial`); a query that *no* host answers raises
:class:`ClusterError`. Addresses are ``host:port`` or ``http://host:port`` (``https://`` too).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import msgspec

from ..wire.documents import StatsDocument
from ..wire.peer_json import PeerJSONError
from .stats import (
    NodeInfo,
    Producer,
    ProducerTopic,
    TopicStats,
    decode_lookup_producers,
    decode_lookupd_channels,
    decode_lookupd_topics,
    decode_node_info,
    decode_nodes,
    decode_nsqd_stats,
    decode_stats_document,
    parse_version,
)

if TYPE_CHECKING:  # httpx and anyio load on the first request: the admin service starts without
    import httpx

__all__ = [
    "ClusterError",
    "ClusterInfo",
    "Partial",
    "QueryParams",
    "UpstreamError",
    "base_url",
    "gather",
    "make_http_client",
    "warning",
]

log = logging.getLogger("nsqbox.admin.clusterinfo")

T = TypeVar("T")
R = TypeVar("R")

#: What NSQ's Go HTTP client sends, asking for NSQ 1.x's plain JSON.
ACCEPT = "application/vnd.nsq; version=1.0"


#: Query parameters: a mapping, or pairs (a name may repeat).
QueryParams = Mapping[str, str] | Sequence[tuple[str, str]]


def _query(params: QueryParams | None) -> list[tuple[str, str]]:
    if params is None:
        return []
    return list(params.items()) if isinstance(params, Mapping) else list(params)


def base_url(address: str) -> str:
    """``http://host:port`` for ``host:port``; an address with a scheme is kept as it is."""
    address = address.rstrip("/")
    return address if "://" in address else f"http://{address}"


def make_http_client(
    connect_timeout: float = 2.0,
    request_timeout: float = 5.0,
    *,
    addresses: Sequence[str] = (),
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` set up as NSQ's tools' HTTP client.

    The timeouts are NSQ's ``--http-client-connect-timeout`` and
    ``--http-client-request-timeout`` (seconds); proxy settings in the environment are ignored,
    as Go's NSQ client does. Certificates are loaded (tens of milliseconds of CPU) only when
    one of ``addresses`` is an ``https://`` URL; plain ``http://`` never needs them.
    """
    import httpx

    timeout = httpx.Timeout(request_timeout, connect=connect_timeout)
    https = any(a.startswith("https://") for a in addresses)
    return httpx.AsyncClient(timeout=timeout, trust_env=False, verify=https)


class UpstreamError(Exception):
    """One request to a lookupd or nsqd that failed.

    ``address`` is the host as the caller named it (a node's ``http_address`` for nsqds);
    ``status`` is the HTTP status when the host answered with something other than 200, and
    ``body`` what it answered then.
    """

    def __init__(
        self,
        address: str,
        url: str,
        message: str,
        status: int | None = None,
        body: bytes = b"",
    ) -> None:
        super().__init__(f"{url}: {message}")
        self.address = address
        self.url = url
        self.message = message
        self.status = status
        self.body = body


class ClusterError(Exception):
    """A query no host answered (nsqadmin's ``failed to query any nsqlookupd``)."""

    def __init__(self, what: str, errors: Sequence[UpstreamError]) -> None:
        self.errors = tuple(errors)
        detail = "\n".join(str(e) for e in self.errors)
        super().__init__(f"failed to query any {what}: {detail}" if detail else what)


@dataclass(frozen=True, slots=True)
class Partial(Generic[T]):
    """A result and the errors of the hosts that did not contribute to it."""

    value: T
    errors: tuple[UpstreamError, ...] = ()

    @property
    def warning(self) -> str:
        """nsqadmin's ``message``: ``WARNING: <errors>`` or ``""``."""
        return warning(self.errors)


def warning(errors: Sequence[BaseException]) -> str:
    """``WARNING: e1; e2`` for a list of errors, ``""`` for none (nsqadmin's maybeWarnMsg)."""
    return "WARNING: " + "; ".join(str(e) for e in errors) if errors else ""


_Result = TypeVar("_Result")


async def gather(
    items: Sequence[T], fetch: Callable[[T], Awaitable[_Result]]
) -> list[_Result | UpstreamError]:
    """``fetch`` every item concurrently; results (or their UpstreamError) in item order."""
    results: list[_Result | UpstreamError | None] = [None] * len(items)

    async def run(index: int, item: T) -> None:
        try:
            results[index] = await fetch(item)
        except UpstreamError as exc:
            results[index] = exc

    import anyio

    async with anyio.create_task_group() as group:
        for index, item in enumerate(items):
            group.start_soon(run, index, item)
    return [r for r in results if r is not None]


def _split(
    results: Sequence[R | UpstreamError], what: str
) -> tuple[list[R], tuple[UpstreamError, ...]]:
    """Answers and errors apart; ClusterError when every host failed."""
    values = [r for r in results if not isinstance(r, UpstreamError)]
    errors = tuple(r for r in results if isinstance(r, UpstreamError))
    if errors and not values:
        raise ClusterError(what, errors)
    return values, errors


class ClusterInfo:
    """Queries against lookupds and nsqds through ``client`` (which the caller opens and closes).

    Methods taking ``lookupds`` and ``nsqds`` ask the lookupds when any are given and the nsqds
    otherwise, as nsqadmin does with ``--lookupd-http-address`` / ``--nsqd-http-address``.
    ``client`` may be a function that makes the client: it is called on the first request, so
    httpx loads then and not while the caller starts.
    """

    def __init__(
        self,
        client: httpx.AsyncClient | Callable[[], httpx.AsyncClient],
        *,
        logger: logging.Logger | None = None,
        max_document: int | None = None,
    ) -> None:
        self._client = client
        self.log = logger or log
        #: The largest answer read from one host (None: :mod:`nsqbox.net.peer_http`'s 16 MiB;
        #: httpx loads with it, on the first request): a larger one,
        #: or one not complete within the client's request timeout, is that host's error.
        self.max_document = max_document

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client (made now, on the first use, when a function was given)."""
        if callable(self._client):
            self._client = self._client()
        return self._client

    # -- raw requests ---------------------------------------------------------------------------

    async def get(self, address: str, path: str, params: Mapping[str, str] | None = None) -> bytes:
        """GET ``path`` on ``address``; the body of a 200 answer, else UpstreamError."""
        return await self._request("GET", address, path, params)

    async def post(self, address: str, path: str, params: Mapping[str, str] | None = None) -> bytes:
        """POST ``path?params`` (empty body) on ``address``, as nsqadmin's actions do."""
        return await self._request("POST", address, path, params)

    async def request(
        self, method: str, address: str, path: str, params: QueryParams | None = None
    ) -> bytes:
        """``method`` ``path?params`` (empty body) on ``address``; the body of a 200 answer."""
        return await self._request(method, address, path, params)

    async def _request(
        self, method: str, address: str, path: str, params: QueryParams | None
    ) -> bytes:
        import httpx

        from ..net.peer_http import MAX_PEER_DOCUMENT, fetch

        try:
            url = httpx.URL(base_url(address) + path, params=_query(params))
        except httpx.InvalidURL as exc:
            raise UpstreamError(address, base_url(address) + path, str(exc)) from exc
        self.log.info("CI: querying %s", url)
        try:
            response = await fetch(
                self.client,
                method,
                url,
                headers={"Accept": ACCEPT},
                max_bytes=self.max_document or MAX_PEER_DOCUMENT,
            )
        except httpx.HTTPError as exc:
            raise UpstreamError(address, str(url), str(exc) or type(exc).__name__) from exc
        if response.status_code != 200:
            message = f"got response {response.status_code} {response.text!r}"
            raise UpstreamError(address, str(url), message, response.status_code, response.content)
        return response.content

    async def _decoded(
        self,
        address: str,
        path: str,
        params: Mapping[str, str] | None,
        decode: Callable[[bytes], R],
    ) -> R:
        body = await self.get(address, path, params)
        try:
            return decode(body)
        except PeerJSONError as exc:
            raise UpstreamError(address, path, f"bad response - {exc}") from exc

    # -- lookupd --------------------------------------------------------------------------------

    async def lookupd_topics(self, lookupds: Sequence[str]) -> Partial[list[str]]:
        """The union of every lookupd's ``/topics``, sorted."""

        async def fetch(addr: str) -> list[str]:
            return await self._decoded(addr, "/topics", None, decode_lookupd_topics)

        values, errors = _split(await gather(lookupds, fetch), "nsqlookupd")
        return Partial(sorted({t for topics in values for t in topics}), errors)

    async def lookupd_topic_channels(
        self, topic: str, lookupds: Sequence[str]
    ) -> Partial[list[str]]:
        """The union of every lookupd's ``/channels?topic=``, sorted."""

        async def fetch(addr: str) -> list[str]:
            params = {"topic": topic}
            return await self._decoded(addr, "/channels", params, decode_lookupd_channels)

        values, errors = _split(await gather(lookupds, fetch), "nsqlookupd")
        return Partial(sorted({c for channels in values for c in channels}), errors)

    async def lookupd_producers(self, lookupds: Sequence[str]) -> Partial[list[Producer]]:
        """Every nsqd any lookupd knows (``/nodes``), merged by TCP address, sorted by host."""

        async def fetch(addr: str) -> tuple[str, list[Producer]]:
            return addr, await self._decoded(addr, "/nodes", None, decode_nodes)

        values, errors = _split(await gather(lookupds, fetch), "nsqlookupd")
        merged: dict[str, Producer] = {}
        remotes: dict[str, list[str]] = {}
        for addr, producers in values:
            for producer in producers:
                key = producer.tcp_address
                merged.setdefault(key, producer)
                remotes.setdefault(key, []).append(f"{addr}/{producer.remote_address or 'N/A'}")
        newest = max((parse_version(p.version) for p in merged.values()), default=(0, 0, 0))
        producers = [
            msgspec.structs.replace(
                p,
                remote_addresses=remotes[key],
                out_of_date=parse_version(p.version) < newest,
            )
            for key, p in merged.items()
        ]
        producers.sort(key=lambda p: (p.hostname, p.http_address))
        return Partial(producers, errors)

    async def lookupd_topic_producers(
        self, topic: str, lookupds: Sequence[str]
    ) -> Partial[list[Producer]]:
        """The nsqds that have ``topic``, by every lookupd's ``/lookup``, unique by HTTP address.

        Raises ClusterError when no lookupd answered; its errors are all 404s when none knows
        the topic.
        """

        async def fetch(addr: str) -> list[Producer]:
            return await self._decoded(addr, "/lookup", {"topic": topic}, decode_lookup_producers)

        values, errors = _split(await gather(lookupds, fetch), "nsqlookupd")
        unique: dict[str, Producer] = {}
        for producers in values:
            for producer in producers:
                unique.setdefault(producer.http_address, producer)
        return Partial(list(unique.values()), errors)

    # -- nsqd -----------------------------------------------------------------------------------

    async def node_info(self, address: str) -> NodeInfo:
        """An nsqd's ``/info``; UpstreamError when it fails."""
        return await self._decoded(address, "/info", None, decode_node_info)

    async def node_stats(
        self,
        node: str,
        *,
        hostname: str = "",
        topic: str = "",
        channel: str = "",
        include_clients: bool = True,
    ) -> list[TopicStats]:
        """One nsqd's ``/stats`` as per-node rows (``node`` is its HTTP address).

        ``topic`` (and ``channel``) filter as nsqd's parameters do; a topic filter also drops
        rows of other topics, as nsqadmin does. UpstreamError when it fails.
        """
        params = {"format": "json"}
        if topic:
            params["topic"] = topic
            if channel:
                params["channel"] = channel
        if not include_clients:
            params["include_clients"] = "false"

        def decode(body: bytes) -> list[TopicStats]:
            return decode_nsqd_stats(body, node=node, hostname=hostname)

        rows = await self._decoded(node, "/stats", params, decode)
        return [r for r in rows if not topic or r.topic_name == topic]

    async def node_stats_document(self, node: str) -> StatsDocument:
        """One nsqd's whole ``/stats?format=json`` document (clients and memory included).

        UpstreamError when it fails.
        """
        return await self._decoded(node, "/stats", {"format": "json"}, decode_stats_document)

    async def nodes_stats(
        self,
        producers: Sequence[Producer],
        *,
        topic: str = "",
        channel: str = "",
        include_clients: bool = True,
    ) -> list[list[TopicStats] | UpstreamError]:
        """:meth:`node_stats` of every producer, concurrently; one entry per producer."""

        async def fetch(p: Producer) -> list[TopicStats]:
            return await self.node_stats(
                p.http_address,
                hostname=p.hostname,
                topic=topic,
                channel=channel,
                include_clients=include_clients,
            )

        return await gather(producers, fetch)

    async def nsqd_stats(
        self,
        producers: Sequence[Producer],
        *,
        topic: str = "",
        channel: str = "",
        include_clients: bool = True,
    ) -> Partial[list[TopicStats]]:
        """Per-node topic rows from every producer, sorted by host (nsqadmin's GetNSQDStats).

        Sum them with :func:`~nsqbox.admin.stats.aggregate_topic`. ClusterError when no
        producer answered.
        """
        results = await self.nodes_stats(
            producers, topic=topic, channel=channel, include_clients=include_clients
        )
        values, errors = _split(results, "nsqd")
        rows = [row for rows in values for row in rows]
        rows.sort(key=lambda r: (r.hostname, r.node))
        return Partial(rows, errors)

    async def nsqd_topics(self, nsqds: Sequence[str]) -> Partial[list[str]]:
        """The union of the topics in every nsqd's ``/stats``, sorted."""

        async def fetch(addr: str) -> list[TopicStats]:
            return await self.node_stats(addr, include_clients=False)

        values, errors = _split(await gather(nsqds, fetch), "nsqd")
        return Partial(sorted({t.topic_name for rows in values for t in rows}), errors)

    async def _nsqd_producer(self, address: str, topic: str) -> Producer | None:
        rows = await self.node_stats(address, topic=topic, include_clients=False)
        if topic and not rows:
            return None
        info = await self.node_info(address)
        broadcast, http_port = info.broadcast_address, info.http_port
        if not broadcast:  # an old nsqd: name it by the address it was reached at
            host, _, port = address.rpartition("/")[2].rpartition(":")
            broadcast = host.strip("[]")
            http_port = int(port) if port.isascii() and port.isdigit() and len(port) <= 5 else 0
        return Producer(
            hostname=info.hostname or broadcast,
            broadcast_address=broadcast,
            tcp_port=info.tcp_port,
            http_port=http_port,
            version=info.version,
            topics=[ProducerTopic(r.topic_name) for r in rows],
        )

    async def nsqd_producers(self, nsqds: Sequence[str]) -> Partial[list[Producer]]:
        """Each nsqd as a Producer built from its ``/info`` and ``/stats``."""

        async def fetch(addr: str) -> Producer | None:
            return await self._nsqd_producer(addr, "")

        values, errors = _split(await gather(nsqds, fetch), "nsqd")
        return Partial([p for p in values if p is not None], errors)

    async def nsqd_topic_producers(
        self, topic: str, nsqds: Sequence[str]
    ) -> Partial[list[Producer]]:
        """The nsqds (of ``nsqds``) that have ``topic``."""

        async def fetch(addr: str) -> Producer | None:
            return await self._nsqd_producer(addr, topic)

        values, errors = _split(await gather(nsqds, fetch), "nsqd")
        return Partial([p for p in values if p is not None], errors)

    # -- either ---------------------------------------------------------------------------------

    async def topics(self, lookupds: Sequence[str], nsqds: Sequence[str]) -> Partial[list[str]]:
        """Every topic: from the lookupds if any, else from the nsqds."""
        if lookupds:
            return await self.lookupd_topics(lookupds)
        return await self.nsqd_topics(nsqds)

    async def producers(
        self, lookupds: Sequence[str], nsqds: Sequence[str]
    ) -> Partial[list[Producer]]:
        """Every nsqd: from the lookupds if any, else the given nsqds."""
        if lookupds:
            return await self.lookupd_producers(lookupds)
        return await self.nsqd_producers(nsqds)

    async def topic_producers(
        self, topic: str, lookupds: Sequence[str], nsqds: Sequence[str]
    ) -> Partial[list[Producer]]:
        """The nsqds that have ``topic``: from the lookupds if any, else among the nsqds."""
        if lookupds:
            return await self.lookupd_topic_producers(topic, lookupds)
        return await self.nsqd_topic_producers(topic, nsqds)
