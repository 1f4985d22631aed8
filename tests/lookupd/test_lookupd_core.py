"""The registration DB and the NSQLookupd operations, without sockets (a fake clock)."""

from __future__ import annotations

from nsqbox.lookupd.core import NodeInfo, NSQLookupd, ProducerInfo
from nsqbox.lookupd.options import LookupdOptions
from nsqbox.lookupd.registration_db import (
    ANY,
    Category,
    PeerInfo,
    Registration,
    RegistrationDB,
)
from nsqbox.wire.lookupd import Identify


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_lookupd(**overrides: float) -> tuple[NSQLookupd, FakeClock]:
    clock = FakeClock()
    options = LookupdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
    for name, value in overrides.items():
        setattr(options, name, value)
    return NSQLookupd(options, clock), clock


def identify(lookupd: NSQLookupd, peer_id: str, http_port: int = 4151) -> PeerInfo:
    return lookupd.identify(
        peer_id, peer_id, Identify("10.0.0.1", "host-" + peer_id, 4150, http_port, "1.3.0")
    )


def peer(peer_id: str) -> PeerInfo:
    return PeerInfo(peer_id, peer_id, "h", "b", 1, 2, "v", 0.0)


def test_db_keys_outlive_producers() -> None:
    db = RegistrationDB()
    key = Registration(Category.TOPIC, "t")
    p = peer("a")
    assert db.add_producer(key, p) is True
    assert db.add_producer(key, p) is False
    assert db.remove_producer(key, "a") == (True, 0)
    assert db.remove_producer(key, "a") == (False, 0)
    assert db.find_registrations(Category.TOPIC, "t", "") == [key]
    assert db.find_producers(Category.TOPIC, "t", "") == []
    assert db.remove_producer(Registration(Category.TOPIC, "nope"), "a") == (False, 0)


def test_db_wildcards_and_dedup() -> None:
    db = RegistrationDB()
    a, b = peer("a"), peer("b")
    db.add_producer(Registration(Category.CHANNEL, "t", "c1"), a)
    db.add_producer(Registration(Category.CHANNEL, "t", "c2"), a)
    db.add_producer(Registration(Category.CHANNEL, "t", "c2"), b)
    db.add_producer(Registration(Category.CHANNEL, "u", "c1"), b)
    assert [r.subkey for r in db.find_registrations(Category.CHANNEL, "t", ANY)] == ["c1", "c2"]
    assert [r.key for r in db.find_registrations(Category.CHANNEL, ANY, "c1")] == ["t", "u"]
    assert [p.peer.id for p in db.find_producers(Category.CHANNEL, "t", ANY)] == ["a", "b"]
    assert db.find_registrations(Category.TOPIC, ANY, ANY) == []
    assert len(db.lookup_registrations("a")) == 2
    assert len(db.remove_peer("b")) == 2
    assert db.lookup_registrations("b") == []
    assert len(db.find_registrations(Category.CHANNEL, ANY, ANY)) == 3


def test_register_channel_registers_topic_and_unregister_keeps_keys() -> None:
    lookupd, _ = make_lookupd()
    a = identify(lookupd, "a:1")
    lookupd.register(a, "t", "c")
    assert lookupd.topics() == ["t"]
    assert lookupd.channels("t") == ["c"]
    lookupd.unregister(a, "t", "c")
    assert lookupd.channels("t") == ["c"]
    result = lookupd.lookup("t")
    assert result is not None
    assert result[1] == [ProducerInfo("a:1", "host-a:1", "10.0.0.1", 4150, 4151, "1.3.0")]
    lookupd.unregister(a, "t", "")
    assert lookupd.lookup("t") == (["c"], [])


def test_topic_unregister_also_leaves_its_channels() -> None:
    lookupd, _ = make_lookupd()
    a = identify(lookupd, "a:1")
    lookupd.register(a, "t", "c")
    lookupd.unregister(a, "t", "")
    assert lookupd.db.find_producers(Category.CHANNEL, "t", "c") == []


def test_ephemeral_keys_go_with_their_last_producer() -> None:
    lookupd, _ = make_lookupd()
    a, b = identify(lookupd, "a:1"), identify(lookupd, "b:1")
    for p in (a, b):
        lookupd.register(p, "t#ephemeral", "c#ephemeral")
    lookupd.unregister(a, "t#ephemeral", "c#ephemeral")
    assert lookupd.channels("t#ephemeral") == ["c#ephemeral"]
    lookupd.unregister(b, "t#ephemeral", "c#ephemeral")
    assert lookupd.channels("t#ephemeral") == []
    lookupd.unregister(a, "t#ephemeral", "")
    assert lookupd.topics() == ["t#ephemeral"]
    lookupd.unregister(b, "t#ephemeral", "")
    assert lookupd.topics() == []
    assert lookupd.lookup("t#ephemeral") is None


def test_disconnect_leaves_every_registration() -> None:
    lookupd, _ = make_lookupd()
    a = identify(lookupd, "a:1")
    lookupd.register(a, "t", "c")
    lookupd.disconnect(a)
    assert lookupd.db.lookup_registrations("a:1") == []
    assert lookupd.nodes() == []
    assert lookupd.lookup("t") == (["c"], [])


def test_tombstone_hides_from_lookup_but_not_nodes_until_lifetime() -> None:
    lookupd, clock = make_lookupd(tombstone_lifetime=45.0)
    a, b = identify(lookupd, "a:1", 4151), identify(lookupd, "b:1", 4152)
    for p in (a, b):
        lookupd.register(p, "t", "")
        lookupd.register(p, "u", "")
    lookupd.tombstone_topic_producer("t", "10.0.0.1:4151")
    result = lookupd.lookup("t")
    assert result is not None
    assert [p.http_port for p in result[1]] == [4152]
    nodes = {n.http_port: n for n in lookupd.nodes()}
    assert (nodes[4151].topics, nodes[4151].tombstones) == (["t", "u"], [True, False])
    assert nodes[4152].tombstones == [False, False]
    # a REGISTER while tombstoned keeps the tombstone
    lookupd.register(a, "t", "c")
    result = lookupd.lookup("t")
    assert result is not None
    assert [p.http_port for p in result[1]] == [4152]
    clock.now += 45.0
    result = lookupd.lookup("t")
    assert result is not None
    assert [p.http_port for p in result[1]] == [4151, 4152]
    assert {n.http_port: n.tombstones for n in lookupd.nodes()}[4151] == [False, False]


def test_unregister_while_tombstoned_is_for_good() -> None:
    lookupd, clock = make_lookupd()
    a = identify(lookupd, "a:1")
    lookupd.register(a, "t", "")
    lookupd.tombstone_topic_producer("t", "10.0.0.1:4151")
    lookupd.unregister(a, "t", "")
    clock.now += 100.0
    assert lookupd.lookup("t") == ([], [])
    # registering afresh after the UNREGISTER starts untombstoned
    lookupd.register(a, "t", "")
    result = lookupd.lookup("t")
    assert result is not None
    assert len(result[1]) == 1


def test_inactive_producers_dropped_and_ping_refreshes() -> None:
    lookupd, clock = make_lookupd(inactive_producer_timeout=300.0)
    a, b = identify(lookupd, "a:1", 4151), identify(lookupd, "b:1", 4152)
    lookupd.register(a, "t", "")
    lookupd.register(b, "t", "")
    clock.now += 200.0
    lookupd.ping(b)
    lookupd.ping(None)  # a PING before IDENTIFY is fine
    clock.now += 100.5
    result = lookupd.lookup("t")
    assert result is not None
    assert [p.http_port for p in result[1]] == [4152]
    assert [n.http_port for n in lookupd.nodes()] == [4152]


def test_http_actions() -> None:
    lookupd, _ = make_lookupd()
    lookupd.create_topic("t")
    lookupd.create_channel("u", "c")
    assert lookupd.topics() == ["t", "u"]
    assert lookupd.lookup("t") == ([], [])
    assert lookupd.delete_channel("u", "nope") is False
    assert lookupd.delete_channel("u", "c") is True
    assert lookupd.channels("u") == []
    lookupd.create_channel("t", "c")
    lookupd.delete_topic("t")
    assert lookupd.topics() == ["u"]
    assert lookupd.channels("t") == []


def test_nodes_and_debug_shapes() -> None:
    lookupd, _ = make_lookupd()
    a = identify(lookupd, "a:1")
    lookupd.register(a, "t", "c")
    assert lookupd.nodes() == [
        NodeInfo("a:1", "host-a:1", "10.0.0.1", 4150, 4151, "1.3.0", [False], ["t"])
    ]
    debug = lookupd.debug()
    assert sorted(debug) == ["channel:t:c", "client::", "topic:t:"]
    entry = debug["topic:t:"][0]
    assert entry["id"] == "a:1"
    assert entry["tombstoned"] is False
    assert entry["tombstoned_at"] == 0
    assert entry["last_update"] > 0


def test_identify_response_keys() -> None:
    lookupd, _ = make_lookupd()
    lookupd.tcp_port, lookupd.http_port = 4160, 4161
    body = lookupd.identify_response()
    assert body.startswith(b'{"broadcast_address":"127.0.0.1","hostname":')
    assert body.endswith(b',"http_port":4161,"tcp_port":4160,"version":"1.3.0"}')
