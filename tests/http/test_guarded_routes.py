"""The router's guard: which routes ask the Host and Origin check, and which are left out.

The end-to-end behaviour (real boxes, real sockets) is in
``tests/reliability/test_local_surfaces.py``; here the router alone, to pin down what
resolves to what: unguarded routes get the very functions they got before the guard
existed (the /pub hot path does no extra work), guarded ones the guard first.
"""

from __future__ import annotations

import logging

import msgspec
import pytest

from nsqbox.http import Request, Response, Router
from nsqbox.http.local_guard import local_guard


def _request(method: str, path: str, **headers: str) -> Request:
    pairs = tuple((k.encode(), v.encode()) for k, v in headers.items())
    return Request(method, path, path, "", pairs, b"x")


async def _call(router: Router, method: str, path: str, **headers: str) -> Response:
    endpoint = router.resolve(method, path)
    request = msgspec.structs.replace(_request(method, path, **headers), params=endpoint.params)
    return await endpoint.respond(request)


async def _ok(request: Request) -> object:
    return "OK"


def _quick(request: Request) -> Response | None:
    return Response.text("quick")


def _router(**options: object) -> Router:
    router = Router(**options)  # type: ignore[arg-type]
    router.add("POST", "/pub", _ok, quick=_quick)
    router.add("GET", "/nsqbox/faults", _ok)
    router.add("GET", "/nsqbox/journal/:id", _ok)  # any route under /nsqbox, present or future
    router.add("POST", "/api/faults/crash", _ok, nsqbox_only=True)
    return router


def test_an_unguarded_route_resolves_to_its_plain_functions() -> None:
    endpoint = _router().resolve("POST", "/pub")
    assert endpoint.respond.__name__ == "respond"
    assert endpoint.respond_now is not None
    assert endpoint.respond_now.__name__ == "respond_now"


@pytest.mark.parametrize("path", ["/nsqbox/faults", "/nsqbox/journal/7", "/api/faults/crash"])
async def test_nsqbox_routes_refuse_a_foreign_host_or_origin(path: str) -> None:
    router = _router()
    method = "POST" if path.startswith("/api") else "GET"
    host = await _call(router, method, path, Host="evil.example")
    assert (host.status, host.body) == (403, b'{"message":"HOST_NOT_ALLOWED"}')
    origin = await _call(router, method, path, Host="127.0.0.1:1", Origin="http://evil.example")
    assert (origin.status, origin.body) == (403, b'{"message":"ORIGIN_NOT_ALLOWED"}')
    same = await _call(router, method, path, Host="127.0.0.1:1", Origin="http://127.0.0.1:1")
    assert (same.status, same.body) == (200, b"OK")
    assert (await _call(router, method, path)).status == 200  # HTTP/1.0, no Host


async def test_nsq_routes_answer_any_host_until_allowed_hosts_are_given() -> None:
    open_router = _router()
    assert (await _call(open_router, "POST", "/pub", Host="evil.example")).status == 200
    guarded = _router(guard=local_guard(["box.test"]))
    endpoint = guarded.resolve("POST", "/pub")
    assert endpoint.respond_now is not None
    refused = endpoint.respond_now(_request("POST", "/pub", Host="evil.example"))
    assert refused is not None
    assert (refused.status, refused.body) == (403, b'{"message":"HOST_NOT_ALLOWED"}')
    allowed = endpoint.respond_now(_request("POST", "/pub", Host="box.test:4151"))
    assert allowed is not None
    assert allowed.body == b"quick"


@pytest.mark.parametrize("path", ["/nsqbox/faults", "/nsqbox/journal/7", "/api/faults/crash"])
async def test_without_nsqbox_routes_they_are_unknown_paths(path: str) -> None:
    router = _router(nsqbox_routes=False)
    response = await _call(router, "POST" if path.startswith("/api") else "GET", path)
    assert (response.status, response.body) == (404, b'{"message":"NOT_FOUND"}')
    assert (await _call(router, "POST", "/pub")).status == 200


async def test_a_refusal_is_in_the_request_log_and_why_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="nsqbox.http")
    await _call(_router(), "GET", "/nsqbox/faults", Host="evil.example" + "x" * 500)
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "nsqbox.http"]
    assert [level for level, _ in logged] == [logging.INFO, logging.DEBUG]
    assert logged[0][1].startswith("403 GET /nsqbox/faults")
    assert "HOST_NOT_ALLOWED" in logged[1][1]
    assert len(logged[1][1]) < 300


async def test_a_plain_text_route_is_refused_in_plain_text() -> None:
    router = Router(guard=local_guard(every_route=True))
    router.add("GET", "/ping", _ok, plain_text=True)
    response = await _call(router, "GET", "/ping", Host="evil.example")
    assert (response.status, response.body) == (403, b"HOST_NOT_ALLOWED")
