"""Reading nsqbox's journal over HTTP, from one nsqd or several (blocking, httpx).

What ``nsqbox journey`` and the test handle's ``journey()``, ``events()`` and ``given_up()``
share (issue #33; docs/journeys.md): the pages of an nsqd's ``GET /nsqbox/journal``, read to
the end; several nodes' events merged in broker-time order, each marked with its ``node``;
the nsqds a set of nsqlookupds knows; and one error for an nsqd that keeps no journal.

Real nsqd has no ``/nsqbox/`` routes: its ``404 NOT_FOUND`` is :class:`JournalUnsupported`
("not supported by this nsqd"), and so is an nsqbox nsqd started with ``--journal-size=0``
(``404 JOURNAL_OFF``). Every answer is read whole but bounded (:data:`MAX_DOCUMENT`), and a
journey stops at :data:`MAX_EVENTS` events per node.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..net.unreachable import unreachable_reason
from ..wire.documents import NodesDocument
from ..wire.peer_json import PeerJSONError, decode_peer_json, decode_peer_object, peer_count

if TYPE_CHECKING:
    import httpx

__all__ = [
    "MAX_DOCUMENT",
    "MAX_EVENTS",
    "REPR_BODY",
    "GivenUp",
    "JournalError",
    "JournalUnsupported",
    "Merged",
    "base_url",
    "given_up",
    "lookupd_nsqds",
    "merge_events",
    "node_events",
    "read_events",
    "status_error",
]

#: The largest answer read from a node (a page of events, a given-up list, ``/nodes``).
MAX_DOCUMENT: Final = 32 * 1024 * 1024
#: The most events read from one node for one question.
MAX_EVENTS: Final = 100_000
#: Events per page asked for (the route's most).
_PAGE: Final = 1000
_UNSUPPORTED: Final = (
    "not supported by this nsqd: {node} has no journal route "
    "(real nsqd keeps no journal of messages; nsqbox's nsqd does)"
)


class JournalError(Exception):
    """A node could not be read (unreachable, or it refused the request): ``str()`` says why."""


class JournalUnsupported(JournalError):
    """The nsqd keeps no journal: real nsqd (no ``/nsqbox/`` routes), or nsqbox's with
    ``--journal-size=0``."""


def base_url(address: str) -> str:
    """``host:port`` (or a URL) as the URL the requests start with."""
    return address.rstrip("/") if "://" in address else f"http://{address}"


def status_error(node: str, status: int, body: bytes) -> JournalError:
    """The error for ``node``'s non-200 answer to a journal route."""
    doc = decode_peer_object(body)
    message = str(doc.get("message", ""))[:200] or body[:200].decode("utf-8", "replace")
    if status == 404 and message == "JOURNAL_OFF":
        return JournalUnsupported(f"the journal is off at {node} (--journal-size=0)")
    if status == 404:  # NOT_FOUND: no such route
        return JournalUnsupported(_UNSUPPORTED.format(node=node))
    return JournalError(f"{node} answered {status} {message}")


def _fetch(
    client: httpx.Client, node: str, path: str, params: Mapping[str, Any]
) -> tuple[int, bytes]:
    """``node``'s status and body for ``GET path`` (the body at most :data:`MAX_DOCUMENT`
    bytes); :class:`JournalError` when it cannot be reached or says more."""
    import httpx

    try:
        with client.stream("GET", base_url(node) + path, params=params) as response:
            body = bytearray()
            for piece in response.iter_bytes():
                body += piece
                if len(body) > MAX_DOCUMENT:
                    raise JournalError(f"{node}: an answer larger than {MAX_DOCUMENT} bytes")
            return response.status_code, bytes(body)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise JournalError(f"cannot reach {node}: {unreachable_reason(exc)}") from None
    except httpx.TimeoutException:  # connected: it did not answer (as trace says it)
        raise JournalError(f"{node}: no answer within {client.timeout.read:g}s") from None
    except httpx.HTTPError as exc:  # connected: what it answered was not HTTP, or broke off
        raise JournalError(f"{node}: a broken answer ({exc})") from None


def _get(client: httpx.Client, node: str, path: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object ``node`` answers to ``GET path``; :class:`JournalError` else."""
    status, body = _fetch(client, node, path, params)
    if status != 200:
        raise status_error(node, status, body)
    return decode_peer_object(body)


def node_events(
    client: httpx.Client,
    node: str,
    filters: Mapping[str, str | int],
    *,
    most: int = MAX_EVENTS,
) -> list[dict[str, Any]]:
    """Every event of ``node``'s journal that ``filters`` (the route's parameters: ``id``,
    ``topic``, ``channel``, ``kind``, ``client``, ``since``, ``until``) match, oldest
    first, at most ``most``; each marked with ``node``."""
    events: list[dict[str, Any]] = []
    params: dict[str, str | int] = {k: v for k, v in filters.items() if v not in ("", 0)}
    after = 0
    while len(events) < most:
        page = _get(client, node, "/nsqbox/journal", {**params, "after": after, "limit": _PAGE})
        got = page.get("events")
        if not isinstance(got, list):
            raise JournalError(f"{node}: a journal page without events")
        for event in got[: most - len(events)]:
            if isinstance(event, dict):
                event["node"] = node
                events.append(event)
        following = peer_count(page.get("next"))
        if not following or following <= after:
            break
        after = following
    return events


@dataclass(slots=True)
class Merged:
    """Events of several nodes in broker-time order, and the nodes that could not answer."""

    events: list[dict[str, Any]] = field(default_factory=list)
    #: Node address -> why it gave no events (no journal, unreachable).
    failed: dict[str, str] = field(default_factory=dict)


def merge_events(per_node: Iterable[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Events of several nodes as one list in broker-time order (each node's own order
    kept for equal times)."""
    tagged = [
        (peer_count(event.get("time")), i, j, event)
        for i, events in enumerate(per_node)
        for j, event in enumerate(events)
    ]
    tagged.sort(key=lambda item: item[:3])
    return [event for *_, event in tagged]


def read_events(
    client: httpx.Client, nodes: Sequence[str], filters: Mapping[str, str | int]
) -> Merged:
    """Every node's events that ``filters`` match, merged (:func:`merge_events`); a node
    that cannot answer is listed in :attr:`Merged.failed`."""
    merged = Merged()
    per_node = []
    for node in nodes:
        try:
            per_node.append(node_events(client, node, filters))
        except JournalError as exc:
            merged.failed[node] = str(exc)
    merged.events = merge_events(per_node)
    return merged


#: The most body bytes a :class:`GivenUp`'s repr shows.
REPR_BODY: Final = 32


@dataclass(frozen=True, slots=True, repr=False)
class GivenUp:
    """A message finished after earlier deliveries of it failed (docs/journeys.md).

    Its repr shows the first :data:`REPR_BODY` bytes of the body and the message's size, as
    a client :class:`~nsqbox.client.Message`'s does, so an assertion's report stays short.
    """

    id: str
    body: bytes
    #: The message's size (``body`` may be its first bytes only).
    size: int
    attempts: int
    requeues: int
    timeouts: int
    #: When it was finished, and published (broker wall ns).
    time: int
    timestamp: int
    #: Who finished it: ``client``, and the ``remote_address``, ``user_agent``, ``hostname``
    #: and ``client_id`` the nsqd knew.
    finished_by: dict[str, Any]
    node: str

    def __repr__(self) -> str:
        more = "..." if len(self.body) > REPR_BODY else ""
        return (
            f"GivenUp(id={self.id!r}, node={self.node!r}, attempts={self.attempts}, "
            f"requeues={self.requeues}, timeouts={self.timeouts}, size={self.size}, "
            f"body={self.body[:REPR_BODY]!r}{more})"
        )


def given_up(
    client: httpx.Client,
    node: str,
    topic: str,
    channel: str,
    *,
    attempts: int = 0,
    body_bytes: int = 1024 * 1024,
) -> list[GivenUp]:
    """The messages of ``channel`` given up on at ``node``, newest first (their first
    ``body_bytes`` bytes)."""
    params = {"topic": topic, "channel": channel, "attempts": attempts, "body_bytes": body_bytes}
    doc = _get(client, node, "/nsqbox/journal/given_up", {**params, "limit": _PAGE})
    out = []
    for item in doc.get("messages") or []:
        if not isinstance(item, dict):
            continue
        try:
            body = base64.b64decode(str(item.get("body", "")), validate=True)
        except ValueError:
            body = b""
        who = item.get("finished_by")
        out.append(
            GivenUp(
                id=str(item.get("id", "")),
                body=body,
                size=peer_count(item.get("size")),
                attempts=peer_count(item.get("attempts")),
                requeues=peer_count(item.get("requeues")),
                timeouts=peer_count(item.get("timeouts")),
                time=peer_count(item.get("time")),
                timestamp=peer_count(item.get("timestamp")),
                finished_by=who if isinstance(who, dict) else {},
                node=node,
            )
        )
    return out


_nodes_decoder = msgspec.json.Decoder(NodesDocument)


def lookupd_nsqds(client: httpx.Client, lookupds: Sequence[str]) -> list[str]:
    """The HTTP addresses of every nsqd the ``lookupds`` know (``/nodes``), in order;
    :class:`JournalError` when none answers."""
    found: dict[str, None] = {}
    failures = []
    for lookupd in lookupds:
        try:
            status, body = _fetch(client, lookupd, "/nodes", {})
            if status != 200:
                raise JournalError(f"{lookupd} answered {status}")
            doc = decode_peer_json(body, _nodes_decoder)
        except JournalError as exc:  # it names the lookupd already
            failures.append(str(exc))
            continue
        except PeerJSONError as exc:
            failures.append(f"{lookupd}: {exc}")
            continue
        for node in doc.producers or []:
            host = node.broadcast_address or node.hostname
            if host and 0 < node.http_port < 65536:
                host = f"[{host}]" if ":" in host else host
                found[f"{host}:{node.http_port}"] = None
    if failures and len(failures) == len(lookupds):
        raise JournalError("no nsqlookupd answered: " + "; ".join(failures))
    return list(found)
