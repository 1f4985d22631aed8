"""nsqd's auth client: ask an auth server what a client's secret may do, and remember it.

The protocol (NSQ's auth spec; internal/auth/authorizations.go in v1.3.0): with
``--auth-http-address`` set, a client sends ``AUTH <secret>`` and nsqd asks one
of the auth servers (starting at a random one, trying each in turn)::

    GET http://<addr>/auth?common_name=&remote_ip=&secret=&tls=true|false

(an address containing ``://`` is used as the whole URL instead). The reply::

    {"ttl": 3600, "identity": "...", "identity_url": "...",
     "authorizations": [{"topic": "<regex>", "channels": ["<regex>", ...],
                         "permissions": ["subscribe", "publish"]}]}

is kept for ``ttl`` seconds; SUB, PUB, MPUB and DPUB check the topic (and for
SUB the channel) against it and ask again once it expired. Regexes match
anywhere in the name (Go's ``MatchString``), so anchor them to match whole
names. As in v1.3.0, a publish is allowed only by an authorization with the
``publish`` permission whose channel list has a pattern matching the empty
channel name (``".*"``, say).

``--auth-http-request-method post`` (added to NSQ after v1.3.0) sends the same
URL with POST.

Only the TCP protocol is checked. The HTTP API (``/pub``, ``/mpub`` and the
topic and channel actions) has no notion of a client secret and publishes
without any check, exactly as nsqd's does; protect it by other means
(``--http-address=""``, a firewall, or HTTPS with client certificates).
"""

from __future__ import annotations

import functools
import json
import logging
import random
import urllib.parse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

import msgspec
import trio

from ...wire.errors import NSQError, go_quote
from ...wire.peer_json import PeerJSONError, decode_peer_json
from .tls import client_context

if TYPE_CHECKING:
    import httpx
    import re2

    from ..domain.options import NSQDOptions

__all__ = [
    "AuthClient",
    "AuthError",
    "AuthState",
    "Authorization",
    "ConnectionAuth",
    "open_auth_client",
]

logger = logging.getLogger("nsqbox.nsqd")

#: nsqd's http_api client asks for NSQ's V1 response format.
ACCEPT_V1: Final = "application/vnd.nsq; version=1.0"
PERMISSIONS: Final = frozenset({"subscribe", "publish"})


class AuthError(Exception):
    """No auth server gave a usable answer (nsqd tells the client only ``E_AUTH_FAILED``)."""


class Authorization(msgspec.Struct, frozen=True):
    """One grant: a topic pattern, channel patterns, and the permissions they carry."""

    topic: str = ""
    channels: list[str] = msgspec.field(default_factory=list)
    permissions: list[str] = msgspec.field(default_factory=list)


class _Reply(msgspec.Struct, frozen=True):
    ttl: int = 0
    authorizations: list[Authorization] | None = None
    identity: str = ""
    identity_url: str = ""


_reply_decoder = msgspec.json.Decoder(_Reply)


class _TLSRequired(msgspec.Struct, frozen=True):
    """The body of an auth server's 403 TLS_REQUIRED: the HTTPS port to ask instead."""

    https_port: int


_tls_required_decoder = msgspec.json.Decoder(_TLSRequired)


class _Pattern(Protocol):
    def search(self, text: str) -> object: ...


@dataclass(frozen=True)
class _Rule:
    topic: _Pattern
    channels: tuple[_Pattern, ...]
    subscribe: bool
    publish: bool

    def allows(self, topic: str, channel: str) -> bool:
        # Authorization.IsAllowed: the permission first, then the topic, then any channel
        if not (self.subscribe if channel else self.publish):
            return False
        if not self.topic.search(topic):
            return False
        return any(pattern.search(channel) for pattern in self.channels)


@dataclass(frozen=True)
class AuthState:
    """An auth server's answer for one client: who it is and what it may do, until ``expires``.

    ``expires`` is on the server's monotonic clock (``NSQD.now``).
    """

    identity: str
    identity_url: str
    authorizations: tuple[Authorization, ...]
    ttl: int
    expires: float
    _rules: tuple[_Rule, ...] = field(default=(), repr=False)

    def is_expired(self, now: float) -> bool:
        """True once the ttl has run out (the next check asks the auth server again)."""
        return now > self.expires

    def is_allowed(self, topic: str, channel: str = "") -> bool:
        """May the client subscribe to ``topic``/``channel`` (publish when ``channel`` is empty)?"""
        return any(rule.allows(topic, channel) for rule in self._rules)


@functools.cache
def _re2_options() -> re2.Options:
    # imported on first use: a server without auth never loads the library (about 3 MB)
    import re2

    options = re2.Options()
    options.log_errors = False  # a bad pattern is the auth server's error: we log it once
    return options


def _compile(pattern: str, what: str) -> _Pattern:
    # Go's regexp is RE2: the same syntax, and matching in linear time, so no pattern an auth
    # server sends can make one permission check freeze the server (Python's re backtracks).
    options = _re2_options()
    import re2

    try:
        compiled: _Pattern = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args else str(exc)
        raise AuthError(f"unable to compile {what} {json.dumps(pattern)} {reason}") from None
    return compiled


def parse_reply(body: bytes, now: float) -> AuthState:
    """Validate an auth server's JSON reply as nsqd does; :class:`AuthError` if unusable."""
    try:
        reply = decode_peer_json(body, _reply_decoder)
    except PeerJSONError as exc:
        raise AuthError(str(exc)) from None
    rules = []
    authorizations = tuple(reply.authorizations or ())
    for grant in authorizations:
        for permission in grant.permissions:
            if permission not in PERMISSIONS:
                raise AuthError(f"unknown permission {permission}")
        rules.append(
            _Rule(
                topic=_compile(grant.topic, "topic"),
                channels=tuple(_compile(c, "channel") for c in grant.channels),
                subscribe="subscribe" in grant.permissions,
                publish="publish" in grant.permissions,
            )
        )
    if reply.ttl <= 0:
        raise AuthError(f"invalid TTL {reply.ttl} (must be >0)")
    return AuthState(
        identity=reply.identity,
        identity_url=reply.identity_url,
        authorizations=authorizations,
        ttl=reply.ttl,
        expires=now + reply.ttl,
        _rules=tuple(rules),
    )


def auth_url(address: str, *, remote_ip: str, tls: bool, secret: bytes, common_name: str) -> str:
    """The query URL for one auth server address (Go's ``url.Values.Encode``: sorted keys).

    ``secret`` is the AUTH body's raw bytes, percent-encoded byte for byte as Go's
    ``url.QueryEscape`` does, whether or not they are UTF-8.
    """
    values: dict[str, str | bytes] = {
        "remote_ip": remote_ip,
        "tls": "true" if tls else "false",
        "secret": secret,
        "common_name": common_name,
    }
    query = urllib.parse.urlencode(sorted(values.items()))
    if "://" in address:
        return f"{address}?{query}"
    return f"http://{address}/auth?{query}"


def _https_url(url: str, body: bytes) -> str:
    """nsqd's ``httpsEndpoint``: the same URL on the HTTPS port a 403 TLS_REQUIRED names."""
    try:
        port = decode_peer_json(body, _tls_required_decoder).https_port
    except PeerJSONError as exc:
        raise AuthError(f"got response 403 {body!r}") from exc
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return urllib.parse.urlunsplit(parts._replace(scheme="https", netloc=f"{host}:{port}"))


class AuthClient:
    """Asks the configured auth servers about secrets (nsqd's ``QueryAnyAuthd``).

    ``http`` is owned by the caller (see :func:`open_auth_client`); ``now``
    is the clock ``AuthState.expires`` is measured on.
    """

    def __init__(
        self, options: NSQDOptions, http: httpx.AsyncClient, *, now: Callable[[], float]
    ) -> None:
        self.options = options
        self.http = http
        self.now = now

    async def query(
        self, *, remote_ip: str, tls: bool, common_name: str, secret: bytes
    ) -> AuthState:
        """The first usable answer from the auth servers, starting at a random one."""
        addresses = list(self.options.auth_http_addresses)
        if not addresses:
            raise AuthError("no auth server configured")
        start = random.randrange(len(addresses))
        errors: list[str] = []
        for i in range(len(addresses)):
            address = addresses[(start + i) % len(addresses)]
            url = auth_url(
                address, remote_ip=remote_ip, tls=tls, secret=secret, common_name=common_name
            )
            try:
                return parse_reply(await self._fetch(url), self.now())
            except AuthError as exc:
                errors.append(f"failed to auth against {address} - {exc}")
        raise AuthError("; ".join(errors))

    async def _fetch(self, url: str) -> bytes:
        from ...net.peer_http import fetch  # httpx loads only with an auth server

        method = "POST" if self.options.auth_http_request_method == "post" else "GET"
        # http.Client's Timeout bounds the whole exchange, redirect to HTTPS included
        with trio.move_on_after(self.options.http_client_request_timeout) as scope:
            try:
                # the reply read whole but bounded (nsqbox.net.peer_http: 16 MiB)
                response = await fetch(self.http, method, url, headers={"Accept": ACCEPT_V1})
                if response.status_code == 403 and not url.startswith("https"):
                    url = _https_url(url, response.content)
                    response = await fetch(self.http, method, url, headers={"Accept": ACCEPT_V1})
            except httpx_errors() as exc:
                raise AuthError(f"{type(exc).__name__}: {exc}") from exc
        if scope.cancelled_caught:
            raise AuthError(f"{method} {url}: timeout")
        if response.status_code != 200:
            raise AuthError(
                f"got response {response.status_code} {response.reason_phrase} {response.content!r}"
            )
        return response.content


@asynccontextmanager
async def open_auth_client(
    options: NSQDOptions, *, now: Callable[[], float]
) -> AsyncIterator[AuthClient | None]:
    """An :class:`AuthClient` for ``options`` (None without ``--auth-http-address``).

    One HTTP connection pool serves every client's queries; it closes on exit.
    """
    if not options.auth_http_addresses:
        yield None
        return
    import httpx  # only with --auth-http-address: keeps it off the start-up path

    timeout = httpx.Timeout(
        options.http_client_request_timeout, connect=options.http_client_connect_timeout
    )
    async with httpx.AsyncClient(timeout=timeout, verify=client_context(options)) as http:
        yield AuthClient(options, http, now=now)


class _AuthResponse(msgspec.Struct):
    """nsqd's reply to a successful AUTH."""

    identity: str
    identity_url: str
    permission_count: int


class ConnectionAuth:
    """One connection's authorization: its secret, the auth server's answer, CheckAuth.

    The protocol handler decides *when* to await; this object decides what
    nsqd answers. Errors are nsqd's fatal ``NSQError``s; what went wrong with
    an auth server is logged, never told to the client.
    """

    def __init__(self, client: AuthClient | None, *, remote_ip: str, peer: object) -> None:
        self.client = client
        self.remote_ip = remote_ip
        self.peer = peer
        self.secret = b""
        #: The auth server's last answer (None before AUTH).
        self.state: AuthState | None = None

    def has_authorizations(self) -> bool:
        """nsqd's HasAuthorizations: an answer with at least one authorization."""
        return self.state is not None and bool(self.state.authorizations)

    async def authenticate(self, secret: bytes, *, tls: bool, common_name: str) -> bytes:
        """AUTH: ask the auth server about ``secret``; the JSON reply for the client."""
        self.secret = secret
        await self._query(tls, common_name)
        state = self.state
        assert state is not None
        if not state.authorizations:
            raise NSQError("E_UNAUTHORIZED", "AUTH no authorizations found")
        return msgspec.json.encode(
            _AuthResponse(state.identity, state.identity_url, len(state.authorizations))
        )

    def check(self, cmd: str, topic: str, channel: str, now: float) -> bool:
        """CheckAuth from the cached answer: True if allowed, False if it expired.

        After False, :meth:`refresh` asks again and finishes the check.
        """
        state = self.state
        if state is None or not state.authorizations:
            raise NSQError("E_AUTH_FIRST", f"AUTH required before {cmd}")
        if state.is_expired(now):
            return False
        if not state.is_allowed(topic, channel):
            raise _unauthorized(cmd, topic, channel)
        return True

    async def refresh(
        self, cmd: str, topic: str, channel: str, *, tls: bool, common_name: str
    ) -> None:
        """CheckAuth after the answer expired: ask the auth server again, then check."""
        await self._query(tls, common_name)
        assert self.state is not None
        if not self.state.is_allowed(topic, channel):
            raise _unauthorized(cmd, topic, channel)

    async def _query(self, tls: bool, common_name: str) -> None:
        try:
            if self.client is None:
                raise AuthError("no auth client")
            self.state = await self.client.query(
                remote_ip=self.remote_ip, tls=tls, common_name=common_name, secret=self.secret
            )
        except AuthError as err:
            logger.warning("PROTOCOL(V2): [%s] AUTH failed %s", self.peer, err)
            raise NSQError("E_AUTH_FAILED", "AUTH failed") from None


def _unauthorized(cmd: str, topic: str, channel: str) -> NSQError:
    quoted = f"{go_quote(topic.encode())} {go_quote(channel.encode())}"
    return NSQError("E_UNAUTHORIZED", f"AUTH failed for {cmd} on {quoted}")


def httpx_errors() -> tuple[type[Exception], ...]:
    """httpx's request errors (httpx is imported once an auth server is configured)."""
    import httpx

    return (httpx.HTTPError, httpx.InvalidURL)
