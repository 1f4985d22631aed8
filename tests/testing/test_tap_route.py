"""nsqbox's ``/nsqbox/tap`` HTTP routes, and the capture that uses them outside the process.

Real servers on 127.0.0.1 port 0 (conftest's ``thread_box``). A capture over HTTP
must give what the in-process tap gives: every publish (DPUB with its delay), nothing
taken from the topic, nothing created.
"""

from __future__ import annotations

import json

import pytest

from nsqbox.testing import Address, NSQBox, ThreadBox
from nsqbox.testing.remote import CaptureUnavailable, NSQHTTPError, RemoteOps, http

from .conftest import TIMEOUT


def test_tap_routes(handle: NSQBox) -> None:
    address = handle.nsqd_http_address
    opened = json.loads(http("POST", address, "/nsqbox/tap/open", {"topic": "t"}))
    handle.publish("t", [b"a", b"b"])
    handle.publish("t", b"c", defer_ms=5000)
    doc = json.loads(http("GET", address, "/nsqbox/tap/read", {"id": opened["id"], "from": "1"}))
    assert [m["defer_ms"] for m in doc["messages"]] == [0, 5000]
    assert (doc["next"], doc["overflow"]) == (3, False)
    closed = json.loads(http("POST", address, "/nsqbox/tap/close", {"id": opened["id"]}))
    assert [m["body"] for m in closed["messages"]] == ["YQ==", "Yg==", "Yw=="]
    with pytest.raises(NSQHTTPError, match=r"404 .*TAP_NOT_FOUND") as info:
        http("GET", address, "/nsqbox/tap/read", {"id": opened["id"]})
    assert info.value.status == 404
    with pytest.raises(NSQHTTPError, match=r"400 .*MISSING_ARG_TOPIC"):
        http("POST", address, "/nsqbox/tap/open")


def test_http_capture_is_the_in_process_capture(handle: NSQBox, thread_box: ThreadBox) -> None:
    ops = RemoteOps(thread_box.addresses, TIMEOUT)
    source = ops.open_capture("orders", TIMEOUT)
    try:
        with handle.capture("orders") as in_process:
            handle.publish("orders", [b"a", b"b"])
            handle.publish("orders", b"later", defer_ms=60_000)
    finally:
        over_http = source.close()
    assert source.mode == "tap"
    assert over_http == in_process.messages
    # the topic still holds everything for the first channel, which nobody created
    topic = handle.stats().topic("orders")
    assert topic is not None
    assert (topic.depth, list(topic.channels)) == (3, [])


def test_a_capture_on_real_nsqd_says_why_it_cannot_tap(
    not_nsqbox: Address, thread_box: ThreadBox
) -> None:
    ops = RemoteOps(
        type(thread_box.addresses)(nsqd_tcp=(not_nsqbox,), nsqd_http=(not_nsqbox,)), TIMEOUT
    )
    with pytest.raises(CaptureUnavailable) as info:
        ops.open_capture("orders", TIMEOUT)
    message = str(info.value)
    assert f"the nsqd at {not_nsqbox} has none (real NSQ?)" in message
    assert "capture('orders', mode='channel')" in message
