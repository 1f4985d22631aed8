"""The blocking consumer's seams for code that drives several consumers (the Spark reader).

``negotiated`` (nsqd's IDENTIFY reply), ``set_rdy`` (RDY decided outside the consumer) and
``Message.responder`` (the consumer a message answers through) are public, so the reader
needs none of the consumer's private parts. Each is checked against a real nsqd's state.
"""

from __future__ import annotations

import ast
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import nsqbox
from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer, Publisher
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd
from tests.client.helpers import TrioThread, tcp
from tests.conftest import make_options

MAX_RDY = 50


@pytest.fixture
def trio_thread() -> Iterator[TrioThread]:
    with TrioThread() as thread:
        yield thread


@pytest.fixture
def nsqd(trio_thread: TrioThread) -> NSQDAddresses:
    options = make_options(
        data_path=tempfile.mkdtemp(prefix="nsqbox-seams-"),
        max_rdy_count=MAX_RDY,
        msg_timeout=42.0,
        max_msg_timeout=600.0,
    )
    addrs: NSQDAddresses = trio_thread.start(serve_nsqd, options)
    return addrs


def server_rdy(nsqd: NSQDAddresses) -> list[tuple[int, int]]:
    """(RDY, in flight) of every client of channel t/c, on the server's thread."""
    channel = nsqd.nsqd.topics["t"].channels["c"]
    return [(c.ready_count, c.in_flight_count) for c in channel.clients.values()]


def test_negotiated_is_nsqds_identify_reply(nsqd: NSQDAddresses) -> None:
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=0)) as consumer:
        assert consumer.negotiated.max_rdy_count == MAX_RDY
        assert consumer.negotiated.msg_timeout == 42.0
        assert consumer.negotiated.max_msg_timeout == 600.0
    with BlockingConsumer(
        tcp(nsqd), "t", "c", config=Config(max_in_flight=0, msg_timeout=7.5)
    ) as consumer:
        assert consumer.negotiated.msg_timeout == 7.5  # what the client asked for, granted


def test_set_rdy_is_the_only_rdy_of_a_consumer_at_max_in_flight_0(
    trio_thread: TrioThread, nsqd: NSQDAddresses
) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.mpub("t", [b"%d" % i for i in range(5)])
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=0)) as consumer:
        trio_thread.wait_for(lambda: server_rdy(nsqd) == [(0, 0)])
        assert consumer.total_rdy == 0
        consumer.set_rdy(3)
        assert consumer.total_rdy == 3
        trio_thread.wait_for(lambda: server_rdy(nsqd) == [(3, 3)])  # three delivered, no more
        got = []
        while len(got) < 3:
            got += consumer.receive(timeout=5.0)
        assert len(got) == 3
        assert all(message.responder is consumer for message in got)
        for message in got:
            message.finish()
        # receiving and finishing sent no RDY of the consumer's own: nsqd still holds 3
        trio_thread.wait_for(lambda: server_rdy(nsqd) == [(3, 2)])
        consumer.set_rdy(0)
        trio_thread.wait_for(lambda: server_rdy(nsqd)[0][0] == 0)
        assert consumer.total_rdy == 0


def test_set_rdy_waits_for_the_end_of_a_batch(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=0)) as consumer:
        with consumer.batched_answers():
            consumer.set_rdy(2)
            assert trio_thread.call(lambda: server_rdy(nsqd)) == [(0, 0)]  # not sent yet
        trio_thread.wait_for(lambda: server_rdy(nsqd) == [(2, 0)])


def test_set_rdy_refuses_what_nsqd_would_refuse(nsqd: NSQDAddresses) -> None:
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=0)) as consumer:
        consumer.set_rdy(MAX_RDY)
        with pytest.raises(ValueError, match=f"RDY {MAX_RDY + 1} is outside 0..{MAX_RDY}"):
            consumer.set_rdy(MAX_RDY + 1)
        with pytest.raises(ValueError, match="outside"):
            consumer.set_rdy(-1)
        assert consumer.total_rdy == MAX_RDY


def test_set_rdy_is_refused_when_the_consumer_keeps_rdy_itself(nsqd: NSQDAddresses) -> None:
    config = Config(max_in_flight=4)
    with (
        BlockingConsumer(tcp(nsqd), "t", "c", config=config) as consumer,
        pytest.raises(RuntimeError, match="max_in_flight=4"),
    ):
        consumer.set_rdy(1)


def test_the_spark_reader_uses_no_private_part_of_another_object() -> None:
    # ``x._name`` with x neither self nor cls, or getattr(x, "_name"): reaching around an API
    package = Path(nsqbox.__file__).parent / "spark"
    reached = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = ""
            if isinstance(node, ast.Attribute) and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            ):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
            ):
                name = str(node.args[1].value)
            if name.startswith("_") and not name.startswith("__"):
                reached.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert reached == []
    assert (package / "fetch.py").is_file()  # the walk read the reader's modules
