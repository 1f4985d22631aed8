"""The admin service saves a snapshot of its box on request, and says where the box was loaded
from (``/api/snapshot``; issue #34), on real sockets.

``POST /api/snapshot?file=NAME`` writes a file on the box's machine for a web request, so
each test asserts what is on disk afterwards: the file only under the box's directory, a
name that is not a plain snapshot name refused and nothing written, nothing overwritten nor
followed through a link, and a request from a foreign Host or Origin refused as on every
admin action.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box
from nsqbox.snapshot.files import check_snapshot
from tests.helpers import publish

from .test_replace import command
from .test_round_trip import GUARD, Box

EVIL = "evil.example"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as http:
        yield http


async def start(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient, load: str = ""
) -> tuple[Box, Path]:
    """A two-nsqd box saving into ``tmp_path/saves``; the box, that directory."""
    saves = tmp_path / "saves"
    saves.mkdir(parents=True, exist_ok=True)
    nsqd = NSQDOptions(data_path=str(tmp_path / "data"), node_id=0, mem_queue_size=2)
    options = BoxOptions(nsqd=nsqd, nsqd_count=2, load_path=load, snapshot_dir=str(saves))
    options.use_ephemeral_ports()
    addresses: BoxAddresses = await nursery.start(serve_box, options)
    return Box(addresses, client), saves


async def api(box: Box, method: str, **params: str) -> httpx.Response:
    url = f"http://{box.admin}/api/snapshot"
    return await box.client.request(method, url, params=params)


def absent(path: str) -> bool:
    return not os.path.exists(path)


def listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


async def test_the_box_saves_one_cut_in_its_directory_and_nowhere_else(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    with trio.fail_after(GUARD):
        box, saves = await start(nursery, tmp_path, client)
        await publish(box.tcp(0), "orders", b"a", b"b", b"c")  # 2 in memory, 1 on disk
        await box.call("POST", 0, "/channel/create", topic="orders", channel="billing")
        await publish(box.tcp(1), "payments", b"p")
        answer = await api(box, "POST", file="box.jsonl.gz")
        assert answer.status_code == 200, answer.text
        doc: dict[str, Any] = answer.json()
        assert doc == {
            "file": "box.jsonl.gz",
            "directory": str(saves),
            "bytes": (saves / "box.jsonl.gz").stat().st_size,
            "nodes": 2,
            "topics": 2,
            "channels": 1,
            "messages": 4,
        }
        summary = check_snapshot(saves / "box.jsonl.gz")
        assert (summary.header.nodes, summary.topics, summary.messages) == (2, 2, 4)
        assert stat.S_IMODE((saves / "box.jsonl.gz").stat().st_mode) == 0o600  # every body
        assert listing(saves) == ["box.jsonl.gz"]  # no part file left
        spools = [p for p in (tmp_path / "data").rglob("*") if "snapshot" in p.name]
        assert spools == []  # the nodes' spools are gone too
        plain = await api(box, "POST", file="box.jsonl")
        assert plain.status_code == 200, plain.text
        assert (saves / "box.jsonl").read_bytes().startswith(b'{"nsqbox_snapshot":1,"nodes":2')
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "name",
    [
        "../escape.jsonl",
        "sub/inside.jsonl",
        "/tmp/absolute.jsonl",
        "..",
        ".hidden.jsonl",
        "notes.txt",
        "box.jsonl.gz.sh",
        "",
        "a" * 200 + ".jsonl",
        "new\nline.jsonl",
        "caf\u00e9.jsonl",
    ],
)
async def test_a_name_that_is_not_a_plain_snapshot_name_is_refused_and_nothing_is_written(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient, name: str
) -> None:
    with trio.fail_after(GUARD):
        box, saves = await start(nursery, tmp_path, client)
        (saves / "sub").mkdir()
        await publish(box.tcp(0), "orders", b"a")
        before = listing(tmp_path)
        answer = await api(box, "POST", file=name)
        assert answer.status_code == 400, answer.text
        assert answer.json()["message"].startswith("INVALID_FILE: ")
        assert listing(tmp_path) == before
        assert absent("/tmp/absolute.jsonl")
        nursery.cancel_scope.cancel()


async def test_an_existing_file_or_link_is_never_overwritten_nor_followed(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    with trio.fail_after(GUARD):
        box, saves = await start(nursery, tmp_path, client)
        await publish(box.tcp(0), "orders", b"a")
        (saves / "kept.jsonl").write_text("kept\n")
        (saves / "link.jsonl").symlink_to(outside)
        (saves / "dangling.jsonl").symlink_to(tmp_path / "nowhere.txt")
        for name in ("kept.jsonl", "link.jsonl", "dangling.jsonl"):
            answer = await api(box, "POST", file=name)
            assert (answer.status_code, answer.json()) == (409, {"message": "FILE_EXISTS"}), name
        assert (saves / "kept.jsonl").read_text() == "kept\n"
        assert outside.read_text() == "mine\n"
        assert not (tmp_path / "nowhere.txt").exists()
        assert listing(saves) == ["dangling.jsonl", "kept.jsonl", "link.jsonl"]
        nursery.cancel_scope.cancel()


async def test_a_foreign_host_or_origin_saves_nothing(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    with trio.fail_after(GUARD):
        box, saves = await start(nursery, tmp_path, client)
        await publish(box.tcp(0), "orders", b"a")
        url = f"http://{box.admin}/api/snapshot"
        port = box.addresses.admin.http[1]
        for headers, refusal in [
            ({"Host": f"{EVIL}:{port}"}, "HOST_NOT_ALLOWED"),  # DNS rebinding
            ({"Origin": f"http://{EVIL}"}, "ORIGIN_NOT_ALLOWED"),  # another site's page
        ]:
            for method in ("POST", "GET"):
                answer = await client.request(
                    method, url, params={"file": "x.jsonl"}, headers=headers
                )
                assert (answer.status_code, answer.json()) == (403, {"message": refusal})
        assert listing(saves) == []
        nursery.cancel_scope.cancel()


async def test_the_admin_says_where_the_box_was_last_loaded_from(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    with trio.fail_after(GUARD):
        first, saves = await start(nursery, tmp_path / "first", client)
        await publish(first.tcp(0), "orders", b"a", b"b")
        await publish(first.tcp(1), "payments", b"p")
        assert (await api(first, "POST", file="bug.jsonl")).status_code == 200
        info = (await api(first, "GET")).json()
        assert info == {"loaded": None, "directory": str(saves)}

        path = saves / "bug.jsonl"
        box, _ = await start(nursery, tmp_path / "second", client, load=str(path))
        loaded = (await api(box, "GET")).json()["loaded"]
        assert loaded["file"] == "bug.jsonl"  # the name, not the path
        assert (loaded["replace"], loaded["messages"], loaded["nodes"]) == (False, 3, 2)
        up_at = loaded["loaded_at_ns"]
        assert abs(up_at / 1e9 - time.time()) < 600  # real time, not broker time

        renamed = tmp_path / "later.jsonl"
        os.link(path, renamed)
        await trio.to_thread.run_sync(command, box, "load", str(renamed), "--replace")
        loaded = (await api(box, "GET")).json()["loaded"]
        assert (loaded["file"], loaded["replace"]) == ("later.jsonl", True)
        assert (loaded["messages"], loaded["nodes"]) == (3, 2)
        assert loaded["loaded_at_ns"] >= up_at
        nursery.cancel_scope.cancel()
