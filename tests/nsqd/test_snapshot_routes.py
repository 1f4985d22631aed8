"""nsqd's ``/nsqbox/snapshot`` routes on real sockets: a cut fetched in pieces and loaded into
another nsqd node by node (``nsqbox snapshot --nsqd-http-address``), their refusals, the
Host check, and no routes at all under ``--auth-http-address``."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.nsqd.routes.snapshot import MAX_UPLOAD_BYTES, READ_PIECE_BYTES
from nsqbox.snapshot import transfer
from nsqbox.snapshot.files import SnapshotReader, SnapshotWriter, check_snapshot, open_for_reading
from nsqbox.snapshot.format import MessageLine, SnapshotError
from nsqbox.snapshot.spool import SpoolConverter
from nsqbox.tools import snapshot as snapshot_tool
from nsqbox.tools.common import parse_args
from tests.helpers import publish
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
        with trio.fail_after(TIMEOUT * 6):
            yield http


def spools(path: Path) -> list[Path]:
    """The snapshot files (spools, uploads) left in a data path."""
    return list(path.glob("nsqbox.snapshot.*"))


def tool(*args: str) -> str:
    flags = snapshot_tool.snapshot_flag_set()
    out = io.StringIO()
    assert snapshot_tool.run(flags, parse_args(flags, args), out) == 0
    return out.getvalue()


async def two_nodes(
    nursery: trio.Nursery, tmp_path: Path, second: str, **options: object
) -> tuple[NSQDWithHTTP, NSQDWithHTTP]:
    """Two nsqds, in ``tmp_path/one`` and ``tmp_path/<second>`` (with ``options``): the first
    keeps three messages in memory and has channel ``c`` of topic ``t``."""
    for name in ("one", second):
        (tmp_path / name).mkdir()
    one = await start_nsqd_http(nursery, tmp_path / "one", mem_queue_size=3)
    other = await start_nsqd_http(nursery, tmp_path / second, **options)
    one.nsqd.get_topic("t").get_channel("c")
    return one, other


async def test_save_and_load_node_by_node(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    one, two = await two_nodes(nursery, tmp_path, "two")
    bodies = [b"%d" % i * 5000 for i in range(300)]  # more than a 1 MiB piece, mostly on disk
    await publish(one.tcp, "t", *bodies)
    path = tmp_path / "s.jsonl"
    printed = await trio.to_thread.run_sync(tool, "save", str(path), "--nsqd-http-address", one.url)
    assert printed.endswith("300 messages in 1 topic and 1 channel on 1 nsqd(s)\n")
    assert path.stat().st_size > 1024 * 1024
    assert check_snapshot(path).messages == 300
    assert spools(tmp_path / "one") == []  # the spool is gone
    printed = await trio.to_thread.run_sync(tool, "load", str(path), "--nsqd-http-address", two.url)
    assert printed == f"loaded {path}: 300 messages into 1 nsqd(s)\n"
    channel = two.nsqd.topics["t"].channels["c"]
    assert (channel.depth(), len(channel.memory), channel.backend_depth()) == (300, 3, 297)
    assert spools(tmp_path / "two") == []  # the upload is gone
    assert channel.backend.pop() is not None


async def test_a_cut_is_fetched_in_pieces_of_at_most_read_piece_bytes(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    server.nsqd.get_topic("t").get_channel("c")
    for half in range(2):  # 5.4 MB, in two MPUBs under --max-body-size
        await publish(
            server.tcp, "t", *[b"%03d" % i * 20_000 for i in range(45 * half, 45 * half + 45)]
        )
    cut = (await client.post(f"{server.url}/nsqbox/snapshot", params={"node": 0})).json()
    assert cut["bytes"] > READ_PIECE_BYTES
    pieces = []
    while (offset := sum(map(len, pieces))) < cut["bytes"]:
        params = {"id": cut["id"], "offset": offset}
        response = await client.get(f"{server.url}/nsqbox/snapshot", params=params)
        assert response.status_code == 200
        pieces.append(response.content)
    assert [len(p) for p in pieces] == [READ_PIECE_BYTES, cut["bytes"] - READ_PIECE_BYTES]
    # the spool's sections, made snapshot lines as the saver makes them
    lines = io.BytesIO()
    writer = SnapshotWriter(lines, None)
    converter = SpoolConverter(writer)
    for piece in pieces:
        converter.feed(piece)
    converter.close()
    writer.finish()
    assert lines.getvalue().count(b"\n") == 1 + 1 + 90  # a topic, a channel, the messages
    assert (writer.topics, writer.channels, writer.messages) == (1, 1, 90)


async def test_a_load_is_staged_and_a_body_over_max_msg_size_loads_nothing(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    # the file is read once: every record is staged (the disk-bound ones in an unlinked file
    # in the data path) and applied only once the whole file passed
    one, small = await two_nodes(nursery, tmp_path, "small", mem_queue_size=3, max_msg_size=100)
    await publish(one.tcp, "t", *[b"%03d" % i for i in range(20)], b"x" * 101, b"last")
    path = tmp_path / "s.jsonl"
    await trio.to_thread.run_sync(tool, "save", str(path), "--nsqd-http-address", one.url)
    lines = path.read_bytes().splitlines(keepends=True)
    big = next(n for n, line in enumerate(lines, 1) if b'"body":"xxx' in line)
    upload = {"id": "0" * 32, "offset": 0}
    response = await client.post(
        f"{small.url}/nsqbox/snapshot/upload", params=upload, content=b"".join(lines)
    )
    assert response.status_code == 200, response.text
    response = await client.post(
        f"{small.url}/nsqbox/snapshot/load", params={"id": "0" * 32, "node": 0}
    )
    assert (response.status_code, response.json()) == (
        400,
        {
            "message": "INVALID_SNAPSHOT",
            "line": big,
            "reason": "a body of 101 bytes is over --max-msg-size (100)",
        },
    )
    assert small.nsqd.topics == {}
    assert spools(tmp_path / "small") == []  # nor upload nor stage left behind
    del lines[big - 1]
    lines[-1] = lines[-1].replace(b'"messages":22', b'"messages":21')
    response = await client.post(
        f"{small.url}/nsqbox/snapshot/upload", params=upload, content=b"".join(lines)
    )
    assert response.status_code == 200, response.text
    response = await client.post(
        f"{small.url}/nsqbox/snapshot/load", params={"id": "0" * 32, "node": 0}
    )
    assert response.status_code == 200, response.text
    assert response.json()["messages"] == 21
    channel = small.nsqd.topics["t"].channels["c"]
    assert (channel.depth(), len(channel.memory), channel.backend_depth()) == (21, 3, 18)
    assert spools(tmp_path / "small") == []


async def answer(
    client: httpx.AsyncClient, server: NSQDWithHTTP, method: str, path: str, **params: object
) -> tuple[int, object]:
    response = await client.request(method, server.url + path, params=params)  # type: ignore[arg-type]
    return response.status_code, response.json()


async def test_refusals(nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    unknown = "f" * 32
    for method, path, params, expected in [
        ("POST", "/nsqbox/snapshot", {}, (400, {"message": "MISSING_ARG_NODE"})),
        ("POST", "/nsqbox/snapshot", {"node": "64"}, (400, {"message": "INVALID_NODE"})),
        ("GET", "/nsqbox/snapshot", {"id": "../x"}, (400, {"message": "INVALID_ID"})),
        (
            "GET",
            "/nsqbox/snapshot",
            {"id": unknown, "offset": 0},
            (404, {"message": "SNAPSHOT_NOT_FOUND"}),
        ),
        ("DELETE", "/nsqbox/snapshot", {"id": unknown}, (404, {"message": "SNAPSHOT_NOT_FOUND"})),
        (
            "POST",
            "/nsqbox/snapshot/upload",
            {"id": unknown, "offset": 5},
            (404, {"message": "SNAPSHOT_NOT_FOUND"}),
        ),
        (
            "POST",
            "/nsqbox/snapshot/load",
            {"id": unknown, "node": 0},
            (404, {"message": "SNAPSHOT_NOT_FOUND"}),
        ),
    ]:
        assert await answer(client, server, method, path, **params) == expected, path
    upload = server.url + "/nsqbox/snapshot/upload"
    assert (
        await client.post(upload, params={"id": unknown, "offset": 0}, content=b"ab")
    ).status_code == 200
    wrong = await client.post(upload, params={"id": unknown, "offset": 1}, content=b"c")
    assert (wrong.status_code, wrong.json()) == (400, {"message": "INVALID_OFFSET"})
    too_big = await client.post(
        upload, params={"id": unknown, "offset": 2}, content=b"x" * (1024 * 1024 + 1)
    )
    assert too_big.status_code == 413
    past = await client.post(
        upload, params={"id": unknown, "offset": MAX_UPLOAD_BYTES}, content=b"x"
    )
    assert (past.status_code, past.json()) == (413, {"message": "UPLOAD_TOO_BIG"})
    cut = await client.post(
        server.url + "/nsqbox/snapshot", params={"node": 0}, headers={"Host": "evil.example"}
    )
    assert (cut.status_code, cut.json()) == (403, {"message": "HOST_NOT_ALLOWED"})
    assert [p.suffix for p in spools(tmp_path)] == [".upload"]  # no cut was made


async def test_no_snapshot_routes_under_auth(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, auth_http_addresses=["127.0.0.1:1"])
    for method, path in [("POST", "/nsqbox/snapshot"), ("POST", "/nsqbox/snapshot/load")]:
        response = await client.request(method, server.url + path, params={"node": 0})
        assert response.status_code == 404
    assert spools(tmp_path) == []


def test_the_routes_bound_nodes_as_the_format_does() -> None:
    from nsqbox.nsqd.routes import snapshot as routes
    from nsqbox.snapshot.format import MAX_NODES

    assert routes._LAST_NODE == MAX_NODES - 1


async def test_a_save_whose_piece_is_refused_says_so_and_leaves_no_file(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    from nsqbox.snapshot.transfer import Cut, SnapshotTransferError, save

    server = await start_nsqd_http(nursery, tmp_path)
    cut = Cut(server.url, "e" * 32, 10, 0, 0, 0)  # a spool the node does not have
    path = tmp_path / "s.jsonl"

    def run() -> None:
        with httpx.Client(trust_env=False, timeout=TIMEOUT) as client:
            save(client, path, [cut])

    with pytest.raises(SnapshotTransferError, match="answered 404 SNAPSHOT_NOT_FOUND") as info:
        await trio.to_thread.run_sync(run)
    assert info.value.status == 404
    assert await trio.to_thread.run_sync(lambda: list(tmp_path.glob("s.jsonl*"))) == []


def write_big(path: Path, over: int | None = None) -> list[bytes]:
    """A snapshot of several read blocks (docs/state.md): channel ``c`` with 60 messages
    queued in memory then disk ones; channel ``d`` with messages that say nothing of where
    they were (as a recording's). Message ``over`` (if given) has a body of 101 bytes. Each
    message's record as the disk queue holds it (timestamp, attempts, id, body), in order."""
    from nsqbox.snapshot.files import SnapshotWriter, open_for_writing
    from nsqbox.snapshot.format import Header
    from nsqbox.wire.message import MESSAGE_HEADER

    records = []
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(0, nodes=1))
        writer.topic(0, "t", False)
        for channel in ("c", "d"):
            writer.channel(0, "t", channel, False)
        for n in range(24_000):  # about 5.5 MB: the middle blocks are one channel's each
            channel = "c" if n < 12_000 else "d"
            msg_id, body = b"%016x" % n, ((b"%05d" % n) * 21)[: 101 if n == over else 100]
            attempts = n % 7
            writer.message(0, "t", channel, msg_id, 1000 + n, attempts, body, 0, 60 <= n < 12_000)
            records.append(MESSAGE_HEADER.pack(1000 + n, attempts) + msg_id + body)
        writer.finish()
    return records


async def test_a_big_load_keeps_every_message_in_order_where_it_was(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # the middle blocks of a big file are staged whole (framed for the disk queue in one
    # pass); what lands must be what a record-by-record load puts there
    server = await start_nsqd_http(nursery, tmp_path, mem_queue_size=100, max_msg_size=100)
    path = tmp_path / "s.jsonl"
    records = await trio.to_thread.run_sync(write_big, path)
    printed = await trio.to_thread.run_sync(
        tool, "load", str(path), "--nsqd-http-address", server.url
    )
    assert printed == f"loaded {path}: 24000 messages into 1 nsqd(s)\n"
    held = []
    for name, first in (("c", 0), ("d", 12_000)):
        channel = server.nsqd.topics["t"].channels[name]
        memory = [m.id for m in channel.memory]
        assert memory == [b"%016x" % n for n in range(first, first + (60 if name == "c" else 100))]
        while (data := channel.backend.pop()) is not None:
            held.append(data)
    expected = records[60:12_000] + records[12_100:]
    assert len(held) == len(expected)
    assert held == expected


async def test_a_body_over_max_msg_size_deep_in_a_big_file_is_refused_at_its_line(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, mem_queue_size=100, max_msg_size=100)
    path = tmp_path / "s.jsonl"
    await trio.to_thread.run_sync(write_big, path, 20_000)

    def load() -> None:
        with httpx.Client(trust_env=False, timeout=TIMEOUT) as http:
            transfer.load(http, path, [server.url])

    with pytest.raises(SnapshotError) as refused:
        await trio.to_thread.run_sync(load)
    assert (refused.value.line, refused.value.reason) == (
        20_000 + 5,  # the header, a topic, two channels, then message 20,000
        "a body of 101 bytes is over --max-msg-size (100)",
    )
    assert server.nsqd.topics == {}
    assert spools(tmp_path) == []


async def test_a_cut_keeps_the_delay_of_deferred_messages_restored_at_start(
    tmp_path: Path, client: httpx.AsyncClient
) -> None:
    # nsqd flushes deferred messages to its disk queue at shutdown and keeps their deadlines
    # aside; a cut taken before they are read again saves them deferred, with the rest of
    # their delay, and the queued one beside them as on disk
    from nsqbox.wire import commands
    from tests.helpers import RawConn

    async with trio.open_nursery() as first:
        server = await start_nsqd_http(first, tmp_path)
        conn = await RawConn.open(server.tcp)
        await conn.sub("t", "c")
        await conn.send(commands.dpub("t", 30_000, b"later"))
        assert await conn.response() == b"OK"
        await publish(server.tcp, "t", b"now")
        await conn.aclose()
        first.cancel_scope.cancel()
    async with trio.open_nursery() as second:
        server = await start_nsqd_http(second, tmp_path)
        channel = server.nsqd.topics["t"].channels["c"]
        assert (channel.backend_depth(), len(channel.restored_deadlines)) == (2, 1)
        path = tmp_path / "s.jsonl"
        await trio.to_thread.run_sync(tool, "save", str(path), "--nsqd-http-address", server.url)
        with open_for_reading(path) as stream:
            messages = [r for r in SnapshotReader(stream) if isinstance(r, MessageLine)]
        assert [(m.body, m.disk, m.delay_ms > 0) for m in messages] == [
            ("now", True, False),
            ("later", False, True),
        ]
        assert 20_000 <= messages[1].delay_ms <= 30_000
        assert channel.backend_depth() == 2  # the cut left the queue as it was
        second.cancel_scope.cancel()


async def test_a_cut_of_a_disk_queue_over_several_files_read_partway_holds_what_is_unread(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    # the cut copies a disk queue's bytes from its read position (inside a file) to its write
    # position, across its files: every unfinished message once, the disk ones in order
    from nsqbox.wire import commands
    from tests.helpers import RawConn, wait_until

    server = await start_nsqd_http(nursery, tmp_path, mem_queue_size=0, max_bytes_per_file=1000)
    server.nsqd.get_topic("t").get_channel("c")
    await publish(server.tcp, "t", *[b"m%02d" % n * 25 for n in range(50)])  # 130 bytes on disk
    channel = server.nsqd.topics["t"].channels["c"]
    conn = await RawConn.open(server.tcp)
    await conn.sub("t", "c", rdy=5)
    for _ in range(5):
        await conn.send(commands.fin((await conn.message()).id))
    await wait_until(lambda: channel.in_flight_count() == 5 and channel.backend_depth() == 40)
    read_file, _, write_file, _ = channel.backend.positions
    assert write_file - read_file >= 4  # (about 7 messages a file)
    path = tmp_path / "s.jsonl"
    await trio.to_thread.run_sync(tool, "save", str(path), "--nsqd-http-address", server.url)
    with open_for_reading(path) as stream:
        messages = [r for r in SnapshotReader(stream) if isinstance(r, MessageLine)]
    on_disk = [m.body for m in messages if m.disk]
    assert on_disk == [f"m{n:02d}" * 25 for n in range(10, 50)]
    assert sorted(m.body or "" for m in messages) == [f"m{n:02d}" * 25 for n in range(5, 50)]
    assert channel.backend_depth() == 40  # the cut left the queue as it was
    await conn.aclose()
