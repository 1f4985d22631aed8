"""The box's HTTP surfaces against a browser: cross-site requests, DNS rebinding, auth mode.

A page the developer visits can send simple cross-site requests (a body-less POST needs no
preflight) to 127.0.0.1, and with DNS rebinding read answers under its own name. Every
request here goes through a real socket to a real box on 127.0.0.1, port 0, as a browser
would send it (a foreign ``Origin``, or a foreign ``Host``), and each test asserts what the
box's state is afterwards, not only the status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box
from tests.helpers import TIMEOUT, publish

EVIL_ORIGIN = "http://evil.example"
EVIL_HOST = "evil.example"


@dataclass
class Box:
    """A running box and a client that sends exactly the headers a test gives."""

    addresses: BoxAddresses
    client: httpx.AsyncClient

    def url(self, service: str, path: str) -> str:
        """``service`` is ``nsqd``, ``lookupd`` or ``admin``."""
        if service == "nsqd":
            http = self.addresses.nsqds[0].http
            assert http is not None
            address = http
        elif service == "lookupd":
            address = self.addresses.lookupd.http
        else:
            address = self.addresses.admin.http
        return f"http://{format_address(address)}{path}"

    async def send(
        self, method: str, service: str, path: str, *, host: str | None = None, **headers: str
    ) -> httpx.Response:
        """One request; ``host`` replaces the Host header (its name, with the real port)."""
        url = self.url(service, path)
        if host is not None:
            port = httpx.URL(url).port
            headers["Host"] = f"{host}:{port}"
        with trio.fail_after(TIMEOUT):
            return await self.client.request(method, url, headers=headers)


async def start_box(nursery: trio.Nursery, tmp_path: Path, **nsqd: object) -> AsyncIterator[Box]:
    options = BoxOptions(
        nsqd=NSQDOptions(data_path=str(tmp_path / "data"), node_id=0, **nsqd),  # type: ignore[arg-type]
        clock="manual",
    )
    options.use_ephemeral_ports()
    addresses: BoxAddresses = await nursery.start(serve_box, options)
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
        yield Box(addresses, client)


@pytest.fixture
async def box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    async for started in start_box(nursery, tmp_path):
        yield started


@pytest.fixture
async def allowlisted_box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    async for started in start_box(nursery, tmp_path, allowed_hosts=["box.test"]):
        yield started


@pytest.fixture
async def auth_box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    # nothing asks the auth server here: the HTTP routes under test take no AUTH
    async for started in start_box(nursery, tmp_path, auth_http_addresses=["127.0.0.1:1"]):
        yield started


# --- simple cross-site requests (a foreign Origin, no body) ------------------------------------

CROSS_SITE_POSTS = [
    pytest.param("admin", "/api/faults/crash?node=0", id="admin-crash"),
    pytest.param("admin", "/api/faults/restart?node=0", id="admin-restart"),
    pytest.param("admin", "/api/faults/start?node=0", id="admin-start"),
    pytest.param("admin", "/api/faults/fail_publishes?topic=t&duration=8760h", id="admin-fault"),
    pytest.param("admin", "/api/faults/disk_full?duration=8760h", id="admin-disk-full"),
    pytest.param("admin", "/api/clock/advance?by=1h", id="admin-clock"),
    pytest.param("admin", "/api/topics/t", id="admin-topic-action"),
    pytest.param("admin", "/api/captures?topic=t", id="admin-capture"),
    pytest.param("admin", "/api/consume/t/c?timeout=0.1", id="admin-consume"),
    pytest.param("nsqd", "/nsqbox/faults/fail_publishes?topic=t", id="nsqd-fail-publishes"),
    pytest.param("nsqd", "/nsqbox/faults/disk_full?duration=8760h", id="nsqd-disk-full"),
    pytest.param("nsqd", "/nsqbox/clock/advance?by=1h", id="nsqd-clock"),
    pytest.param("nsqd", "/nsqbox/tap/open?topic=t", id="nsqd-tap"),
    pytest.param("lookupd", "/nsqbox/faults/lookupd_down?duration=8760h", id="lookupd-down"),
    pytest.param("lookupd", "/nsqbox/clock/advance?by=1h", id="lookupd-clock"),
]


@pytest.mark.parametrize(("service", "path"), CROSS_SITE_POSTS)
async def test_a_cross_site_post_is_refused_and_changes_nothing(
    box: Box, service: str, path: str
) -> None:
    create = await box.send("POST", "nsqd", "/topic/create?topic=t")
    assert create.status_code == 200
    nsqd = box.addresses.nsqds[0].nsqd
    response = await box.send("POST", service, path, Origin=EVIL_ORIGIN)
    assert (response.status_code, response.json()) == (403, {"message": "ORIGIN_NOT_ALLOWED"})
    control, clock = box.addresses.control, box.addresses.clock
    assert control is not None
    assert clock is not None
    assert control.states() == ["running"]
    assert control.nsqd(0) is nsqd  # not restarted either
    assert nsqd.faults.active() == []
    assert box.addresses.lookupd.lookupd.faults.active() == []
    assert clock.describe()["offset"] == 0
    assert nsqd.topics["t"].taps == []
    assert not nsqd.topics["t"].paused


async def test_curl_like_and_same_origin_requests_still_work(box: Box) -> None:
    """What curl, NSQ clients, the test plugin (no Origin, a loopback Host) and the web TUI
    (its own origin) send is answered."""
    nsqd = box.addresses.nsqds[0].nsqd
    control, clock = box.addresses.control, box.addresses.clock
    assert control is not None
    assert clock is not None
    admin = httpx.URL(box.url("admin", "/"))
    own_origin = {"Origin": f"http://{admin.host}:{admin.port}"}
    fault = await box.send("POST", "nsqd", "/nsqbox/faults/fail_publishes?topic=t")
    assert fault.status_code == 200
    assert [f.kind for f in nsqd.faults.active()] == ["fail_publishes"]
    crash = await box.send("POST", "admin", "/api/faults/crash?node=0", **own_origin)
    assert crash.status_code == 200, crash.text
    assert control.states() == ["crashed"]
    start = await box.send("POST", "admin", "/api/faults/start?node=0", host="localhost")
    assert start.status_code == 200, start.text
    assert control.states() == ["running"]
    advance = await box.send("POST", "lookupd", "/nsqbox/clock/advance?by=1h", host="127.0.0.1")
    assert advance.status_code == 200, advance.text
    assert clock.describe()["offset"] == pytest.approx(3600, abs=1)


# --- DNS rebinding (a foreign Host) --------------------------------------------------------------

REBOUND_READS = [
    pytest.param("nsqd", "/nsqbox/peek?topic=t", id="nsqd-peek"),
    pytest.param("nsqd", "/nsqbox/journal", id="nsqd-journal"),
    pytest.param("nsqd", "/nsqbox/faults", id="nsqd-faults"),
    pytest.param("lookupd", "/nsqbox/faults", id="lookupd-faults"),
    pytest.param("admin", "/api/messages/t", id="admin-messages"),
    pytest.param("admin", "/api/topics", id="admin-topics"),
    pytest.param("admin", "/api/faults", id="admin-faults"),
    pytest.param("admin", "/api/wait/t", id="admin-wait"),
    pytest.param("admin", "/metrics", id="admin-metrics"),
]


@pytest.mark.parametrize(("service", "path"), REBOUND_READS)
async def test_a_rebound_host_reads_nothing(box: Box, service: str, path: str) -> None:
    nsqd = box.addresses.nsqds[0]
    await publish(nsqd.tcp, "t", b"secret body")
    refused = await box.send("GET", service, path, host=EVIL_HOST)
    assert (refused.status_code, refused.json()) == (403, {"message": "HOST_NOT_ALLOWED"})
    assert b"secret" not in refused.content
    for host in ("127.0.0.1", "localhost", None):  # curl, a browser on localhost, the default
        answered = await box.send("GET", service, path, host=host)
        assert answered.status_code == 200, answered.text


async def test_peek_answers_the_body_to_a_loopback_host(box: Box) -> None:
    await publish(box.addresses.nsqds[0].tcp, "t", b"secret body")
    response = await box.send("GET", "nsqd", "/nsqbox/peek?topic=t", host="127.0.0.1")
    assert response.status_code == 200
    assert [m["body"] for m in response.json()["messages"]] == ["c2VjcmV0IGJvZHk="]


# --- NSQ's own routes: any Host by default, as real nsqd; the allowlist once given -------------


async def test_nsq_routes_answer_any_host_and_origin_by_default(box: Box) -> None:
    nsqd = box.addresses.nsqds[0].nsqd
    for _ in range(2):  # the second /pub takes the quick path
        pub = await box.client.post(
            box.url("nsqd", "/pub?topic=t"),
            content=b"m",
            headers={"Host": f"{EVIL_HOST}:1", "Origin": EVIL_ORIGIN},
        )
        assert (pub.status_code, pub.text) == (200, "OK")
    assert nsqd.topics["t"].message_count == 2
    stats = await box.send("GET", "nsqd", "/stats?format=json", host=EVIL_HOST)
    assert stats.status_code == 200
    lookup = await box.send("GET", "lookupd", "/lookup?topic=nope", host=EVIL_HOST)
    assert (lookup.status_code, lookup.json()) == (404, {"message": "TOPIC_NOT_FOUND"})


async def test_allowed_host_extends_the_check_to_nsq_routes(allowlisted_box: Box) -> None:
    box = allowlisted_box
    nsqd = box.addresses.nsqds[0].nsqd
    url = box.url("nsqd", "/pub?topic=t")
    ok = await box.client.post(url, content=b"m", headers={"Host": "box.test:4151"})
    assert (ok.status_code, ok.text) == (200, "OK")
    # the quick path (a query seen before) is guarded too
    pub = await box.client.post(url, content=b"m", headers={"Host": f"{EVIL_HOST}:4151"})
    assert (pub.status_code, pub.json()) == (403, {"message": "HOST_NOT_ALLOWED"})
    assert nsqd.topics["t"].message_count == 1
    for service, path in (("nsqd", "/stats"), ("lookupd", "/lookup?topic=t")):
        refused = await box.send("GET", service, path, host=EVIL_HOST)
        assert (refused.status_code, refused.json()) == (403, {"message": "HOST_NOT_ALLOWED"})
        assert (await box.send("GET", service, path, host="box.test")).status_code == 200
        assert (await box.send("GET", service, path)).status_code == 200
    admin = await box.send("GET", "admin", "/api/topics", host="box.test")
    assert admin.status_code == 200


# --- --auth-http-address: nsqbox's own routes are off everywhere --------------------------------

NSQBOX_ONLY_ROUTES = [
    ("GET", "nsqd", "/nsqbox/faults"),
    ("POST", "nsqd", "/nsqbox/faults/fail_publishes?topic=t"),
    ("DELETE", "nsqd", "/nsqbox/faults"),
    ("GET", "nsqd", "/nsqbox/clock"),
    ("POST", "nsqd", "/nsqbox/clock/advance?by=1h"),
    ("GET", "nsqd", "/nsqbox/peek?topic=t"),
    ("GET", "nsqd", "/nsqbox/journal"),
    ("GET", "nsqd", "/nsqbox/journal/given_up?topic=t&channel=c"),
    ("POST", "nsqd", "/nsqbox/tap/open?topic=t"),
    ("GET", "lookupd", "/nsqbox/faults"),
    ("POST", "lookupd", "/nsqbox/faults/lookupd_down"),
    ("GET", "lookupd", "/nsqbox/clock"),
    ("POST", "lookupd", "/nsqbox/clock/advance?by=1h"),
    ("GET", "admin", "/api/faults"),
    ("POST", "admin", "/api/faults/crash?node=0"),
    ("POST", "admin", "/api/faults/restart?node=0"),
    ("POST", "admin", "/api/faults/start?node=0"),
    ("POST", "admin", "/api/faults/fail_publishes"),
    ("DELETE", "admin", "/api/faults"),
    ("GET", "admin", "/api/clock"),
    ("POST", "admin", "/api/clock/advance?by=1h"),
    ("GET", "admin", "/api/messages/t"),
    ("GET", "admin", "/api/wait/t"),
    ("POST", "admin", "/api/consume/t/c"),
    ("POST", "admin", "/api/captures?topic=t"),
    ("GET", "admin", "/api/captures/0123456789abcdef"),
    ("DELETE", "admin", "/api/captures/0123456789abcdef"),
]


async def test_auth_turns_every_nsqbox_route_off(auth_box: Box) -> None:
    box = auth_box
    nsqd = box.addresses.nsqds[0].nsqd
    for method, service, path in NSQBOX_ONLY_ROUTES:
        response = await box.send(method, service, path)
        assert (response.status_code, response.json()) == (404, {"message": "NOT_FOUND"}), (
            method,
            service,
            path,
        )
    control, clock = box.addresses.control, box.addresses.clock
    assert control is not None
    assert clock is not None
    assert control.nsqd(0) is nsqd
    assert control.states() == ["running"]
    assert clock.describe()["offset"] == 0
    for service, path in (("nsqd", "/stats"), ("lookupd", "/nodes"), ("admin", "/api/topics")):
        assert (await box.send("GET", service, path)).status_code == 200


async def test_the_broadcast_address_is_a_name_every_service_answers(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    async for box in start_box(nursery, tmp_path, broadcast_address="box.lan"):
        for service, path in (
            ("nsqd", "/nsqbox/faults"),
            ("lookupd", "/nsqbox/faults"),
            ("admin", "/api/topics"),
        ):
            answered = await box.send("GET", service, path, host="box.lan")
            assert answered.status_code == 200, (service, answered.text)
            refused = await box.send("GET", service, path, host="other.lan")
            assert refused.status_code == 403, (service, refused.text)
