"""nsqbox's ``/nsqbox/faults`` HTTP routes, and ``nsqbox.faults`` through them.

Real servers on 127.0.0.1 port 0: the routes are driven with httpx as any HTTP
client would (conftest's ``thread_box``); the handle's faults go through them in
subprocess mode (``nsqbox up`` in a child process) and noproc mode, and each fault
is seen by a real client.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer, Publisher
from nsqbox.client.errors import ConnectionClosed
from nsqbox.testing import NoProcBox, NSQBox, SubprocessBox
from nsqbox.testing.config import Address, BoxAddresses
from nsqbox.testing.faults import FaultsUnsupported
from nsqbox.testing.faults_http import HTTPFaults
from nsqbox.wire.errors import NSQError

from .conftest import TIMEOUT

# -- the routes ----------------------------------------------------------------------------


@pytest.fixture
def http(handle: NSQBox) -> Iterator[httpx.Client]:
    url = f"http://{handle.nsqd_http_address}"
    with httpx.Client(base_url=url, timeout=TIMEOUT, trust_env=False) as client:
        yield client


def test_fail_publishes_listed_and_lifted_over_http(handle: NSQBox, http: httpx.Client) -> None:
    topic = handle.name("orders")
    assert http.get("/nsqbox/faults").json() == {"faults": []}
    added = http.post(
        "/nsqbox/faults/fail_publishes", params={"topic": topic, "count": "2", "error": "boom"}
    )
    assert added.status_code == 200
    fault = added.json()
    assert (fault["kind"], fault["topic"], fault["error"], fault["remaining"]) == (
        "fail_publishes",
        topic,
        "boom",
        2,
    )
    assert http.get("/nsqbox/faults").json()["faults"] == [fault]
    assert http.post("/pub", params={"topic": topic}, content=b"x").status_code == 503
    (left,) = http.get("/nsqbox/faults").json()["faults"]
    assert left["remaining"] == 1
    assert http.delete(f"/nsqbox/faults/{fault['id']}").json() == {"lifted": True}
    assert http.delete(f"/nsqbox/faults/{fault['id']}").json() == {"lifted": False}
    assert http.post("/pub", params={"topic": topic}, content=b"x").status_code == 200


def test_disk_full_and_lift_all_over_http(http: httpx.Client) -> None:
    full = http.post("/nsqbox/faults/disk_full", params={"duration": "600"}).json()
    assert (full["kind"], full["topic"], full["error"]) == (
        "disk_full",
        None,
        "write: no space left on device",
    )
    ping = http.get("/ping")
    assert (ping.status_code, ping.text) == (500, "NOK - write: no space left on device")
    http.post("/nsqbox/faults/fail_publishes")
    assert http.delete("/nsqbox/faults").json() == {"lifted": 2}
    assert http.get("/ping").text == "OK"
    assert http.get("/nsqbox/faults").json() == {"faults": []}


def test_one_shot_faults_over_http(handle: NSQBox, http: httpx.Client) -> None:
    topic = handle.name("orders")
    with BlockingConsumer(handle.nsqd_tcp_address, topic, "work") as consumer:
        handle.wait_for(topic, "work", clients=1)
        params = {"topic": topic, "channel": "work"}
        timed_out = http.post("/nsqbox/faults/time_out_in_flight", params=params)
        assert timed_out.json() == {"count": 0}
        dropped = http.post("/nsqbox/faults/drop_connections", params={**params, "reset": "1"})
        assert dropped.json() == {"count": 1}
        with pytest.raises(ConnectionClosed):
            consumer.receive(timeout=TIMEOUT)


def test_latency_and_stall_listed_and_lifted_over_http(http: httpx.Client) -> None:
    latency = http.post(
        "/nsqbox/faults/latency",
        params={"delay": "0.25", "jitter": "0.05", "channel": "work", "count": "3"},
    ).json()
    assert (latency["kind"], latency["delay"], latency["jitter"]) == ("latency", 0.25, 0.05)
    assert (latency["channel"], latency["remaining"]) == ("work", 3)
    stall = http.post(
        "/nsqbox/faults/stall", params={"user_agent": "app/1", "client_id": "c1"}
    ).json()
    assert (stall["kind"], stall["user_agent"], stall["client_id"]) == ("stall", "app/1", "c1")
    listed = http.get("/nsqbox/faults").json()["faults"]
    assert [f["id"] for f in listed] == [latency["id"], stall["id"]]
    assert http.delete(f"/nsqbox/faults/{stall['id']}").json() == {"lifted": True}
    assert http.delete("/nsqbox/faults").json() == {"lifted": 1}


def test_durations_in_seconds_or_go_style(http: httpx.Client) -> None:
    params = {"delay": "500ms", "jitter": "0.1", "duration": "2m", "topic": "nowhere"}
    latency = http.post("/nsqbox/faults/latency", params=params).json()
    assert (latency["delay"], latency["jitter"]) == (0.5, 0.1)
    assert latency["until"] == pytest.approx(latency["since"] + 120)
    assert 0 < latency["left"] <= 120
    failing = http.post(
        "/nsqbox/faults/fail_publishes", params={"topic": "nowhere", "duration": "1.5h"}
    ).json()
    assert failing["until"] == pytest.approx(failing["since"] + 5400)
    seconds = http.post("/nsqbox/faults/stall", params={"topic": "nowhere", "duration": "90"})
    assert seconds.json()["until"] == pytest.approx(seconds.json()["since"] + 90)
    assert http.delete("/nsqbox/faults").json() == {"lifted": 3}


@pytest.mark.parametrize(
    ("method", "path", "params", "message"),
    [
        ("POST", "/nsqbox/faults/latency", {}, "MISSING_ARG_DELAY"),
        ("POST", "/nsqbox/faults/latency", {"delay": "-1"}, "INVALID_DELAY"),
        ("POST", "/nsqbox/faults/latency", {"delay": "1x"}, "INVALID_DELAY"),
        ("POST", "/nsqbox/faults/latency", {"delay": "1s", "jitter": "2s"}, "INVALID_JITTER"),
        ("POST", "/nsqbox/faults/stall", {"duration": "-1s"}, "INVALID_DURATION"),
        ("POST", "/nsqbox/faults/stall", {"duration": "0s"}, "INVALID_DURATION"),
        ("POST", "/nsqbox/faults/latency", {"delay": "1", "jitter": "2"}, "INVALID_JITTER"),
        ("POST", "/nsqbox/faults/stall", {"count": "0"}, "INVALID_COUNT"),
        ("POST", "/nsqbox/faults/stall", {"user_agent": "a\nb"}, "INVALID_USER_AGENT"),
        ("POST", "/nsqbox/faults/stall", {"channel": "#"}, "INVALID_CHANNEL"),
        ("POST", "/nsqbox/faults/fail_publishes", {"count": "0"}, "INVALID_COUNT"),
        ("POST", "/nsqbox/faults/fail_publishes", {"count": "x"}, "INVALID_COUNT"),
        ("POST", "/nsqbox/faults/fail_publishes", {"duration": "-1"}, "INVALID_DURATION"),
        ("POST", "/nsqbox/faults/disk_full", {"duration": "nan"}, "INVALID_DURATION"),
        ("POST", "/nsqbox/faults/disk_full", {"topic": "no/slash"}, "INVALID_TOPIC"),
        ("POST", "/nsqbox/faults/fail_publishes", {"error": "a\nb"}, "INVALID_ERROR"),
        ("POST", "/nsqbox/faults/time_out_in_flight", {"channel": "a b"}, "INVALID_CHANNEL"),
        ("POST", "/nsqbox/faults/drop_connections", {"reset": "maybe"}, "INVALID_RESET"),
        ("DELETE", "/nsqbox/faults/x1", {}, "INVALID_ID"),
    ],
)
def test_bad_parameters_get_400_with_a_message(
    http: httpx.Client, method: str, path: str, params: dict[str, str], message: str
) -> None:
    answer = http.request(method, path, params=params)
    assert (answer.status_code, answer.json()) == (400, {"message": message})
    assert http.get("/nsqbox/faults").json() == {"faults": []}


# -- nsqbox.faults over HTTP: subprocess mode ----------------------------------------------------


def test_subprocess_publisher_sees_pub_failed_count_times(remote: NSQBox) -> None:
    topic = remote.name("orders")
    fault = remote.faults.fail_publishes(topic=topic, count=2)
    assert isinstance(remote.faults, HTTPFaults)
    assert remote.faults.supported
    assert remote.faults.active() == [fault.info]
    codes = []
    with Publisher(remote.nsqd_tcp_address) as producer:
        for _ in range(2):
            with pytest.raises(NSQError) as info:
                producer.pub(topic, b"lost")
            codes.append(str(info.value))
        producer.pub(topic, b"ok")
    assert codes == ["E_PUB_FAILED PUB failed fault injected: publish failed"] * 2
    assert remote.wait_for(topic, depth=1).message_count == 1
    assert remote.faults.active() == []
    assert fault.lift() is False


def test_subprocess_drop_and_lasting_faults_lifted_with_the_handle(
    subprocess_box: SubprocessBox,
) -> None:
    with NSQBox(subprocess_box, timeout=TIMEOUT) as first:
        topic = first.name("orders")
        with BlockingConsumer(first.nsqd_tcp_address, topic, "work") as consumer:
            first.wait_for(topic, "work", clients=1)
            assert first.faults.drop_connections(topic=topic) == 1
            first.wait_for(topic, "work", clients=0)
            with pytest.raises(ConnectionClosed, match="closed the connection"):
                consumer.receive(timeout=TIMEOUT)
        with first.faults.disk_full(error="quota") as full:
            (listed,) = first.faults.active()
            assert (listed.kind, listed.error) == ("disk_full", "quota")
            assert listed == full.info
        first.faults.fail_publishes()
        with pytest.raises(ValueError, match="count must be at least 1"):
            first.faults.fail_publishes(count=0)
    with NSQBox(subprocess_box, timeout=TIMEOUT) as second:
        assert second.faults.active() == []


def test_subprocess_latency_and_stall_seen_by_a_consumer(remote: NSQBox) -> None:
    topic = remote.name("orders")
    with remote.faults.latency(0.01, topic=topic) as slow:
        assert remote.faults.active() == [slow.info]
        assert (slow.info.kind, slow.info.delay, slow.info.topic) == ("latency", 0.01, topic)
        assert slow.info.until is None  # until lifted
        remote.publish(topic, [b"a", b"b", b"c"])
        assert sorted(remote.consume(topic, "work", 3)) == [b"a", b"b", b"c"]
    config = Config(user_agent="victim/1.0")
    with BlockingConsumer(remote.nsqd_tcp_address, topic, "work", config=config) as consumer:
        remote.wait_for(topic, "work", clients=1)
        stall = remote.faults.stall(user_agent="victim", duration=60)
        assert stall.info.until == pytest.approx(stall.info.since + 60)  # when it ends
        assert remote.faults.active() == [stall.info]
        remote.publish(topic, b"held")
        assert consumer.receive(timeout=0.5) == []  # sent to it, never written
        assert stall.lift()
        (message,) = consumer.receive(timeout=TIMEOUT)
        assert message.body == b"held"
        message.finish()


# -- noproc mode ---------------------------------------------------------------------------


def test_noproc_faults_reach_nsqbox_servers(handle: NSQBox) -> None:
    box = NoProcBox(handle.addresses, timeout=TIMEOUT)
    topic = handle.name("orders")
    with NSQBox(box, timeout=TIMEOUT) as other:
        with other.faults.fail_publishes(topic=topic, error="boom"):
            assert [f.error for f in handle.faults.active()] == ["boom"]
            with Publisher(handle.nsqd_tcp_address) as producer, pytest.raises(NSQError):
                producer.pub(topic, b"x")
        assert handle.faults.active() == []


def test_real_nsqd_says_faults_need_nsqbox(not_nsqbox: Address) -> None:
    faults = HTTPFaults(BoxAddresses(nsqd_tcp=(not_nsqbox,), nsqd_http=(not_nsqbox,)))
    assert faults.supported is False
    with pytest.raises(FaultsUnsupported, match="faults need nsqbox's nsqd: the nsqd at"):
        faults.fail_publishes(count=1)
    with pytest.raises(NotImplementedError, match="404 to /nsqbox/faults"):
        faults.drop_connections()
    with pytest.raises(FaultsUnsupported, match="faults need nsqbox's nsqd"):
        faults.latency(0.1)
    with pytest.raises(FaultsUnsupported, match="faults need nsqbox's nsqd"):
        faults.stall(topic="orders")
    with pytest.raises(FaultsUnsupported, match="restarts and crashes are not supported"):
        faults.crash()
