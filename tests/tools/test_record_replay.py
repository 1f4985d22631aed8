"""``nsqbox record`` and ``nsqbox replay`` (issue #34) against a real ``nsqbox up`` child, and
``record`` against real nsqd when its binary is there.

``record`` runs as a child process (it waits for signals); the test publishes once it said it
is recording. ``replay`` runs in this process. No pass/fail here depends on timing: spacing is
measured by ``bench/replay_bench.py``.
"""

from __future__ import annotations

import base64
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqbox import cli
from nsqbox.client import Config
from nsqbox.client.blocking import Publisher
from nsqbox.snapshot.files import (
    SnapshotReader,
    SnapshotWriter,
    check_snapshot,
    open_for_reading,
    open_for_writing,
)
from nsqbox.snapshot.format import Header, MessageLine, message_body
from nsqbox.snapshot.format import Publisher as Publisher_
from nsqbox.tools.record import ROTATE
from tests.helpers import real_nsqd as real_nsqd_process
from tests.tools.box_process import TIMEOUT, BoxProcess, ToolProcess, running_box

BODIES = [b"first", b"two\nlines", b"\xff\x00 not utf-8", "caf\u00e9".encode(), b"last"]


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoxProcess]:
    yield from running_box(tmp_path_factory)


def http(box: BoxProcess) -> str:
    return str(box.ready["nsqd_http_addresses"][0])


def recorded(path: Path) -> list[MessageLine]:
    with open_for_reading(path) as stream:
        return [r for r in SnapshotReader(stream) if isinstance(r, MessageLine)]


def post(url: str, **params: str) -> None:
    response = httpx.post(url, params=params, timeout=TIMEOUT)
    assert response.status_code == 200, response.text


def peek(box: BoxProcess, topic: str, channel: str = "") -> list[bytes]:
    params = {"topic": topic, "body_bytes": "1000", "limit": "1000"}
    if channel:
        params["channel"] = channel
    doc: dict[str, Any] = httpx.get(
        f"http://{http(box)}/nsqbox/peek", params=params, timeout=TIMEOUT
    ).json()
    assert doc["next"] is None
    return [base64.b64decode(m["body"]) for m in doc["messages"]]


def depths(box: BoxProcess, topic: str) -> dict[str, int]:
    doc = httpx.get(
        f"http://{http(box)}/stats", params={"format": "json", "topic": topic}, timeout=TIMEOUT
    ).json()
    return {c["channel_name"]: c["depth"] for t in doc["topics"] or [] for c in t["channels"]}


def record_publishes(box: BoxProcess, topic: str, path: Path) -> list[MessageLine]:
    """Record ``BODIES`` published to ``topic`` (one PUB each, then a DPUB)."""
    rec = ToolProcess(
        "record",
        topic,
        "--to",
        str(path),
        "--count",
        str(len(BODIES) + 1),
        f"--nsqd-http-address={http(box)}",
    )
    try:
        assert "through nsqbox's tap" in rec.ready
        for body in BODIES:
            response = httpx.post(
                f"http://{http(box)}/pub", params={"topic": topic}, content=body, timeout=TIMEOUT
            )
            assert response.status_code == 200
        response = httpx.post(
            f"http://{http(box)}/pub",
            params={"topic": topic, "defer": "60000"},
            content=b"later",
            timeout=TIMEOUT,
        )
        assert response.status_code == 200
        status, out, err = rec.wait()
    finally:
        rec.kill()
    assert status == 0, err
    assert f"recorded {len(BODIES) + 1} messages" in out
    return recorded(path)


def test_record_then_replay_into_a_fresh_topic(box: BoxProcess, tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl.gz"
    lines = record_publishes(box, "rr_src", path)
    summary = check_snapshot(path)
    assert (summary.topics, summary.channels, summary.messages) == (1, 0, len(BODIES) + 1)
    assert [message_body(m) for m in lines] == [*BODIES, b"later"]
    assert [m.delay_ms for m in lines] == [0] * len(BODIES) + [60000]
    stamps = [m.timestamp for m in lines]
    assert stamps == sorted(stamps)
    assert stamps[0] > 0

    post(f"http://{http(box)}/topic/create", topic="rr_copy")
    status = cli.main(
        [
            "replay",
            str(path),
            "--topic",
            "rr_copy",
            "--speed",
            "max",
            f"--nsqd-http-address={http(box)}",
        ]
    )
    assert status == 0
    # the topic has no channel: it holds them all, in order (the DPUB with its delay)
    assert peek(box, "rr_copy") == [*BODIES, b"later"]

    # at 10x: order and count only (spacing is bench/replay_bench.py's)
    status = cli.main(
        [
            "replay",
            str(path),
            "--topic",
            "rr_copy10",
            "--speed",
            "10x",
            f"--nsqd-http-address={http(box)}",
        ]
    )
    assert status == 0
    assert peek(box, "rr_copy10") == [*BODIES, b"later"]


def test_record_keeps_each_publisher(box: BoxProcess, tmp_path: Path) -> None:
    path = tmp_path / "who.jsonl"
    rec = ToolProcess(
        "record", "rr_who", "--to", str(path), "--count", "4", f"--nsqd-http-address={http(box)}"
    )
    config = Config(client_id="billing-7", hostname="billing.example", user_agent="billing/1.0")
    try:
        assert "through nsqbox's tap" in rec.ready
        response = httpx.post(
            f"http://{http(box)}/pub",
            params={"topic": "rr_who"},
            content=b"over http",
            headers={"User-Agent": "curl/8.5.0"},
            timeout=TIMEOUT,
        )
        assert response.status_code == 200
        with Publisher(box.ready["nsqd_tcp_addresses"][0], config=config) as producer:
            producer.pub("rr_who", b"over tcp")
            producer.mpub("rr_who", [b"batch 1", b"batch 2"])
        status, _, err = rec.wait()
    finally:
        rec.kill()
    assert status == 0, err
    lines = recorded(path)
    assert [message_body(m) for m in lines] == [b"over http", b"over tcp", b"batch 1", b"batch 2"]
    http_publisher = lines[0].publisher
    assert http_publisher is not None
    assert (http_publisher.protocol, http_publisher.user_agent) == ("http", "curl/8.5.0")
    assert http_publisher.remote_address.startswith("127.0.0.1:")
    tcp = [m.publisher for m in lines[1:]]
    assert tcp[0] is not None
    assert tcp[0].remote_address.startswith("127.0.0.1:")
    assert tcp[0].remote_address != http_publisher.remote_address  # another connection
    assert (
        tcp
        == [
            Publisher_(
                protocol="tcp",
                client_id="billing-7",
                hostname="billing.example",
                user_agent="billing/1.0",
                remote_address=tcp[0].remote_address,
            )
        ]
        * 3
    )
    # the field is the format's: the recording checks, seeds and replays as any snapshot
    assert check_snapshot(path).messages == 4
    assert b'"publisher":{"protocol":"tcp","client_id":"billing-7"' in path.read_bytes()


def test_a_recording_seeds_a_box(box: BoxProcess, tmp_path: Path) -> None:
    path = tmp_path / "seed.jsonl"
    record_publishes(box, "rr_seed", path)
    post(f"http://{http(box)}/topic/delete", topic="rr_seed")
    status = cli.main(["snapshot", "load", str(path), f"--nsqd-http-address={http(box)}"])
    assert status == 0
    assert peek(box, "rr_seed") == [*BODIES, b"later"]


def test_record_stops_at_sigterm_with_a_whole_file(box: BoxProcess, tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    rec = ToolProcess("record", "rr_term", "--to", str(path), f"--nsqd-http-address={http(box)}")
    try:
        response = httpx.post(
            f"http://{http(box)}/mpub",
            params={"topic": "rr_term"},
            content=b"a\nb\nc",
            timeout=TIMEOUT,
        )
        assert response.status_code == 200
        rec.process.send_signal(signal.SIGTERM)
        status, _, err = rec.wait()
    finally:
        rec.kill()
    assert status == 0, err
    assert check_snapshot(path).messages == len(recorded(path))
    # acknowledged before the signal: the tap had them, and the last read took them
    assert [message_body(m) for m in recorded(path)] == [b"a", b"b", b"c"]
    assert not Path(str(path) + ".part").exists()


def test_record_replaces_its_tap_and_keeps_every_message_once(
    box: BoxProcess, tmp_path: Path
) -> None:
    path = tmp_path / "many.jsonl.gz"
    total = 3 * 5000  # past ROTATE: the tap is replaced while publishing goes on
    assert total > ROTATE
    rec = ToolProcess("record", "rr_many", "--to", str(path), "--count", str(total),
                   f"--nsqd-http-address={http(box)}")  # fmt: skip
    try:
        for batch in range(3):
            content = b"\n".join(b"%d" % (batch * 5000 + i) for i in range(5000))
            response = httpx.post(
                f"http://{http(box)}/mpub",
                params={"topic": "rr_many"},
                content=content,
                timeout=TIMEOUT,
            )
            assert response.status_code == 200
        status, _, err = rec.wait()
    finally:
        rec.kill()
    assert status == 0, err
    lines = recorded(path)
    assert [message_body(m) for m in lines] == [b"%d" % i for i in range(total)]
    assert len({m.id for m in lines}) == total


def test_replay_into_one_channel_only(box: BoxProcess, tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    record_publishes(box, "rr_chsrc", path)
    post(f"http://{http(box)}/topic/create", topic="rr_ch")
    for channel in ("billing", "audit"):
        post(f"http://{http(box)}/channel/create", topic="rr_ch", channel=channel)
    status = cli.main(
        [
            "replay",
            str(path),
            "--topic",
            "rr_ch",
            "--channel",
            "billing",
            "--speed",
            "max",
            f"--nsqd-http-address={http(box)}",
        ]
    )
    assert status == 0
    assert depths(box, "rr_ch") == {"billing": len(BODIES), "audit": 0}
    assert peek(box, "rr_ch", "billing") == [*BODIES, b"later"]
    assert peek(box, "rr_ch", "audit") == []
    doc = httpx.get(
        f"http://{http(box)}/nsqbox/peek",
        params={"topic": "rr_ch", "channel": "billing"},
        timeout=TIMEOUT,
    ).json()
    assert doc["deferred_count"] == 1  # the DPUB, deferred in that channel only


def test_a_damaged_file_is_refused_and_publishes_nothing(
    box: BoxProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rec.jsonl"
    record_publishes(box, "rr_dsrc", path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b'"timestamp"', b'"timestamq"')
    path.write_bytes(b"".join(lines))
    status = cli.main(
        ["replay", str(path), "--topic", "rr_damaged", f"--nsqd-http-address={http(box)}"]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert "refused, nothing published: line 5:" in err
    doc = httpx.get(f"http://{http(box)}/stats", params={"format": "json"}, timeout=TIMEOUT)
    assert "rr_damaged" not in {t["topic_name"] for t in doc.json()["topics"]}


def test_channel_route_bounds(box: BoxProcess) -> None:
    url = f"http://{http(box)}/nsqbox/channel/mpub"
    bad = httpx.post(url, params={"topic": "rr_b", "channel": "c"}, content=b"\x00\x00\x00\x05")
    assert (bad.status_code, bad.json()["message"]) == (413, "BAD_MESSAGE")
    bad = httpx.post(url, params={"topic": "rr_b", "channel": "c", "defer": "-1"}, content=b"")
    assert (bad.status_code, bad.json()["message"]) == (400, "INVALID_DEFER")
    bad = httpx.post(url, params={"topic": "rr_b"}, content=b"")
    assert (bad.status_code, bad.json()["message"]) == (400, "MISSING_ARG_CHANNEL")


def test_channel_route_refuses_another_origin(box: BoxProcess) -> None:
    url = f"http://{http(box)}/nsqbox/channel/mpub"
    one = b"\x00\x00\x00\x01\x00\x00\x00\x02hi"
    refused = httpx.post(
        url,
        params={"topic": "rr_evil", "channel": "c"},
        content=one,
        headers={"Origin": "http://evil.example"},
        timeout=TIMEOUT,
    )
    assert refused.status_code == 403
    assert depths(box, "rr_evil") == {}
    accepted = httpx.post(url, params={"topic": "rr_evil", "channel": "c"}, content=one)
    assert accepted.status_code == 200
    assert peek(box, "rr_evil", "c") == [b"hi"]


def test_channel_route_is_off_under_auth(tmp_path_factory: pytest.TempPathFactory) -> None:
    # it publishes without the authorization PUB needs: with auth, nsqd answers 404 as real
    # nsqd does (the auth server is never asked: no client AUTHs here)
    for authed in running_box(tmp_path_factory, "--auth-http-address=127.0.0.1:1"):
        url = f"http://{http(authed)}/nsqbox/channel/mpub"
        one = b"\x00\x00\x00\x01\x00\x00\x00\x02hi"
        answer = httpx.post(url, params={"topic": "t", "channel": "c"}, content=one)
        assert answer.status_code == 404
        stats = httpx.get(f"http://{http(authed)}/stats", params={"format": "json"}).json()
        assert stats["topics"] == []


def test_replay_step_by_step_under_the_manual_clock(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rec.jsonl.gz"
    t0 = 1_795_833_104_000_000_000
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(nsqbox_snapshot=1, nodes=1, saved_at_ns=t0))
        writer.topic(0, "rec", False)
        for i, body in enumerate(BODIES):  # one a second
            writer.message(0, "rec", None, b"%016x" % i, t0 + i * 10**9, 0, body)
        writer.finish()
    for manual in running_box(tmp_path_factory, "--clock=manual"):
        url = f"http://{http(manual)}"
        post(f"{url}/topic/create", topic="rr_step")
        post(f"{url}/channel/create", topic="rr_step", channel="c")
        capsys.readouterr()
        status = cli.main(
            [
                "replay",
                str(path),
                "--topic",
                "rr_step",
                "--step",
                f"--nsqd-http-address={http(manual)}",
            ]
        )
        assert status == 0
        out = capsys.readouterr().out
        assert f"replaying {len(BODIES)} messages to rr_step under the broker clock" in out
        assert "1 published at once" in out
        assert depths(manual, "rr_step") == {"c": 1}
        for second in range(1, len(BODIES)):
            # each advance answers once the message due in it was published, not before
            advance = httpx.post(
                f"{url}/nsqbox/clock/advance", params={"by": "1s"}, timeout=TIMEOUT
            )
            assert advance.status_code == 200, advance.text
            assert depths(manual, "rr_step") == {"c": second + 1}
        assert peek(manual, "rr_step", "c") == BODIES
        assert httpx.get(f"{url}/nsqbox/replay/step", timeout=TIMEOUT).json() == {"replays": []}


def test_replay_step_needs_the_manual_clock(
    box: BoxProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rec.jsonl"
    record_publishes(box, "rr_nostepsrc", path)
    capsys.readouterr()
    status = cli.main(
        ["replay", str(path), "--topic", "rr_nostep", "--step", f"--nsqd-http-address={http(box)}"]
    )
    assert status == 1
    assert "--step follows a manual broker clock" in capsys.readouterr().err
    assert depths(box, "rr_nostep") == {}


@pytest.fixture
def real_nsqd(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A real nsqd on 127.0.0.1: (tcp, http) addresses."""
    with real_nsqd_process(tmp_path) as (tcp, web):
        yield tcp, web


def test_record_and_replay_against_real_nsqd(
    real_nsqd: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tcp, web = real_nsqd
    path = tmp_path / "real.jsonl"
    rec = ToolProcess(
        "record",
        "orders",
        "--to",
        str(path),
        "--count",
        "3",
        f"--nsqd-http-address={web}",
        f"--nsqd-tcp-address={tcp}",
    )
    try:
        assert "#ephemeral (no tap: real nsqd)" in rec.ready
        response = httpx.post(
            f"http://{web}/mpub", params={"topic": "orders"}, content=b"r1\nr2\nr3", timeout=TIMEOUT
        )
        assert response.status_code == 200
        status, _, err = rec.wait()
    finally:
        rec.kill()
    assert status == 0, err
    assert [message_body(m) for m in recorded(path)] == [b"r1", b"r2", b"r3"]
    assert [m.publisher for m in recorded(path)] == [None] * 3  # nsqd does not keep them

    # plain replay works on real nsqd; --channel is refused before anything is published
    post(f"http://{web}/topic/create", topic="copy")
    post(f"http://{web}/channel/create", topic="copy", channel="c")
    assert cli.main(["replay", str(path), "--topic", "copy", f"--nsqd-http-address={web}"]) == 0
    stats = httpx.get(f"http://{web}/stats", params={"format": "json", "topic": "copy"}).json()
    assert stats["topics"][0]["channels"][0]["depth"] == 3
    capsys.readouterr()
    status = cli.main(
        ["replay", str(path), "--topic", "other", "--channel", "c", f"--nsqd-http-address={web}"]
    )
    assert status == 1
    assert "--channel needs nsqbox" in capsys.readouterr().err
    status = cli.main(
        ["replay", str(path), "--topic", "other", "--step", f"--nsqd-http-address={web}"]
    )
    assert status == 1
    assert "--step needs nsqbox" in capsys.readouterr().err
    topics = httpx.get(f"http://{web}/stats", params={"format": "json"}).json()["topics"]
    assert "other" not in {t["topic_name"] for t in topics}


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("signals")
