"""Router: matching, NSQ's response conventions, and its error endpoints."""

from __future__ import annotations

import logging

import msgspec
import pytest

from nsqbox.http import HTTPError, Request, Response, Router, parse_query
from nsqbox.http.router import clean_path


def _request(method: str, path: str, query: str = "", body: bytes = b"") -> Request:
    return Request(method, path + ("?" + query if query else ""), path, query, (), body)


async def _call(router: Router, method: str, path: str, query: str = "") -> Response:
    endpoint = router.resolve(method, path)
    request = msgspec.structs.replace(_request(method, path, query), params=endpoint.params)
    return await endpoint.respond(request)


class Point(msgspec.Struct):
    x: int
    y: int


@pytest.mark.parametrize(
    ("result", "body", "content_type"),
    [
        pytest.param("OK", b"OK", "text/plain; charset=utf-8", id="str"),
        pytest.param(b"\x00raw", b"\x00raw", "text/plain; charset=utf-8", id="bytes"),
        pytest.param(None, b"", None, id="none"),
        pytest.param({"a": [1]}, b'{"a":[1]}', "application/json; charset=utf-8", id="dict"),
        pytest.param(Point(1, 2), b'{"x":1,"y":2}', "application/json; charset=utf-8", id="struct"),
        pytest.param(Response(201, b"made"), b"made", None, id="response"),
    ],
)
async def test_results_become_responses_as_nsq_respond_v1(
    result: object, body: bytes, content_type: str | None
) -> None:
    router = Router()

    async def handler(request: Request) -> object:
        return result

    router.add("GET", "/x", handler)
    response = await _call(router, "GET", "/x")
    assert response.body == body
    assert dict(response.headers).get("Content-Type") == content_type


async def test_http_error_becomes_json_message() -> None:
    router = Router()

    async def handler(request: Request) -> object:
        raise HTTPError(404, "TOPIC_NOT_FOUND")

    router.add("POST", "/x", handler)
    response = await _call(router, "POST", "/x")
    assert (response.status, response.body) == (404, b'{"message":"TOPIC_NOT_FOUND"}')
    assert ("Content-Type", "application/json; charset=utf-8") in response.headers


async def test_plain_text_route_answers_errors_in_plain_text() -> None:
    router = Router()

    async def ping(request: Request) -> str:
        raise HTTPError(500, "NOK - disk full")

    router.add("GET", "/ping", ping, plain_text=True)
    response = await _call(router, "GET", "/ping")
    assert (response.status, response.body) == (500, b"NOK - disk full")


async def test_handler_crash_is_a_500_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    router = Router()

    async def handler(request: Request) -> object:
        raise ZeroDivisionError

    router.add("GET", "/boom", handler)
    with caplog.at_level(logging.ERROR, logger="nsqbox.http"):
        response = await _call(router, "GET", "/boom")
    assert (response.status, response.body) == (500, b'{"message":"INTERNAL_ERROR"}')
    assert "panic in HTTP handler GET /boom" in caplog.text


async def test_requests_are_logged_on_the_given_logger(caplog: pytest.LogCaptureFixture) -> None:
    router = Router(logger=logging.getLogger("test.router"))

    async def handler(request: Request) -> str:
        return "OK"

    router.add("GET", "/a", handler)
    router.add("GET", "/quiet", handler, log=False)
    with caplog.at_level(logging.INFO, logger="test.router"):
        await _call(router, "GET", "/a", "q=1")
        await _call(router, "GET", "/quiet")
    messages = [r.getMessage() for r in caplog.records if r.name == "test.router"]
    assert len(messages) == 1
    assert messages[0].startswith("200 GET /a?q=1 ()")


async def test_a_quick_handler_answers_as_the_handler_or_leaves_it_the_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the server tries first (Endpoint.respond_now): the route's quick handler,
    with the handler's conventions for results, errors, crashes and the log."""
    router = Router(logger=logging.getLogger("test.router"))
    calls: list[str] = []

    async def handler(request: Request) -> str:
        calls.append("handler")
        return "slow"

    def quick(request: Request) -> Response | None:
        calls.append("quick")
        if request.raw_query == "later":
            return None
        if request.raw_query == "bad":
            raise HTTPError(400, "BAD")
        if request.raw_query == "boom":
            raise ZeroDivisionError
        return Response.text("fast")

    router.add("POST", "/q", handler, quick=quick)
    router.add("GET", "/ping", handler, quick=quick, plain_text=True, log=False)
    router.add("POST", "/plain", handler)
    assert router.resolve("POST", "/plain").respond_now is None
    endpoint = router.resolve("POST", "/q")
    assert endpoint.respond_now is not None
    with caplog.at_level(logging.INFO, logger="test.router"):
        fast = endpoint.respond_now(_request("POST", "/q", "now"))
        assert endpoint.respond_now(_request("POST", "/q", "later")) is None
        bad = endpoint.respond_now(_request("POST", "/q", "bad"))
        boom = endpoint.respond_now(_request("POST", "/q", "boom"))
    assert calls == ["quick"] * 4  # None left the request untouched: the server awaits respond
    assert fast == Response.text("fast")
    assert bad is not None
    assert (bad.status, bad.body) == (400, b'{"message":"BAD"}')
    assert boom is not None
    assert (boom.status, boom.body) == (500, b'{"message":"INTERNAL_ERROR"}')
    messages = [r.getMessage() for r in caplog.records if r.name == "test.router"]
    assert [m.split(" (")[0] for m in messages if not m.startswith("panic")] == [
        "200 POST /q?now",
        "400 POST /q?bad",
        "500 POST /q?boom",
    ]
    assert "panic in HTTP handler POST /q from" in caplog.text
    assert "ZeroDivisionError" in caplog.text
    ping = router.resolve("GET", "/ping").respond_now
    assert ping is not None
    pong = ping(_request("GET", "/ping", "now"))
    assert pong == Response(200, b"fast", (("Content-Type", "text/plain; charset=utf-8"),), False)
    refused = ping(_request("GET", "/ping", "bad"))
    assert refused is not None
    assert (refused.status, refused.body, refused.nsq_header) == (400, b"BAD", False)


async def test_path_parameters_and_catch_all() -> None:
    router = Router()

    async def show(request: Request) -> object:
        return request.params

    router.add("GET", "/config/:opt", show)
    router.add("GET", "/api/topics/:topic/:channel", show)
    router.add("GET", "/static/*path", show)
    assert (await _call(router, "GET", "/config/log_level")).body == b'{"opt":"log_level"}'
    assert (await _call(router, "GET", "/api/topics/t/c")).body == b'{"topic":"t","channel":"c"}'
    assert (await _call(router, "GET", "/static/a/b.js")).body == b'{"path":"/a/b.js"}'
    assert (await _call(router, "GET", "/config/")).status == 404
    assert (await _call(router, "GET", "/api/topics/t")).status == 404
    assert (await _call(router, "GET", "/api/topics/t/c/d")).status == 404


async def test_static_routes_win_over_parameters() -> None:
    router = Router()

    async def fixed(request: Request) -> str:
        return "fixed"

    async def param(request: Request) -> str:
        return "param"

    router.add("GET", "/config/:opt", param)
    router.add("GET", "/config/special", fixed)
    assert (await _call(router, "GET", "/config/special")).body == b"fixed"
    assert (await _call(router, "GET", "/config/other")).body == b"param"


async def test_unknown_path_wrong_method_and_options() -> None:
    router = Router()

    async def handler(request: Request) -> str:
        return "OK"

    router.add("GET", "/stats", handler)
    router.add("PUT", "/stats", handler)
    missing = await _call(router, "GET", "/not_found")
    assert (missing.status, missing.body) == (404, b'{"message":"NOT_FOUND"}')
    wrong = await _call(router, "POST", "/stats")
    assert (wrong.status, wrong.body) == (405, b'{"message":"METHOD_NOT_ALLOWED"}')
    assert ("Allow", "GET, OPTIONS, PUT") in wrong.headers
    options = await _call(router, "OPTIONS", "/stats")
    assert (options.status, options.body) == (200, b"")
    assert ("Allow", "GET, OPTIONS, PUT") in options.headers


async def test_trailing_slash_redirects() -> None:
    router = Router()

    async def handler(request: Request) -> str:
        return "OK"

    router.add("GET", "/stats", handler)
    router.add("POST", "/topic/create", handler)
    router.add("GET", "/dir/", handler)
    get = await _call(router, "GET", "/stats/", "format=json")
    assert (get.status, dict(get.headers)) == (
        301,
        {"Location": "/stats?format=json", "Content-Type": "text/html; charset=utf-8"},
    )
    # Go's http.Redirect body, for GET only, without NSQ's header.
    assert get.body == b'<a href="/stats?format=json">Moved Permanently</a>.\n\n'
    assert not get.nsq_header
    post = await _call(router, "POST", "/topic/create/")
    assert (post.status, post.headers, post.body) == (307, (("Location", "/topic/create"),), b"")
    assert dict((await _call(router, "GET", "/dir")).headers)["Location"] == "/dir/"
    # Only to a route that has the method.
    assert (await _call(router, "POST", "/stats/")).status == 404


@pytest.mark.parametrize(
    ("path", "query", "location"),
    [
        ("/PING", "", "/ping"),
        ("//ping", "", "/ping"),
        ("/./ping", "", "/ping"),
        ("/a/../ping", "", "/ping"),
        ("/PING/", "", "/ping"),
        ("/Stats", "x=<a>&y", "/stats?x=<a>&y"),
        ("/CONFIG/Foo", "", "/config/Foo"),  # a parameter keeps its case
        ("/dir", "", "/dir/"),
    ],
)
async def test_fixed_paths_redirect_as_httprouter(path: str, query: str, location: str) -> None:
    router = Router()

    async def handler(request: Request) -> str:
        return "OK"

    for pattern in ("/ping", "/stats", "/config/:opt", "/dir/"):
        router.add("GET", pattern, handler)
    response = await _call(router, "GET", path, query)
    assert (response.status, dict(response.headers)["Location"]) == (301, location)
    escaped = location.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert response.body == f'<a href="{escaped}">Moved Permanently</a>.\n\n'.encode()
    # not for another method, nor to a route of another method
    assert (await _call(router, "POST", path, query)).status in (404, 405)


def test_clean_path() -> None:
    assert clean_path("") == "/"
    assert clean_path("//a//b/") == "/a/b/"
    assert clean_path("/../a/./b/..") == "/a"
    assert clean_path("a") == "/a"
    assert clean_path("/") == "/"


def test_route_errors_and_body_limits() -> None:
    router = Router(max_body_size=100, too_large=HTTPError(413, "BODY_TOO_BIG"))

    async def handler(request: Request) -> str:
        return "OK"

    router.add("POST", "/a", handler)
    router.add("POST", "/b", handler, max_body_size=7, too_large=HTTPError(413, "MSG_TOO_BIG"))
    with pytest.raises(ValueError, match="duplicate route"):
        router.add("POST", "/a", handler)
    with pytest.raises(ValueError, match="must start with"):
        router.add("GET", "a", handler)
    with pytest.raises(ValueError, match="catch-all"):
        router.add("GET", "/*x/y", handler)
    a, b = router.resolve("POST", "/a"), router.resolve("POST", "/b")
    assert (a.max_body_size, a.too_large.body) == (100, b'{"message":"BODY_TOO_BIG"}')
    assert (b.max_body_size, b.too_large.body) == (7, b'{"message":"MSG_TOO_BIG"}')
    # A refused request keeps its answer even if its body is too long.
    assert router.resolve("GET", "/nope").too_large.status == 404


async def test_decorator_form() -> None:
    router = Router()

    @router.route("GET", "/ping", plain_text=True)
    async def ping(request: Request) -> str:
        return "OK"

    assert (await _call(router, "GET", "/ping")).body == b"OK"


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        pytest.param("", {}, id="empty"),
        pytest.param("a=1&b=2&a=3", {"a": ["1", "3"], "b": ["2"]}, id="repeated"),
        pytest.param("topic=&x", {"topic": [""], "x": [""]}, id="blank"),
        pytest.param("t=a+b%2Bc&&", {"t": ["a b+c"]}, id="escapes"),
    ],
)
def test_parse_query(raw: str, parsed: dict[str, list[str]]) -> None:
    assert parse_query(raw) == parsed


@pytest.mark.parametrize("raw", ["a=%zz", "a=1;b=2", "a=%4"])
def test_parse_query_refuses_what_go_refuses(raw: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        parse_query(raw)


def test_request_args_answer_invalid_request() -> None:
    request = _request("GET", "/stats", "topic=%zz")
    with pytest.raises(HTTPError) as info:
        request.arg("topic")
    assert (info.value.status, info.value.message) == (400, "INVALID_REQUEST")
