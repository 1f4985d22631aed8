"""The remembered answers on the hot paths are bounded and give the uncached answers.

Each is :func:`functools.lru_cache` on a pure function: a peer sending ever new
names, queries or answers makes the least recently used ones forgotten, never a
table that grows.
"""

from __future__ import annotations

from nsqbox.http import protocol
from nsqbox.http.messages import HTTPError, Response
from nsqbox.nsqd import http_api
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


def test_small_answers_are_encoded_once_and_large_ones_each_time() -> None:
    protocol._encode_small.cache_clear()
    ok = Response.text("OK")
    first = protocol._fast_encode(ok)
    assert first is not None
    assert first.endswith(b"Content-Length: 2\r\n\r\nOK")
    assert protocol._fast_encode(Response.text("OK")) == first  # an equal answer: remembered
    assert protocol._encode_small.cache_info().hits == 1
    large = Response.text(b"x" * (protocol._ENCODED_MAX_BODY + 1))
    assert protocol._fast_encode(large) is not None
    assert protocol._encode_small.cache_info().currsize == 1  # not kept
    bound = protocol._encode_small.cache_info().maxsize
    assert bound is not None
    for n in range(bound + 10):
        protocol._fast_encode(Response.error(HTTPError(400, f"E{n}")))
    assert protocol._encode_small.cache_info().currsize == bound


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
