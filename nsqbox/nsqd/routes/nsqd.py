"""nsqd's HTTP API (nsqd/http.go in NSQ v1.3.0) on nsqbox's h11 router.

Same routes, status codes and error strings as real nsqd; see :func:`make_app`.
Handlers are thin: they validate parameters as nsqd does and call the domain
(:class:`~nsqbox.nsqd.domain.nsqd.NSQD`, topics, channels).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

import msgspec

from ... import NSQ_VERSION
from ...go.syntax import StrconvError, parse_int
from ...http import Endpoint, HTTPError, Request, Response, Router, parse_query
from ...http.clock import add_clock_routes
from ...http.local_guard import local_guard
from ...process.logs import parse_level, set_level
from ...wire.documents import InfoDocument
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ...wire.peer_json import PeerJSONError, decode_peer_json
from ..domain.options import TLS_REQUIRED
from ..domain.stats import get_stats, memory_stats, stats_document
from ..domain.topic import TopicError, publisher_fields
from .documents import config_value, debug_snapshot, duration_ns, render_stats_text
from .faults import add_fault_routes
from .journal import add_journal_routes
from .metrics import add_metrics_route
from .mpub_body import read_binary_mpub
from .peek import add_peek_routes
from .replay import add_replay_routes
from .replay_step import add_step_replay_routes
from .snapshot import add_snapshot_routes
from .tap import NodeTaps, add_tap_routes

if TYPE_CHECKING:
    from ..domain.channel import Channel
    from ..domain.nsqd import NSQD
    from ..domain.topic import Topic

# nsqd's boolParams: anything else means "use the default".
BOOL_PARAMS: Final = {"true": True, "1": True, "false": False, "0": False}
_addresses_decoder: Final = msgspec.json.Decoder(list[str] | None)
_UINT32: Final = struct.Struct(">i")
#: /pub's and /mpub's answer: one Response, so the server encodes it once.
_OK: Final = Response.text("OK")


class _PubQuery(NamedTuple):
    """What a /pub query string says, as nsqd reads it (a pure function of the string)."""

    #: The topic's name; "" when ``error`` is set.
    topic: str
    #: nsqd's 400 code for a query it refuses before finding the topic, else "".
    error: str
    #: ``defer`` in milliseconds: None when absent, False when not an int64.
    defer_ms: int | Literal[False] | None


@functools.lru_cache(maxsize=1024)
def _pub_query(raw_query: str) -> _PubQuery:
    """nsqd's getTopicFromQuery and defer argument for a /pub query, remembered.

    A client publishing to one topic sends one query again and again; what it
    means depends on nothing else, so every app shares the answers (bounded: the
    least recently used are forgotten first).
    """
    try:
        args = parse_query(raw_query)
    except ValueError:
        return _PubQuery("", "INVALID_REQUEST", None)
    names = args.get("topic")
    if not names:
        return _PubQuery("", "MISSING_ARG_TOPIC", None)
    if not is_valid_topic_name(names[0]):
        return _PubQuery("", "INVALID_TOPIC", None)
    if "defer" not in args:
        return _PubQuery(names[0], "", None)
    ms = _parse_int64(args["defer"][0])
    return _PubQuery(names[0], "", False if ms is None else ms)


def make_app(
    nsqd: NSQD,
    *,
    tls_enabled: bool = False,
    on_options_changed: Callable[[], None] | None = None,
    taps: NodeTaps | None = None,
) -> Router | TLSRequiredApp:
    """nsqd's HTTP routes for ``nsqd``, ready for :func:`nsqbox.http.serve_http`.

    ``tls_enabled`` says whether this app serves the HTTPS listener: with
    ``--tls-required=true`` the plain-HTTP app answers every request ``403
    TLS_REQUIRED``, as nsqd does. ``on_options_changed`` is called after
    ``PUT /config/...`` changed an option (nsqd's ``triggerOptsNotification``:
    the lookupd loop reconnects). ``taps`` are the node's, shared by its HTTP and HTTPS apps
    (without: this app's own).
    """
    opts = nsqd.options
    if not tls_enabled and opts.tls_required == TLS_REQUIRED:
        return TLSRequiredApp(nsqd)
    api = _NSQDHTTP(nsqd, on_options_changed)
    router = Router(
        max_body_size=opts.max_body_size,
        logger=nsqd.logger,
        guard=local_guard(opts.allowed_hosts, opts.effective_broadcast_address()),
        nsqbox_routes=not opts.auth_http_addresses,  # with auth, /nsqbox/... answer 404
    )
    router.add("GET", "/ping", api.ping, plain_text=True)
    router.add("GET", "/info", api.info)
    # "/put" is not in v1.3.0 (nsqd dropped it in 1.0); kept for old scripts that still use it.
    for path in ("/pub", "/put"):
        router.add(
            "POST",
            path,
            api.pub,
            max_body_size=opts.max_msg_size,
            too_large=HTTPError(413, "MSG_TOO_BIG"),
            log=False,
            quick=api.pub_now,
        )
    router.add("POST", "/mpub", api.mpub, too_large=HTTPError(413, "BODY_TOO_BIG"), log=False)
    router.add("GET", "/stats", api.stats)
    router.add("POST", "/topic/create", api.topic_create)
    router.add("POST", "/topic/delete", api.topic_delete)
    router.add("POST", "/topic/empty", api.topic_empty)
    router.add("POST", "/topic/pause", api.topic_pause)
    router.add("POST", "/topic/unpause", api.topic_unpause)
    router.add("POST", "/channel/create", api.channel_create)
    router.add("POST", "/channel/delete", api.channel_delete)
    router.add("POST", "/channel/empty", api.channel_empty)
    router.add("POST", "/channel/pause", api.channel_pause)
    router.add("POST", "/channel/unpause", api.channel_unpause)
    router.add("GET", "/config/:opt", api.get_config)
    router.add(
        "PUT",
        "/config/:opt",
        api.put_config,
        max_body_size=opts.max_msg_size,
        too_large=HTTPError(413, "INVALID_VALUE"),
    )
    router.add("GET", "/debug", api.debug)
    # nsqbox's own /nsqbox/tap/... (the test plugin's capture)
    add_tap_routes(router, taps or NodeTaps(nsqd))
    add_peek_routes(router, nsqd)  # nsqbox's own /nsqbox/peek (list what a queue holds)
    add_journal_routes(router, nsqd)  # nsqbox's own /nsqbox/journal (what happened to each)
    add_snapshot_routes(router, nsqd)  # nsqbox's own /nsqbox/snapshot (save and load state)
    add_replay_routes(router, nsqd)  # nsqbox's own /nsqbox/channel/mpub (replay into one channel)
    add_step_replay_routes(router, nsqd)  # nsqbox's own /nsqbox/replay/step (under the clock)
    add_fault_routes(router, nsqd)  # nsqbox's own /nsqbox/faults (faults on demand)
    add_clock_routes(router, nsqd.clock)  # nsqbox's own /nsqbox/clock (time control)
    add_metrics_route(router, nsqd)  # nsqbox's own /metrics (Prometheus)
    return router


class _HTTPPublisher:
    """An HTTP publish's peer, as a topic's taps record it."""

    __slots__ = ("request",)

    def __init__(self, request: Request) -> None:
        self.request = request

    def publisher_fields(self) -> dict[str, str]:
        request = self.request
        return publisher_fields(
            "http",
            user_agent=request.header("user-agent") or "",
            remote_address=request.remote_address,
        )


class TLSRequiredApp:
    """The plain-HTTP app of an nsqd with ``--tls-required=true``: 403 to everything."""

    def __init__(self, nsqd: NSQD) -> None:
        self.nsqd = nsqd

    def resolve(self, method: str, path: str) -> Endpoint:
        """Every request gets nsqd's ``TLS_REQUIRED`` answer, naming the HTTPS port."""
        # nsqd writes this body by hand, hence the space after the colons.
        body = f'{{"message": "TLS_REQUIRED", "https_port": {self.nsqd.https_port}}}'
        error = Response.error(HTTPError(403, "TLS_REQUIRED", body=body.encode()))

        async def refuse(request: Request) -> Response:
            return error

        return Endpoint(respond=refuse, too_large=error)


class _NSQDHTTP:
    """The handlers; one per nsqd route, named after it."""

    def __init__(self, nsqd: NSQD, on_options_changed: Callable[[], None] | None) -> None:
        self.nsqd = nsqd
        self.on_options_changed = on_options_changed

    # -- /ping, /info ------------------------------------------------------
    async def ping(self, request: Request) -> str:
        health = self.nsqd.get_health()
        if not self.nsqd.is_healthy():
            raise HTTPError(500, health)
        return health

    async def info(self, request: Request) -> InfoDocument:
        nsqd, opts = self.nsqd, self.nsqd.options
        return InfoDocument(
            version=NSQ_VERSION,
            broadcast_address=opts.effective_broadcast_address(),
            hostname=nsqd.hostname,
            http_port=nsqd.http_port,
            tcp_port=nsqd.tcp_port,
            start_time=int(nsqd.start_time),
            max_heartbeat_interval=duration_ns(opts.max_heartbeat_interval),
            max_output_buffer_size=opts.max_output_buffer_size,
            max_output_buffer_timeout=duration_ns(opts.max_output_buffer_timeout),
            max_deflate_level=opts.max_deflate_level,
        )

    # -- publishing --------------------------------------------------------
    async def pub(self, request: Request) -> Response:
        """POST /pub: :meth:`publish`, answered once a new topic is announced."""
        await self._announced(self.publish(request))
        return _OK

    def pub_now(self, request: Request) -> Response | None:
        """POST /pub without a coroutine: :meth:`publish`'s answer, unless the topic
        is new or being announced to the lookupds, which :meth:`pub` waits for
        (then None, having done nothing)."""
        query = _pub_query(request.raw_query)
        if not query.error and (
            query.topic in self.nsqd.announcing or query.topic not in self.nsqd.topics
        ):
            return None
        self._publish(request, query)
        return _OK

    def publish(self, request: Request) -> Topic:
        """nsqd's doPUB up to its answer: the checks in its order, then the put.

        The server has already refused bodies over ``--max-msg-size`` (``MSG_TOO_BIG``).
        Returns the topic (created if new); raises the HTTPError nsqd answers.
        """
        return self._publish(request, _pub_query(request.raw_query))

    def _publish(self, request: Request, query: _PubQuery) -> Topic:
        """:meth:`publish`, with ``request``'s query read."""
        if not request.body:
            raise HTTPError(400, "MSG_EMPTY")
        if query.error:
            raise HTTPError(400, query.error)
        topic = self.nsqd.get_topic(query.topic)
        defer = 0.0 if query.defer_ms is None else self._defer(query.defer_ms)
        self._put(topic, [request.body], defer, request)
        return topic

    def _defer(self, ms: int | Literal[False]) -> float:
        """A /pub's ``defer`` in seconds, as nsqd checks it (``INVALID_DEFER``)."""
        if ms is False:
            raise HTTPError(400, "INVALID_DEFER")
        # nsqd: time.Duration(ms) * time.Millisecond, an int64 product that wraps around
        ns = (ms * 1_000_000 + (1 << 63)) % (1 << 64) - (1 << 63)
        if ns < 0 or ns > round(self.nsqd.options.max_req_timeout * 1e9):
            raise HTTPError(400, "INVALID_DEFER")
        return ns / 1e9

    async def mpub(self, request: Request) -> Response:
        # The server has already refused bodies over --max-body-size (BODY_TOO_BIG).
        args, topic = self._topic_from_query(request)
        opts = self.nsqd.options
        binary = False
        lines = b""  # the body, when its lines are the messages, all of them
        if "binary" in args:
            # nsqd treats an unrecognised value as true (and logs it as deprecated).
            binary = BOOL_PARAMS.get(args["binary"][0], True)
        if binary:
            bodies = read_binary_mpub(request.body, opts.max_msg_size, opts.max_body_size)
        else:
            bodies, whole = _split_lines(request.body)
            if whole:
                lines = request.body
            # No line is longer than the body: only a long body needs the check.
            if len(request.body) > opts.max_msg_size and max(map(len, bodies)) > opts.max_msg_size:
                raise HTTPError(413, "MSG_TOO_BIG")
        self._put(topic, bodies, 0.0, request, lines)
        await self._announced(topic)
        return _OK

    async def _announced(self, topic: Topic) -> None:
        """A publish that created ``topic`` answers once the lookupds know it, as nsqd's
        (pub_now leaves such a publish to pub)."""
        announced = self.nsqd.announcing.get(topic.name)
        if announced is not None:
            await announced()

    def _put(
        self, topic: Topic, bodies: list[bytes], defer: float, request: Request, lines: bytes = b""
    ) -> None:
        """Publish ``bodies`` (``lines``: a text /mpub's body, if its lines are all of them)."""
        if self.nsqd.exiting or topic.exiting:
            raise HTTPError(503, "EXITING")
        if not bodies:
            return
        journal = self.nsqd.journal  # who published, for the journal: a call when it changed
        if journal is not None and journal.http_headers is not request.headers:
            journal.publisher_http(request.remote_address, request.headers)
        publisher = _HTTPPublisher(request) if topic.taps else None  # who, for a tap
        try:
            topic.put_messages(bodies, defer, None, publisher, packed=lines, lined=True)
        except TopicError:
            raise HTTPError(503, "EXITING") from None

    def _topic_from_query(self, request: Request) -> tuple[dict[str, list[str]], Topic]:
        """nsqd's getTopicFromQuery: a valid ``topic`` argument; the topic is created."""
        args = request.args()
        names = args.get("topic")
        if not names:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        name = names[0]
        if not is_valid_topic_name(name):
            raise HTTPError(400, "INVALID_TOPIC")
        return args, self.nsqd.get_topic(name)

    # -- topics ------------------------------------------------------------
    async def topic_create(self, request: Request) -> None:
        self._topic_from_query(request)

    async def topic_delete(self, request: Request) -> None:
        name = request.require("topic", "MISSING_ARG_TOPIC")
        if not self.nsqd.delete_existing_topic(name):
            raise HTTPError(404, "TOPIC_NOT_FOUND")

    async def topic_empty(self, request: Request) -> None:
        name = request.require("topic", "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(name):
            raise HTTPError(400, "INVALID_TOPIC")
        self._existing_topic(name).empty()

    async def topic_pause(self, request: Request) -> None:
        # Topic.pause() persists the metadata, so a crash cannot unpause it.
        self._existing_topic(request.require("topic", "MISSING_ARG_TOPIC")).pause()

    async def topic_unpause(self, request: Request) -> None:
        self._existing_topic(request.require("topic", "MISSING_ARG_TOPIC")).unpause()

    def _existing_topic(self, name: str) -> Topic:
        topic = self.nsqd.get_existing_topic(name)
        if topic is None:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        return topic

    # -- channels ----------------------------------------------------------
    def _topic_and_channel(self, request: Request) -> tuple[Topic, str]:
        """nsqd's getExistingTopicFromQuery (with GetTopicChannelArgs' error codes)."""
        topic_name = request.require("topic", "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic_name):
            raise HTTPError(400, "INVALID_ARG_TOPIC")
        channel_name = request.require("channel", "MISSING_ARG_CHANNEL")
        if not is_valid_channel_name(channel_name):
            raise HTTPError(400, "INVALID_ARG_CHANNEL")
        return self._existing_topic(topic_name), channel_name

    def _existing_channel(self, request: Request) -> Channel:
        topic, name = self._topic_and_channel(request)
        channel = topic.get_existing_channel(name)
        if channel is None:
            raise HTTPError(404, "CHANNEL_NOT_FOUND")
        return channel

    async def channel_create(self, request: Request) -> None:
        topic, name = self._topic_and_channel(request)
        topic.get_channel(name)

    async def channel_delete(self, request: Request) -> None:
        topic, name = self._topic_and_channel(request)
        if not topic.delete_existing_channel(name):
            raise HTTPError(404, "CHANNEL_NOT_FOUND")

    async def channel_empty(self, request: Request) -> None:
        self._existing_channel(request).empty()

    async def channel_pause(self, request: Request) -> None:
        self._existing_channel(request).pause()

    async def channel_unpause(self, request: Request) -> None:
        self._existing_channel(request).unpause()

    # -- /stats ------------------------------------------------------------
    async def stats(self, request: Request) -> object:
        args = request.args()

        def arg(name: str) -> str:
            return args.get(name, [""])[0]

        include_clients = BOOL_PARAMS.get(arg("include_clients"), True)
        include_mem = BOOL_PARAMS.get(arg("include_mem"), True)
        stats = get_stats(self.nsqd, arg("topic"), arg("channel"), include_clients=include_clients)
        memory = memory_stats() if include_mem else None
        if arg("format") == "json":
            return stats_document(self.nsqd, stats, memory)
        return render_stats_text(self.nsqd, stats.topics or [], stats.producers or [], memory)

    # -- /config -----------------------------------------------------------
    async def get_config(self, request: Request) -> object:
        return config_value(self.nsqd, request.params["opt"])

    async def put_config(self, request: Request) -> object:
        opt, opts, body = request.params["opt"], self.nsqd.options, request.body
        if not body:
            raise HTTPError(413, "INVALID_VALUE")
        if opt == "nsqlookupd_tcp_addresses":
            try:
                addresses = decode_peer_json(body, _addresses_decoder)
            except PeerJSONError:
                raise HTTPError(400, "INVALID_VALUE") from None
            opts.lookupd_tcp_addresses = addresses or []
            # nsqd stores Go's nil slice for ``null``, and GET shows it as null.
            opts.lookupd_tcp_addresses_null = addresses is None
        elif opt == "log_level":
            try:
                opts.log_level = parse_level(body.decode("utf-8", "replace"))
            except ValueError:
                raise HTTPError(400, "INVALID_VALUE") from None
            set_level(opts.log_level)
        else:
            raise HTTPError(400, "INVALID_OPTION")
        if self.on_options_changed is not None:
            self.on_options_changed()
        return config_value(self.nsqd, opt)

    # -- /debug ------------------------------------------------------------
    async def debug(self, request: Request) -> dict[str, object]:
        return debug_snapshot(self.nsqd)


def _parse_int64(raw: str) -> int | None:
    """Go's ``strconv.ParseInt(raw, 10, 64)``: None for anything it refuses."""
    try:
        return parse_int(raw, 10)
    except StrconvError:
        return None


def _split_lines(body: bytes) -> tuple[list[bytes], bool]:
    """The messages of a text ``/mpub``: its lines, without the empty ones (nsqd since 0.2.22);
    and whether they are all its lines (none was empty)."""
    lines = body.split(b"\n")
    if b"" in lines:
        return [line for line in lines if line], False
    return lines, True
