"""``nsqbox journey ID`` and ``nsqbox trace TOPIC`` (issue #33) against a real ``nsqbox up``
child with two nsqds, and against real nsqd when its binary is there.

``journey`` runs in this process; ``trace`` runs as a child (it follows until ``-n`` events
or a signal), and the test publishes once it said it follows. No pass/fail here depends on
timing: how fast ``trace`` keeps up is measured by ``bench/trace_bench.py``.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqbox import cli
from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer, Publisher
from tests.helpers import real_nsqd as real_nsqd_process
from tests.tools.box_process import NSQBOX, TIMEOUT, BoxProcess, ToolProcess, running_box

#: A user agent that would talk to a terminal: OSC 0 (set the window title), then BEL.
EVIL_AGENT = "agent\x1b]0;pwned\x07"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory, "--nsqd-count", "2")


def http(box: BoxProcess, node: int = 0) -> str:
    return str(box.ready["nsqd_http_addresses"][node])


def tcp(box: BoxProcess, node: int = 0) -> str:
    return str(box.ready["nsqd_tcp_addresses"][node])


def journal(box: BoxProcess, node: int, **params: str) -> list[dict[str, Any]]:
    url = f"http://{http(box, node)}/nsqbox/journal"
    response = httpx.get(url, params=params, timeout=TIMEOUT)
    response.raise_for_status()
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def publish(box: BoxProcess, topic: str, body: bytes, node: int = 0, agent: str = "") -> str:
    """Publish one message on nsqd ``node`` (with a channel ``c``); its id."""
    for path, params in (("/topic/create", {}), ("/channel/create", {"channel": "c"})):
        url = f"http://{http(box, node)}{path}"
        httpx.post(url, params={"topic": topic, **params}, timeout=TIMEOUT).raise_for_status()
    config = Config(user_agent=agent) if agent else None
    with Publisher(tcp(box, node), config=config) as publisher:
        publisher.pub(topic, body)
    events = journal(box, node, topic=topic, kind="published")
    return str(events[-1]["id"])


def test_journey_prints_each_event_of_one_message_with_wire_text_escaped(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    msg_id = publish(box, "jt_one", b"hello", agent=EVIL_AGENT)
    status = cli.main(["journey", msg_id, f"--nsqd-http-address={http(box)}"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert [line.split()[2] for line in lines] == ["published", "queued"]
    assert "jt_one/c" in lines[1]
    assert "user_agent=agent\\x1b]0;pwned\\x07" in lines[0]
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "via=PUB" in lines[0]
    assert "size=5" in lines[0]


def test_journey_prints_a_deadline_as_it_prints_the_time(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    msg_id = publish(box, "jt_deadline", b"due")
    with BlockingConsumer(tcp(box), "jt_deadline", "c") as consumer:
        for message in consumer.messages(timeout=TIMEOUT):
            message.finish()
            break
    status = cli.main(["journey", msg_id, f"--nsqd-http-address={http(box)}", "--json"])
    out, _ = capsys.readouterr()
    (delivered,) = [e for e in map(json.loads, out.splitlines()) if e["kind"] == "delivered"]
    assert status == 0
    assert isinstance(delivered["deadline"], int)  # --json keeps broker ns
    status = cli.main(["journey", msg_id, f"--nsqd-http-address={http(box)}"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    (line,) = [line for line in out.splitlines() if line.split()[2] == "delivered"]
    seconds, ns = divmod(delivered["deadline"], 1_000_000_000)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
    assert f'deadline="{stamp}.{ns // 1000:06d}"' in line
    assert line.startswith(stamp[:10])  # the event's time, in the same form


def test_journey_json_and_a_cluster_through_the_lookupd(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    msg_id = publish(box, "jt_two", b"on node 1", node=1, agent=EVIL_AGENT)
    lookupd = box.ready["lookupd_http_address"]
    status = cli.main(["journey", msg_id, f"--lookupd-http-address={lookupd}", "--json"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    assert "\x1b" not in out
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["kind"], e["node"]) for e in events] == [
        ("published", http(box, 1)),
        ("queued", http(box, 1)),
    ]
    assert events[0]["user_agent"] == EVIL_AGENT  # the JSON escapes it, the value is kept
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)


def test_journey_of_an_unknown_id_and_bad_arguments(
    box: BoxProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["journey", "0" * 16, f"--nsqd-http-address={http(box)}"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert "no events of 0000000000000000" in err
    assert cli.main(["journey", "not-an-id", f"--nsqd-http-address={http(box)}"]) == 1
    assert "invalid message id" in capsys.readouterr().err
    # 16 characters, not hex: refused, not answered "no events"
    assert cli.main(["journey", "z" * 16, f"--nsqd-http-address={http(box)}"]) == 1
    assert "invalid message id 'zzzzzzzzzzzzzzzz' (16 hex digits)" in capsys.readouterr().err
    # an id pasted in upper case is the same message (nsqd writes them in lower case)
    msg_id = publish(box, "jt_upper", b"upper")
    assert cli.main(["journey", msg_id.upper(), f"--nsqd-http-address={http(box)}"]) == 0
    assert " published " in capsys.readouterr().out
    # a kind nsqd does not name is said at once, not reported as the node's answer
    assert (
        cli.main(["trace", "jt_upper", "--kind", "bogus", f"--nsqd-http-address={http(box)}"]) == 1
    )
    err = capsys.readouterr().err
    assert "unknown kind 'bogus' (kinds: published, queued," in err
    assert http(box) not in err
    both = ["journey", "0" * 16, "--nsqd-http-address=a:1", "--lookupd-http-address=b:2"]
    assert cli.main(both) == 1
    assert "not both" in capsys.readouterr().err


def test_trace_follows_a_topic_on_every_node(box: BoxProcess) -> None:
    lookupd = box.ready["lookupd_http_address"]
    tracer = ToolProcess(
        "trace", "jt_live", f"--lookupd-http-address={lookupd}", "--json", "-n", "4"
    )
    try:
        assert "following jt_live on 2 nsqd(s)" in tracer.ready
        first = publish(box, "jt_live", b"zero", node=0)
        second = publish(box, "jt_live", b"one", node=1, agent=EVIL_AGENT)
        status, out, err = tracer.wait()
    finally:
        tracer.kill()
    assert (status, err) == (0, "")
    assert "\x1b" not in out
    events = [json.loads(line) for line in out.splitlines()]
    assert sorted((e["id"], e["kind"], e["node"]) for e in events) == sorted(
        [
            (first, "published", http(box, 0)),
            (first, "queued", http(box, 0)),
            (second, "published", http(box, 1)),
            (second, "queued", http(box, 1)),
        ]
    )


def test_trace_of_one_channel_prints_lines_until_stopped(box: BoxProcess) -> None:
    tracer = ToolProcess(
        "trace", "jt_lines", "c", f"--nsqd-http-address={http(box)}", "--kind", "queued"
    )
    try:
        msg_id = publish(box, "jt_lines", b"x", agent=EVIL_AGENT)
        assert tracer.process.stdout is not None
        readable, _, _ = select.select([tracer.process.stdout], [], [], TIMEOUT)
        assert readable
        line = tracer.process.stdout.readline().decode()
        tracer.process.terminate()  # SIGTERM: a clean stop
        status, _, err = tracer.wait()
    finally:
        tracer.kill()
    assert (status, err) == (0, "")
    assert line.split()[2:5] == ["queued", "jt_lines/c", msg_id]
    assert "to=memory" in line


#: ``nsqbox`` with the collector's statistics printed at exit (on stderr, from the first
#: collection of the interpreter's shutdown on).
GC_AT_EXIT = (
    "import atexit, gc, sys; atexit.register(gc.set_debug, gc.DEBUG_STATS); "
    "from nsqbox.cli import main; sys.exit(main())"
)


def test_trace_n_exits_once_it_printed_its_events_without_walking_the_heap(
    box: BoxProcess, tmp_path: Path
) -> None:
    # Python's shutdown ran full collections over every object start-up made, after the
    # last line (0.1 s idle, over a second on a busy machine): the trace moves them out of
    # the collector's reach at exit, so what is left to walk is what came after start-up
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as stderr:
        tracer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                GC_AT_EXIT,
                "trace",
                "jt_exit",
                f"--nsqd-http-address={http(box)}",
                "-n",
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + TIMEOUT
        while "following jt_exit" not in errors.read_text():
            assert tracer.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, errors.read_text()
            time.sleep(0.02)
        msg_id = publish(box, "jt_exit", b"one")
        out, _ = tracer.communicate(timeout=TIMEOUT)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.communicate(timeout=TIMEOUT)
    assert tracer.returncode == 0
    assert [line.split()[2:5] for line in out.decode().splitlines()] == [
        ["published", "jt_exit", msg_id]
    ]
    err = errors.read_text()
    tracked = [
        sum(int(n) for n in line.split(":")[-1].split())
        for line in err.splitlines()
        if line.startswith("gc: objects in each generation:")
    ]
    frozen = [
        int(line.split(":")[-1])
        for line in err.splitlines()
        if line.startswith("gc: objects in permanent generation:")
    ]
    assert tracked, err  # the shutdown's collections were seen
    assert min(frozen) > 10_000  # start-up's objects (some 38,000), out of the walk
    assert max(tracked) < 5_000  # what each collection walked: a few hundred


@pytest.fixture
def lone_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    """A box of its own (one nsqd), for a test that crashes or stops it."""
    process = BoxProcess(tmp_path_factory.mktemp("lone"))
    try:
        yield process
    finally:
        process.kill()


def stderr_until(tracer: ToolProcess, text: str) -> str:
    """What the tracer writes on stderr, read until ``text`` is in it (at most TIMEOUT)."""
    assert tracer.process.stderr is not None
    fd = tracer.process.stderr.fileno()
    seen = b""
    while text.encode() not in seen:
        readable, _, _ = select.select([fd], [], [], TIMEOUT)
        assert readable, f"no {text!r} on stderr; so far: {seen!r}"
        more = os.read(fd, 65536)
        assert more, f"stderr ended without {text!r}: {seen!r}"
        seen += more
    return seen.decode()


def node_control(box: BoxProcess, action: str) -> None:
    """Crash or start the box's nsqd through the admin's node control."""
    url = box.url("admin_http_address", f"/api/faults/{action}")
    response = httpx.post(url, params={"node": "0"}, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    assert response.json()["running"] is (action == "start")


def test_trace_follows_a_node_again_after_it_restarts(lone_box: BoxProcess) -> None:
    node = http(lone_box)
    tracer = ToolProcess(
        "trace", "jt_back", f"--nsqd-http-address={node}", "--kind", "published", "-n", "2"
    )
    try:
        assert "following jt_back on 1 nsqd(s)" in tracer.ready
        node_control(lone_box, "crash")
        lost = stderr_until(tracer, "\n")
        node_control(lone_box, "start")
        # most likely before the trace is back (it tries every second): printed all the same
        early = publish(lone_box, "jt_back", b"before the trace is back")
        back = stderr_until(tracer, f"following {node} again\n")
        msg_id = publish(lone_box, "jt_back", b"after the restart")
        status, out, err = tracer.wait()
    finally:
        tracer.kill()
    # a person's words, not the HTTP client's ("incomplete chunked read")
    assert lost.startswith(
        f"nsqbox trace: lost the stream to {node}: it closed; following it again"
    )
    assert "(trying every 1s for up to 60s)" in lost
    assert (status, err) == (0, "")
    assert "chunked" not in lost + back
    assert [line.split()[2:5] for line in out.splitlines()] == [
        ["published", "jt_back", early],
        ["published", "jt_back", msg_id],
    ]


def test_trace_exits_1_when_the_box_stays_gone(lone_box: BoxProcess) -> None:
    node = http(lone_box)
    tracer = ToolProcess(
        "trace", "jt_gone", f"--nsqd-http-address={node}", "--reconnect-timeout=1s"
    )
    try:
        assert "following jt_gone on 1 nsqd(s)" in tracer.ready
        assert lone_box.stop() == 0
        status, out, err = tracer.wait()  # within TIMEOUT: the bound is 1s
    finally:
        tracer.kill()
    assert (status, out) == (1, "")
    assert "(trying every 1s for up to 1s)" in err
    assert f"nsqbox trace: gave up on {node}: gone for 1s (--reconnect-timeout)" in err
    assert err.rstrip().endswith("no nsqd left to follow")
    assert "Traceback" not in err
    assert "chunked" not in err


@pytest.fixture
def empty_answers() -> Iterator[str]:
    """A peer that answers every HTTP request ``200`` with an empty body: its address."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(TIMEOUT)
                request = b""
                while b"\r\n\r\n" not in request:
                    more = conn.recv(4096)
                    if not more:
                        break
                    request += more
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        host, port = listener.getsockname()
        yield f"{host}:{port}"
    finally:
        stop.set()
        thread.join(TIMEOUT)
        listener.close()


def trace_finds_nothing_to_follow(address: str) -> bytes:
    """``nsqbox trace`` of the nsqd at ``address``, which it cannot follow: it exits 1 at
    once, in words; its stderr."""
    traced = subprocess.run(
        [*NSQBOX, "trace", "t", f"--nsqd-http-address={address}"],
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert traced.returncode == 1
    assert b"no nsqd to follow" in traced.stderr
    assert b"Traceback" not in traced.stderr
    return traced.stderr


def test_trace_of_a_peer_whose_stream_never_starts(empty_answers: str) -> None:
    err = trace_finds_nothing_to_follow(empty_answers)
    assert f"{empty_answers}: the stream ended before it started".encode() in err


def test_trace_refuses_a_negative_reconnect_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["trace", "t", "--reconnect-timeout=-1s"]) == 1
    assert "--reconnect-timeout must not be negative" in capsys.readouterr().err


@pytest.fixture
def real_nsqd(tmp_path: Path) -> Iterator[str]:
    """A real nsqd on 127.0.0.1: its HTTP address."""
    with real_nsqd_process(tmp_path) as (_, web):
        yield web


def test_real_nsqd_is_not_supported_in_one_clear_line(
    real_nsqd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["journey", "0" * 16, f"--nsqd-http-address={real_nsqd}"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert f"not supported by this nsqd: {real_nsqd} has no journal route" in err
    assert "Traceback" not in err
    assert b"not supported by this nsqd" in trace_finds_nothing_to_follow(real_nsqd)
