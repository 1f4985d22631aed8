"""The remembered answers on the hot paths are bounded and give the uncached answers.

Each is :func:`functools.lru_cache` on a pure function: a peer sending ever new
names, queries or answers makes the least recently used ones forgotten, never a
table that grows.
"""

from __future__ import annotations

from nsqbox.http import fastpath, protocol
from nsqbox.http.messages import Response
from nsqbox.nsqd.routes import nsqd as http_api
from nsqbox.wire.names import is_valid_name


def test_topic_names_found_valid_are_remembered_up_to_a_bound() -> None:
    bound = is_valid_name.cache_info().maxsize
    assert bound is not None
    names = [f"t{n}" for n in range(bound + 100)]
    assert all(is_valid_name(name) for name in names)
    assert not is_valid_name("bad!name")
    assert not is_valid_name("a" * 65)
    assert is_valid_name.cache_info().currsize == bound
    assert is_valid_name(names[0])  # forgotten, found valid again


def test_answer_heads_are_written_by_h11_once_and_remembered_up_to_a_bound() -> None:
    heads = fastpath._answer_head
    heads.cache_clear()
    ok = protocol._fast_encode(Response.text("OK"))
    assert ok is not None
    assert ok.endswith(b"Content-Length: 2\r\n\r\nOK")
    assert protocol._fast_encode(Response.text("OK")) == ok  # an equal answer: remembered
    assert protocol._fast_encode(Response.text("no")) == ok[:-2] + b"no"  # the same head
    assert heads.cache_info().hits == 2
    bound = heads.cache_info().maxsize
    assert bound is not None
    for n in range(bound + 10):
        protocol._fast_encode(Response.text(b"x" * n))  # a head per length
    assert heads.cache_info().currsize == bound
    # h11 refuses a body for 204, so the connection's h11 must encode (and refuse) it
    assert protocol._fast_encode(Response(204, b"x")) is None


def test_pub_queries_are_read_as_nsqd_reads_them_and_remembered_up_to_a_bound() -> None:
    pub_query = http_api._pub_query
    assert pub_query("topic=t") == ("t", "", None)
    assert pub_query("topic=%74&defer=5") == ("t", "", 5)
    assert pub_query("topic=t&defer=x").defer_ms is False
    assert pub_query("topic=t&defer=0").defer_ms == 0
    assert pub_query("topic=t&defer=0").defer_ms is not False
    assert pub_query("").error == "MISSING_ARG_TOPIC"
    assert pub_query("topic=bad!").error == "INVALID_TOPIC"
    assert pub_query("topic=%zz").error == "INVALID_REQUEST"
    bound = pub_query.cache_info().maxsize
    assert bound is not None
    for n in range(bound + 10):
        assert pub_query(f"topic=t&n={n}").topic == "t"
    assert pub_query.cache_info().currsize == bound
