"""Seeds (issue #34): ``nsqbox up --seed seed.toml`` declares topics, channels, paused flags
and messages (inline, from files, deferred), applied before the box reports ready; a bad seed
is refused naming its key path, and nothing starts (docs/state.md, "Seeds")."""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box
from nsqbox.snapshot.seed import (
    MAX_SEED_BYTES,
    MAX_SEED_FILE_BYTES,
    MAX_SEED_MESSAGES,
    SeedError,
    read_seed,
)
from tests.snapshot.test_round_trip import Box, leaf

GUARD = 60

SEED = """
[topics.orders]
channels = { billing = {}, audit = { paused = true } }

[[topics.orders.messages]]
body = '{"order": 1}'

[[topics.orders.messages]]
file = "fixtures/orders.txt"

[[topics.orders.messages]]
body = "retry"
defer = "45s"

[[topics.orders.messages]]
body = "only billing"
channel = "billing"

[topics.blobs]
node = 1
paused = true

[[topics.blobs.messages]]
file = "fixtures/blob.bin"
whole = true

[topics.empty]
channels = ["one"]
"""


def write_seed(directory: Path, text: str = SEED) -> Path:
    (directory / "fixtures").mkdir(parents=True, exist_ok=True)
    (directory / "fixtures" / "orders.txt").write_bytes(b"line 1\nline 2\n\nline 3\n")
    (directory / "fixtures" / "blob.bin").write_bytes(b"\xff\x00\nbinary\n")
    path = directory / "seed.toml"
    path.write_text(text)
    return path


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as http:
        yield http


async def start_box(nursery: trio.Nursery, data: Path, client: httpx.AsyncClient, seed: str) -> Box:
    nsqd = NSQDOptions(data_path=str(data), node_id=0)
    options = BoxOptions(nsqd=nsqd, nsqd_count=2, clock="manual", seed_path=seed)
    options.use_ephemeral_ports()
    addresses: BoxAddresses = await nursery.start(serve_box, options)
    return Box(addresses, client)


async def test_up_seed_creates_topics_channels_and_messages_before_ready(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    seed = write_seed(tmp_path)
    with trio.fail_after(GUARD):
        box = await start_box(nursery, tmp_path / "data", client, str(seed))
        assert f"nsqbox up: seeded from {seed}: 12 messages\n" in box.addresses.banner()
        # depth, backend depth, in flight, deferred, paused: 1 inline + 3 lines (+ 1 to billing)
        assert await box.stats(0) == {
            "orders": (0, 0, False),
            "orders:billing": (5, 0, 0, 1, False),
            "orders:audit": (4, 0, 0, 1, True),
            "empty": (0, 0, False),
            "empty:one": (0, 0, 0, 0, False),
        }
        assert await box.stats(1) == {"blobs": (1, 0, True)}  # paused: held at the topic
        listed = await box.listing(0, "orders", "audit")
        assert sorted(base64.b64decode(m[1]) for m in listed) == [
            b"line 1",
            b"line 2",
            b"line 3",
            b"retry",
            b'{"order": 1}',
        ]
        assert {m[2] for m in listed} == {0}  # attempts
        [blob] = await box.listing(1, "blobs")
        assert base64.b64decode(blob[1]) == b"\xff\x00\nbinary\n"  # whole, newlines too
        assert blob[0] != listed[0][0]
        # the deferred one falls due 45 s of broker time after the start
        await box.call("POST", 0, "/nsqbox/clock/advance", by="44")
        assert (await box.stats(0))["orders:audit"][3] == 1
        await box.call("POST", 0, "/nsqbox/clock/advance", by="1")
        stats = await box.stats(0)
        assert stats["orders:audit"][0] == 5
        assert stats["orders:audit"][3] == 0
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[topics.orders]\npaused = true\ncolour = 1\n", "topics.orders.colour: unknown key"),
        ("[topics.'bad name']\n", "topics.bad name: invalid topic name"),
        ("[topics.t]\nchannels = ['ok', 'b@d']\n", "topics.t.channels.b@d: invalid channel"),
        (
            "[topics.t]\n[[topics.t.messages]]\nbody = 'x'\ndefer = 'five'\n",
            'topics.t.messages[0].defer: time: invalid duration "five"',
        ),
        (
            "[topics.t]\n[[topics.t.messages]]\nbody = 'x'\ndefer = '-1s'\n",
            "topics.t.messages[0].defer: -1s is not within",
        ),
        (
            "[topics.t]\n[[topics.t.messages]]\nfile = 'missing.txt'\n",
            "topics.t.messages[0].file: cannot read",
        ),
        ("[topics.t]\n[[topics.t.messages]]\nbody = ''\n", "topics.t.messages[0]: an empty body"),
        (
            "[topics.t]\n[[topics.t.messages]]\nbody = 'a'\nfile = 'b'\n",
            "topics.t.messages[0]: a message has exactly one of",
        ),
        (
            "[topics.t]\n[[topics.t.messages]]\nbody = 'a'\nchannel = 'c'\n",
            "topics.t.messages[0].channel: 'c' is not a channel",
        ),
        ("[topics.t]\nnode = 64\n", "topics.t.node: must be"),
        ("[topics.t]\npaused = 'yes'\n", "topics.t.paused: must be true or false"),
        ("[topics.'t#ephemeral']\n", "topics.t#ephemeral: invalid topic name"),
        ("[topic.t]\n", "topic: unknown key"),
        ("[topics.t\n", "not TOML"),
    ],
)
def test_a_bad_seed_is_refused_naming_its_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "seed.toml"
    path.write_text(text)
    with pytest.raises(SeedError) as info:
        read_seed(path)
    assert str(info.value).startswith(key)


def test_a_seed_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_bytes(b"x\n" * (MAX_SEED_MESSAGES + 1))
    path = tmp_path / "seed.toml"
    path.write_text("[topics.t]\n[[topics.t.messages]]\nfile = 'many.txt'\n")
    with pytest.raises(SeedError) as info:
        read_seed(path)
    assert str(info.value).startswith(
        f"topics.t.messages[0].file line {MAX_SEED_MESSAGES + 1}: a seed holds at most"
    )


async def test_a_bad_seed_starts_nothing(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    # good up to its last message: still nothing is applied, and nothing starts
    seed = write_seed(tmp_path, SEED + "[[topics.empty.messages]]\nbody = 'x'\ndefer = '1y'\n")
    with trio.fail_after(GUARD):
        with pytest.raises(ExceptionGroup) as info:
            async with trio.open_nursery() as inner:
                await start_box(inner, tmp_path / "data", client, str(seed))
        error = leaf(info.value)
        assert isinstance(error, ValueError)
        assert "nothing applied: topics.empty.messages[0].defer: time: unknown unit" in str(error)
        # a body over --max-msg-size, as nsqd refuses such a PUB
        small = NSQDOptions(data_path=str(tmp_path / "small"), node_id=0, max_msg_size=6)
        good = str(write_seed(tmp_path / "good"))
        options = BoxOptions(nsqd=small, nsqd_count=2, seed_path=good)
        options.use_ephemeral_ports()
        with pytest.raises(ExceptionGroup) as info:
            async with trio.open_nursery() as inner:
                await inner.start(serve_box, options)
        assert "topics.orders.messages: a body of 12 bytes is over --max-msg-size (6)" in str(
            leaf(info.value)
        )
        # as a command: refused on stderr, exit status 1, no ready line
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "nsqbox",
                "up",
                "--ephemeral-ports",
                "--ready-json",
                f"--data-path={tmp_path / 'cli'}",
                f"--seed={seed}",
            ],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert done.stdout == b""
        assert b"failed to start nsqbox - cannot seed from" in done.stderr
        assert b"topics.empty.messages[0].defer" in done.stderr


DOC = Path(__file__).resolve().parents[2] / "docs" / "state.md"


async def test_the_docs_seed_applies_as_it_says(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    text = DOC.read_text()
    [example] = re.findall(r"```toml\n# seed.toml\n(.*?)```", text, re.DOTALL)
    assert f"more than\n{MAX_SEED_MESSAGES:,} messages" in text
    assert MAX_SEED_BYTES == 256 * 1024 * 1024
    assert MAX_SEED_FILE_BYTES == 16 * 1024 * 1024
    seed = write_seed(tmp_path, example)
    (tmp_path / "fixtures" / "orders.jsonl").write_bytes(b'{"order": 3}\n{"order": 4}\n')
    (tmp_path / "fixtures" / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really\n")
    with trio.fail_after(GUARD):
        box = await start_box(nursery, tmp_path / "data", client, str(seed))
        assert await box.stats(0) == {
            "orders": (0, 0, False),
            "orders:billing": (4, 0, 0, 1, False),
            "orders:audit": (3, 0, 0, 1, True),
        }
        assert await box.stats(1) == {
            "uploads": (1, 0, True),
            "uploads:thumbnails": (0, 0, 0, 0, False),
        }
        nursery.cancel_scope.cancel()
    bad = tmp_path / "bad.toml"
    bad.write_text(example.replace('defer = "45s"', 'defer = "45x"'))
    with pytest.raises(SeedError) as info:
        read_seed(bad)
    shown = re.search(r"nothing applied: (topics\.orders\.messages.*)\n", text)
    assert shown is not None
    assert str(info.value) == shown[1]


async def test_the_command_applies_a_seed_before_its_ready_line(
    tmp_path: Path, client: httpx.AsyncClient
) -> None:
    write_seed(tmp_path)  # given relative to the working directory, its files to the seed's
    argv = [sys.executable, "-m", "nsqbox", "up", "--ephemeral-ports", "--ready-json"]
    argv += ["--nsqd-count=2", "--data-path=data", "--seed=seed.toml"]
    with trio.fail_after(GUARD):
        process = await trio.lowlevel.open_process(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path
        )
        try:
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(4096)
                assert chunk, "nsqbox up ended before its ready line"
                line += chunk
            ready = json.loads(line)
            stats = {}
            for node, address in enumerate(ready["nsqd_http_addresses"]):
                answer = await client.get(f"http://{address}/stats", params={"format": "json"})
                stats[node] = {
                    (t["topic_name"], c["channel_name"]): (c["depth"], c["deferred_count"])
                    for t in answer.json()["topics"]
                    for c in t["channels"]
                } | {
                    (t["topic_name"], ""): (t["depth"], t["paused"])
                    for t in answer.json()["topics"]
                }
            assert stats[0][("orders", "billing")] == (5, 1)
            assert stats[0][("orders", "audit")] == (4, 1)
            assert stats[1] == {("blobs", ""): (1, True)}
        finally:
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
