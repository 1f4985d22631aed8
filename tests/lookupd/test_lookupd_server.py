"""nsqlookupd end to end: a real server, raw V1 connections, and HTTP through httpx."""

from __future__ import annotations

import pytest
import trio

from nsqbox.wire.lookupd import (
    ResponseReader,
    encode_identify,
    encode_ping,
    encode_register,
    encode_unregister,
)
from tests.lookupd.lookupd_helpers import open_lookupd, open_v1, settle

OK = b"OK"


async def test_identify_register_and_disconnect() -> None:
    async with open_lookupd() as lookupd:
        async with open_v1(lookupd) as conn:
            reply = await conn.identify()
            tcp_port, http_port = lookupd.addresses.tcp[1], lookupd.addresses.http[1]
            assert reply.startswith(b'{"broadcast_address":"127.0.0.1","hostname":"')
            assert reply.endswith(
                f',"http_port":{http_port},"tcp_port":{tcp_port},"version":"1.3.0"}}'.encode()
            )
            assert await conn.command(encode_ping()) == OK
            assert await conn.command(encode_register("connectmsg", "channel1")) == OK

            nodes = await lookupd.get("/nodes")
            local = conn.stream.socket.getsockname()
            assert nodes == {
                "producers": [
                    {
                        "remote_address": f"{local[0]}:{local[1]}",
                        "hostname": "host",
                        "broadcast_address": "10.0.0.1",
                        "tcp_port": 4150,
                        "http_port": 4151,
                        "version": "1.3.0",
                        "tombstones": [False],
                        "topics": ["connectmsg"],
                    }
                ]
            }
            assert await lookupd.get("/topics") == {"topics": ["connectmsg"]}
            assert await lookupd.get("/channels", topic="connectmsg") == {"channels": ["channel1"]}
            lookup = await lookupd.get("/lookup", topic="connectmsg")
            assert lookup["channels"] == ["channel1"]
            assert [p["broadcast_address"] for p in lookup["producers"]] == ["10.0.0.1"]
        await settle()
        # the producer is gone, the keys stay
        assert await lookupd.get("/lookup", topic="connectmsg") == {
            "channels": ["channel1"],
            "producers": [],
        }
        assert await lookupd.get("/nodes") == {"producers": []}


async def test_channel_unregister_keeps_the_channel_key() -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd) as conn:
        await conn.identify()
        assert await conn.command(encode_register("t", "ch1")) == OK
        assert await conn.command(encode_unregister("t", "ch1")) == OK
        lookup = await lookupd.get("/lookup", topic="t")
        assert lookup["channels"] == ["ch1"]
        assert len(lookup["producers"]) == 1


async def test_ephemeral_channel_key_goes_with_its_last_producer() -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd) as a, open_v1(lookupd) as b:
        for conn in (a, b):
            await conn.identify()
            assert await conn.command(encode_register("t", "c#ephemeral")) == OK
        assert await a.command(encode_unregister("t", "c#ephemeral")) == OK
        assert await lookupd.get("/channels", topic="t") == {"channels": ["c#ephemeral"]}
        assert await b.command(encode_unregister("t", "c#ephemeral")) == OK
        assert await lookupd.get("/channels", topic="t") == {"channels": []}


IDENTIFY = encode_identify(
    broadcast_address="b", hostname="h", tcp_port=1, http_port=2, version="v"
)


@pytest.mark.parametrize(
    ("data", "half_close", "expected"),
    [
        pytest.param(b"  V2", False, b"E_BAD_PROTOCOL", id="bad-magic"),
        pytest.param(b"  V1FOO\n", False, b"E_INVALID invalid command FOO", id="bad-command"),
        pytest.param(
            b"  V1REGISTER t\n", False, b"E_INVALID client must IDENTIFY", id="no-identify"
        ),
        pytest.param(
            b"  V1" + IDENTIFY + IDENTIFY, False, b"E_INVALID cannot IDENTIFY again", id="twice"
        ),
        pytest.param(
            b"  V1" + IDENTIFY + b"UNREGISTER\n", False,
            b"E_INVALID UNREGISTER insufficient number of params", id="no-params",
        ),
        pytest.param(
            b"  V1" + IDENTIFY + b"REGISTER a*b\n", False,
            b"E_BAD_TOPIC REGISTER topic name 'a*b' is not valid", id="bad-topic",
        ),
        pytest.param(
            b"  V1" + IDENTIFY + b"REGISTER t c*d\n", False,
            b"E_BAD_CHANNEL REGISTER channel name 'c*d' is not valid", id="bad-channel",
        ),
        pytest.param(
            b"  V1IDENTIFY\n\x00\x00\x00\x02{}", False,
            b"E_BAD_BODY IDENTIFY missing fields", id="missing-fields",
        ),
        pytest.param(
            b"  V1IDENTIFY\n\x00\x00\x00\x02{]", False,
            b"E_BAD_BODY IDENTIFY failed to decode JSON body", id="bad-json",
        ),
        pytest.param(
            b"  V1IDENTIFY\n\x00", True,
            b"E_BAD_BODY IDENTIFY failed to read body size", id="short-size",
        ),
        pytest.param(
            b"  V1IDENTIFY\n\x00\x00\x00\x09{", True,
            b"E_BAD_BODY IDENTIFY failed to read body", id="short-body",
        ),
    ],
)  # fmt: skip
async def test_v1_errors_are_fatal(data: bytes, half_close: bool, expected: bytes) -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd, magic=b"") as conn:
        await conn.send(data)
        if half_close:
            await conn.stream.send_eof()
        reader = ResponseReader()
        reader.receive_data(await conn.read_to_eof())
        replies: list[bytes] = []
        while isinstance(reply := reader.next_response(), bytes):
            replies.append(reply)
        # the error is the last thing sent before the close; before it only IDENTIFY replies
        assert replies[-1] == expected
        assert all(r.startswith(b'{"broadcast_address"') for r in replies[:-1])


async def test_http_errors_and_methods() -> None:
    async with open_lookupd() as lookupd:
        http = lookupd.http
        cases = [
            ("GET", "/lookup", {}, 400, "MISSING_ARG_TOPIC"),
            ("GET", "/lookup", {"topic": "nope"}, 404, "TOPIC_NOT_FOUND"),
            ("GET", "/channels", {}, 400, "MISSING_ARG_TOPIC"),
            ("POST", "/topic/create", {}, 400, "MISSING_ARG_TOPIC"),
            ("POST", "/topic/create", {"topic": "a*b"}, 400, "INVALID_ARG_TOPIC"),
            ("POST", "/topic/delete", {}, 400, "MISSING_ARG_TOPIC"),
            ("POST", "/channel/create", {"topic": "t"}, 400, "MISSING_ARG_CHANNEL"),
            (
                "POST",
                "/channel/create",
                {"topic": "t", "channel": "c*"},
                400,
                "INVALID_ARG_CHANNEL",
            ),
            ("POST", "/channel/delete", {"topic": "*"}, 400, "INVALID_ARG_TOPIC"),
            ("POST", "/channel/delete", {"topic": "t", "channel": "c"}, 404, "CHANNEL_NOT_FOUND"),
            ("POST", "/topic/tombstone", {"topic": "t"}, 400, "MISSING_ARG_NODE"),
            ("POST", "/tombstone_topic_producer", {}, 404, "NOT_FOUND"),
            ("DELETE", "/topics", {}, 405, "METHOD_NOT_ALLOWED"),
            ("GET", "/nope", {}, 404, "NOT_FOUND"),
        ]
        for method, path, params, status, message in cases:
            response = await http.request(method, path, params=params)
            assert (response.status_code, response.json()) == (status, {"message": message}), path
            assert response.headers["X-NSQ-Content-Type"] == "nsq; version=1.0"

        ping = await http.get("/ping")
        assert (ping.status_code, ping.text) == (200, "OK")
        assert await lookupd.get("/info") == {"version": "1.3.0"}

        # mutating routes answer POST with an empty 200, and GET with 405, as nsqlookupd v1.3.0
        for topic in ("a", "b"):
            created = await http.post("/channel/create", params={"topic": topic, "channel": "c"})
            assert (created.status_code, created.content) == (200, b"")
        for path in ("/topic/create", "/topic/delete", "/channel/create", "/channel/delete"):
            refused = await http.get(path, params={"topic": "a", "channel": "c"})
            assert (refused.status_code, refused.json()) == (405, {"message": "METHOD_NOT_ALLOWED"})
        assert await lookupd.get("/topics") == {"topics": ["a", "b"]}
        assert (
            await http.post("/channel/delete", params={"topic": "a", "channel": "c"})
        ).status_code == 200
        assert await lookupd.get("/channels", topic="a") == {"channels": []}
        assert (await http.post("/topic/delete", params={"topic": "b"})).status_code == 200
        assert await lookupd.get("/topics") == {"topics": ["a"]}
        assert await lookupd.get("/lookup", topic="a") == {"channels": [], "producers": []}
        gone = await http.post("/tombstone_topic_producer", params={"topic": "a", "node": "x:1"})
        assert gone.status_code == 404  # the pre-1.0 name, gone in v1.3.0
        assert await lookupd.get("/debug") == {}


async def test_tombstones(autojump_clock: trio.testing.MockClock) -> None:
    async with (
        open_lookupd(tombstone_lifetime=45.0) as lookupd,
        open_v1(lookupd) as a,
        open_v1(lookupd) as b,
    ):
        await a.identify(http_port=4151)
        await b.identify(http_port=4152)
        for conn in (a, b):
            assert await conn.command(encode_register("t", "c")) == OK
            assert await conn.command(encode_register("u")) == OK

        async def lookup_ports(topic: str) -> list[int]:
            found = await lookupd.get("/lookup", topic=topic)
            return sorted(p["http_port"] for p in found["producers"])

        async def node_tombstones() -> dict[int, dict[str, bool]]:
            nodes = (await lookupd.get("/nodes"))["producers"]
            return {
                n["http_port"]: dict(zip(n["topics"], n["tombstones"], strict=True)) for n in nodes
            }

        response = await lookupd.http.post(
            "/topic/tombstone", params={"topic": "t", "node": "10.0.0.1:4151"}
        )
        assert response.status_code == 200
        assert await lookup_ports("t") == [4152]
        assert await lookup_ports("u") == [4151, 4152]
        assert await node_tombstones() == {
            4151: {"t": True, "u": False},
            4152: {"t": False, "u": False},
        }
        # a REGISTER during the lifetime does not clear it
        assert await a.command(encode_register("t", "d")) == OK
        assert await lookup_ports("t") == [4152]

        await trio.sleep(45.0)
        assert await lookup_ports("t") == [4151, 4152]
        assert (await node_tombstones())[4151] == {"t": False, "u": False}

        # tombstone the other one, then UNREGISTER: gone for good
        response = await lookupd.http.post(
            "/topic/tombstone", params={"topic": "t", "node": "10.0.0.1:4152"}
        )
        assert response.status_code == 200
        assert await lookup_ports("t") == [4151]
        assert await b.command(encode_unregister("t")) == OK
        await trio.sleep(60.0)
        for conn in (a, b):  # keep both producers active
            assert await conn.command(encode_ping()) == OK
        assert await lookup_ports("t") == [4151]
        assert (await node_tombstones())[4152] == {"u": False}


async def test_inactive_producers_dropped(autojump_clock: trio.testing.MockClock) -> None:
    async with (
        open_lookupd(inactive_producer_timeout=300.0) as lookupd,
        open_v1(lookupd) as silent,
        open_v1(lookupd) as pinging,
    ):
        await silent.identify(http_port=4151)
        await pinging.identify(http_port=4152)
        for conn in (silent, pinging):
            assert await conn.command(encode_register("t")) == OK
        for _ in range(4):
            await trio.sleep(100.0)
            assert await pinging.command(encode_ping()) == OK
        found = await lookupd.get("/lookup", topic="t")
        assert [p["http_port"] for p in found["producers"]] == [4152]
        nodes = await lookupd.get("/nodes")
        assert [n["http_port"] for n in nodes["producers"]] == [4152]
        # the silent one is still connected, and a PING brings it back
        assert await silent.command(encode_ping()) == OK
        found = await lookupd.get("/lookup", topic="t")
        assert sorted(p["http_port"] for p in found["producers"]) == [4151, 4152]
