"""A small router in the manner of julienschmidt/httprouter, which NSQ's services use.

Routes are ``(method, pattern)`` pairs. A pattern is a path whose segments may be
``:name`` (one segment) or, last, ``*name`` (the rest of the path); the matched
values reach the handler as ``request.params``. As in httprouter (with NSQ's
settings):

* an unknown path answers ``404 {"message":"NOT_FOUND"}``;
* a known path with another method answers ``405 {"message":"METHOD_NOT_ALLOWED"}``
  with an ``Allow`` header, and ``OPTIONS`` answers ``200`` with ``Allow``;
* a path that matches a route of its method only with or without a trailing
  slash, or only once cleaned (``//``, ``.``, ``..``) and compared without
  regard to case, is redirected to the route's path (301 for GET, 307
  otherwise), with Go's ``http.Redirect`` body.

Answers carry NSQ's ``X-NSQ-Content-Type`` header as nsqd's do: not from
plain-text routes, ``OPTIONS`` or redirects (see :mod:`nsqbox.http.messages`).

A handler is ``async def handler(request) -> result``; the result becomes the
response as NSQ's ``RespondV1`` does (see :meth:`Response.v1`), and an
:class:`HTTPError` it raises becomes NSQ's JSON error. A hot route may add a
quick handler, a plain function tried first for each request: it answers the
common case without a coroutine, or returns None having done nothing, and the
handler answers (nsqd's ``/pub``: a known topic with nothing to wait for). Each route also says how
large a body it accepts and what to answer when a body is larger, because the
server must decide that before it reads the body (nsqd's ``/pub`` answers
``413 MSG_TOO_BIG`` where ``/mpub`` answers ``413 BODY_TOO_BIG``).

Example (what the nsqlookupd service does)::

    router = Router()

    @router.route("GET", "/lookup")
    async def lookup(request: Request) -> object:
        topic = request.require("topic", "MISSING_ARG_TOPIC")  # 400 when absent
        if topic not in registry:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        return {"channels": registry[topic], "producers": []}  # JSON

    await serve_http(router, listeners)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec

from nsqbox.http.local_guard import LocalGuard, local_guard
from nsqbox.http.messages import HTTPError, Request, Response
from nsqbox.http.redirects import clean_path, redirect

log = logging.getLogger("nsqbox.http")

#: A route's handler: the request in, a ``RespondV1``-style result out.
Handler = Callable[[Request], Awaitable[object]]
#: A route's optional quick handler: the handler's answer without a coroutine,
#: for the cases that need no wait, or None (having done nothing) to leave the
#: request to the handler.
QuickHandler = Callable[[Request], Response | None]

#: How much body the router accepts for a request it will refuse (404, 405),
#: so the connection can be kept; Go's net/http drains up to 256 KiB the same way.
DISCARD_BODY_LIMIT = 256 * 1024

DEFAULT_MAX_BODY_SIZE = 1024 * 1024

#: Where nsqbox's own routes live on nsqd and nsqlookupd: every route under it is nsqbox-only.
NSQBOX_PATH = "/nsqbox"


class Endpoint(msgspec.Struct, frozen=True):
    """What the server learns about a request from its head, before the body.

    ``respond`` answers the complete request (it never raises an
    :class:`HTTPError`); ``too_large`` is sent instead, and the connection
    closed, when the body is longer than ``max_body_size``. ``respond_now``,
    when there is one, is tried first: it answers at once, as ``respond``
    would, or returns None having done nothing, and then ``respond`` answers.
    """

    respond: Callable[[Request], Awaitable[Response]]
    params: dict[str, str] = msgspec.field(default_factory=dict)
    max_body_size: int = DISCARD_BODY_LIMIT
    too_large: Response = msgspec.field(
        default_factory=lambda: Response.error(HTTPError(413, "BODY_TOO_BIG"))
    )
    respond_now: Callable[[Request], Response | None] | None = None


class App(Protocol):
    """Anything :func:`nsqbox.http.serve_http` can serve: it resolves a request head."""

    def resolve(self, method: str, path: str) -> Endpoint:
        """The endpoint for ``method`` on the decoded ``path``."""
        ...


class _Route(msgspec.Struct, frozen=True):
    method: str
    pattern: str
    segments: tuple[str, ...]
    handler: Handler
    max_body_size: int
    too_large: Response
    plain_text: bool
    log: bool
    logger: logging.Logger
    quick: QuickHandler | None
    #: The Host and Origin check this route makes first; None when it makes none.
    guard: LocalGuard | None

    async def respond(self, request: Request) -> Response:
        """Run the handler and turn its result or error into the response."""
        started = time.perf_counter() if self.log else 0.0
        try:
            response = self._response(await self.handler(request))
        except Exception as exc:
            response = self._failed(exc, request)
        if self.log:
            _log_request(self.logger, request, response.status, started)
        return response

    def respond_now(self, request: Request) -> Response | None:
        """:meth:`respond` by the quick handler; None when it leaves the request to ``respond``."""
        assert self.quick is not None
        started = time.perf_counter() if self.log else 0.0
        try:
            result = self.quick(request)
            if result is None:
                return None
            response = self._response(result)
        except Exception as exc:
            response = self._failed(exc, request)
        if self.log:
            _log_request(self.logger, request, response.status, started)
        return response

    async def respond_guarded(self, request: Request) -> Response:
        """:meth:`respond`, once the guard let the request in (else its 403)."""
        refused = self._refused(request)
        return refused if refused is not None else await self.respond(request)

    def respond_now_guarded(self, request: Request) -> Response | None:
        """:meth:`respond_now`, once the guard let the request in (else its 403)."""
        refused = self._refused(request)
        return refused if refused is not None else self.respond_now(request)

    def _refused(self, request: Request) -> Response | None:
        """The 403 for a request the guard refuses (a foreign Host or Origin), or None.

        The refusal is in the request log (INFO) like any answer; why, at DEBUG only: a
        page that loops on refused requests must not flood the log with warnings.
        """
        assert self.guard is not None
        host, origin = request.header("Host"), request.header("Origin")
        code = self.guard.refusal(host, origin)
        if code is None:
            return None
        if self.log:
            _log_request(self.logger, request, 403, time.perf_counter())
        self.logger.debug(
            "refused %s %s from %s: %s (Host %.100r, Origin %.100r)",
            request.method,
            self.pattern,
            request.remote_address,
            code,
            host,
            origin,
        )
        return _error_response(HTTPError(403, code), self.plain_text)

    def _response(self, result: object) -> Response:
        """The handler's result as its response."""
        if self.plain_text and not isinstance(result, str | bytes | Response):
            raise TypeError(f"plain-text route {self.pattern} returned {type(result)}")
        response = Response.v1(result)
        if self.plain_text:  # nsqd's PlainText decorator sends no NSQ header
            response = msgspec.structs.replace(response, nsq_header=False)
        return response

    def _failed(self, exc: Exception, request: Request) -> Response:
        """The response to a handler that raised ``exc``."""
        if isinstance(exc, HTTPError):
            return _error_response(exc, self.plain_text)
        # nsqd's PanicHandler: the client gets a 500, the server lives on.
        self.logger.error(
            "panic in HTTP handler %s %s from %s",
            self.method,
            self.pattern,
            request.remote_address,
            exc_info=exc,
        )
        return Response.error(HTTPError(500, "INTERNAL_ERROR"))


class Router:
    """Routes requests to handlers by method and path pattern (see the module doc).

    ``max_body_size`` and ``too_large`` are the defaults for routes that do not
    set their own. A route added with ``plain_text=True`` answers errors as
    plain text with their status (NSQ's ``PlainText`` decorator, used by
    ``/ping``) instead of JSON. Each request is logged at INFO on ``logger``
    (default ``nsqbox.http``) as nsqd logs them; ``log=False`` keeps a hot
    route (``/pub``) out of that log, as nsqd does.

    nsqbox-only routes (added with ``nsqbox_only=True``, and every route under
    :data:`NSQBOX_PATH`) answer only requests ``guard`` lets in (a Host on its
    allowlist, no foreign Origin; else ``403 {"message":"HOST_NOT_ALLOWED"}`` or
    ``ORIGIN_NOT_ALLOWED``), and with ``nsqbox_routes=False`` (a service with
    ``--auth-http-address``) they are not served at all: 404, as an unknown path.
    The other routes are NSQ's own: they answer any Host, as real nsqd does, unless
    ``guard.guard_nsq_routes`` (``--allowed-host`` given, or the admin service).
    The default guard allows IP literals, ``localhost`` and this machine's hostname.
    """

    def __init__(
        self,
        *,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        too_large: HTTPError | None = None,
        logger: logging.Logger | None = None,
        guard: LocalGuard | None = None,
        nsqbox_routes: bool = True,
    ) -> None:
        self.logger = logger or log
        self.guard = guard if guard is not None else local_guard()
        self.nsqbox_routes = nsqbox_routes
        self.max_body_size = max_body_size
        self.too_large = too_large or HTTPError(413, "BODY_TOO_BIG")
        # Static paths are looked up directly; patterns with parameters in order.
        self._static: dict[str, dict[str, _Route]] = {}
        # Static paths by their lower-case form, for redirecting a path that
        # differs only in case (httprouter's RedirectFixedPath).
        self._static_folded: dict[str, str] = {}
        self._dynamic: list[tuple[tuple[str, ...], dict[str, _Route]]] = []
        # The endpoints of static routes, by (method, path), as resolve() made them.
        self._resolved: dict[tuple[str, str], Endpoint] = {}

    def add(
        self,
        method: str,
        pattern: str,
        handler: Handler,
        *,
        max_body_size: int | None = None,
        too_large: HTTPError | None = None,
        plain_text: bool = False,
        log: bool = True,
        quick: QuickHandler | None = None,
        nsqbox_only: bool = False,
    ) -> None:
        """Route ``method`` requests for ``pattern`` to ``handler``.

        ``quick``, if given, is tried first for each request: a hot route's
        common case answered without a coroutine (see :data:`QuickHandler`).
        ``nsqbox_only`` (implied under :data:`NSQBOX_PATH`) marks a route of
        nsqbox's own: always guarded, and not added without ``nsqbox_routes``.
        Raises ValueError for a malformed pattern or a duplicate route.
        """
        if not pattern.startswith("/"):
            raise ValueError(f"pattern must start with '/': {pattern!r}")
        nsqbox_only = nsqbox_only or pattern.split("/")[1] == NSQBOX_PATH[1:]
        if nsqbox_only and not self.nsqbox_routes:
            return  # turned off (--auth-http-address): 404, as an unknown path
        segments = tuple(pattern.split("/")[1:])
        for i, segment in enumerate(segments):
            if segment.startswith("*") and i != len(segments) - 1:
                raise ValueError(f"catch-all must be the last segment: {pattern!r}")
        error = too_large or self.too_large
        route = _Route(
            method=method.upper(),
            pattern=pattern,
            segments=segments,
            handler=handler,
            max_body_size=self.max_body_size if max_body_size is None else max_body_size,
            too_large=_error_response(error, plain_text),
            plain_text=plain_text,
            log=log,
            logger=self.logger,
            quick=quick,
            guard=self.guard if nsqbox_only or self.guard.guard_nsq_routes else None,
        )
        if any(s[:1] in (":", "*") for s in segments):
            methods = next((m for segs, m in self._dynamic if segs == segments), None)
            if methods is None:
                methods = {}
                self._dynamic.append((segments, methods))
        else:
            methods = self._static.setdefault(pattern, {})
            self._static_folded.setdefault(pattern.lower(), pattern)
        if route.method in methods:
            raise ValueError(f"duplicate route {route.method} {pattern}")
        methods[route.method] = route
        self._resolved.clear()

    def route(
        self,
        method: str,
        pattern: str,
        *,
        max_body_size: int | None = None,
        too_large: HTTPError | None = None,
        plain_text: bool = False,
        log: bool = True,
        quick: QuickHandler | None = None,
        nsqbox_only: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`add` (same keyword options)."""

        def register(handler: Handler) -> Handler:
            self.add(
                method,
                pattern,
                handler,
                max_body_size=max_body_size,
                too_large=too_large,
                plain_text=plain_text,
                log=log,
                quick=quick,
                nsqbox_only=nsqbox_only,
            )
            return handler

        return register

    def resolve(self, method: str, path: str) -> Endpoint:
        """The endpoint for a request head; unknown paths and methods get error endpoints."""
        resolved = self._resolved.get((method, path))
        if resolved is not None:
            return resolved
        found = self._lookup(path)
        methods: dict[str, _Route] = {}
        if found is not None:
            methods, params = found
            route = methods.get(method)
            if route is not None:
                guarded = route.guard is not None
                respond_now = route.respond_now_guarded if guarded else route.respond_now
                endpoint = Endpoint(
                    respond=route.respond_guarded if guarded else route.respond,
                    params=params,
                    max_body_size=route.max_body_size,
                    too_large=route.too_large,
                    respond_now=None if route.quick is None else respond_now,
                )
                if not params and path in self._static:  # the same endpoint every time
                    self._resolved[method, path] = endpoint
                return endpoint
        if method != "CONNECT" and path != "/":
            fixed = self._fixed_path(method, path)
            if fixed is not None and fixed != path:
                return Endpoint(respond=redirect(fixed, 301 if method == "GET" else 307))
        if found is not None:
            allow = ", ".join(sorted({*methods, "OPTIONS"}))
            if method == "OPTIONS":
                return _fixed(Response(200, b"", (("Allow", allow),), nsq_header=False))
            error = Response.error(HTTPError(405, "METHOD_NOT_ALLOWED"))
            return _fixed(_with_header(error, "Allow", allow), self.logger)
        return _fixed(Response.error(HTTPError(404, "NOT_FOUND")), self.logger)

    def _fixed_path(self, method: str, path: str) -> str | None:
        """The path of ``method``'s route that ``path`` means, as httprouter finds it.

        First the path with its trailing slash added or removed; then the
        cleaned path, case-insensitively, as it is or with that slash fixed.
        """
        other = path[:-1] if path.endswith("/") else path + "/"
        found = self._lookup(other)
        if found is not None and method in found[0]:
            return other
        cleaned = clean_path(path)
        for candidate in (cleaned, cleaned[:-1] if cleaned.endswith("/") else cleaned + "/"):
            fixed = self._lookup_folded(method, candidate)
            if fixed is not None:
                return fixed
        return None

    def _lookup_folded(self, method: str, path: str) -> str | None:
        """The path of ``method``'s route matching ``path`` regardless of case, or None.

        Parameter values keep their case; the route's own segments take the
        route's.
        """
        static = self._static_folded.get(path.lower())
        if static is not None and method in self._static[static]:
            return static
        parts = path.split("/")[1:]
        for segments, methods in self._dynamic:
            if method not in methods:
                continue
            params = _match(segments, parts, fold=True)
            if params is not None:
                out = []
                for i, segment in enumerate(segments):
                    if segment.startswith("*"):
                        out.append("/".join(parts[i:]))
                        break
                    out.append(parts[i] if segment.startswith(":") else segment)
                return "/" + "/".join(out)
        return None

    def _lookup(self, path: str) -> tuple[dict[str, _Route], dict[str, str]] | None:
        methods = self._static.get(path)
        if methods is not None:
            return methods, {}
        parts = path.split("/")[1:]
        for segments, methods in self._dynamic:
            params = _match(segments, parts)
            if params is not None:
                return methods, params
        return None


def _match(
    segments: tuple[str, ...], parts: list[str], *, fold: bool = False
) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for i, segment in enumerate(segments):
        if segment.startswith("*"):
            # httprouter's catch-all value keeps its leading slash.
            params[segment[1:]] = "/" + "/".join(parts[i:])
            return params
        if i >= len(parts):
            return None
        if segment.startswith(":"):
            if not parts[i]:
                return None
            params[segment[1:]] = parts[i]
        elif segment != parts[i] and not (fold and segment.lower() == parts[i].lower()):
            return None
    return params if len(parts) == len(segments) else None


def _error_response(error: HTTPError, plain_text: bool) -> Response:
    if plain_text and error.body is None:
        return msgspec.structs.replace(Response.text(error.message, error.status), nsq_header=False)
    return Response.error(error)


def _with_header(response: Response, name: str, value: str) -> Response:
    return Response(response.status, response.body, (*response.headers, (name, value)))


def _log_request(logger: logging.Logger, request: Request, status: int, started: float) -> None:
    if logger.isEnabledFor(logging.INFO):
        elapsed = time.perf_counter() - started
        logger.info(
            "%d %s %s (%s) %.3fms",
            status,
            request.method,
            request.target,
            request.remote_address,
            elapsed * 1000,
        )


def _fixed(response: Response, logger: logging.Logger | None = None) -> Endpoint:
    async def respond(request: Request) -> Response:
        if logger is not None:
            _log_request(logger, request, response.status, time.perf_counter())
        return response

    return Endpoint(respond=respond, too_large=response)
