"""``nsqbox up``: options, the in-process box, and the whole thing as a real process.

Rules: localhost only, port 0 everywhere, a ``fail_after`` (or a subprocess timeout) on every
wait; state is checked through the public HTTP APIs (lookupd /nodes, nsqd /stats).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox import cli
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, NodeTag, node_index, serve_box
from nsqbox.run.up import resolve_up_options, up_flag_set
from tests.tools.box_process import NSQBOX, TIMEOUT, BoxProcess, nsqbox

# --- options ------------------------------------------------------------------------------------


def test_node_options_shift_ports_ids_and_data_paths() -> None:
    options = BoxOptions(nsqd_count=3)
    node = options.node_options(2, ["127.0.0.1:4160"])
    assert (node.tcp_address, node.http_address, node.https_address) == (
        "127.0.0.1:4350",
        "127.0.0.1:4351",
        "127.0.0.1:4352",
    )
    assert node.node_id == 2
    assert node.data_path == os.path.join("./nsqbox-data", "node2")
    assert node.lookupd_tcp_addresses == ["127.0.0.1:4160"]
    assert options.node_options(0, []).data_path == "./nsqbox-data"
    assert options.nsqd.tcp_address == "127.0.0.1:4150"  # the template is left alone


def test_port_zero_stays_zero_and_ephemeral_ports() -> None:
    options = BoxOptions(nsqd_count=2)
    options.use_ephemeral_ports()
    assert options.node_options(1, []).tcp_address == "127.0.0.1:0"
    assert (options.lookupd_tcp_address, options.admin_http_address) == (
        "127.0.0.1:0",
        "127.0.0.1:0",
    )
    options.validate()  # any number of port-0 listeners is fine


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (BoxOptions(nsqd_count=0), r"--nsqd-count must be \[1,64\]"),
        (BoxOptions(nsqd=NSQDOptions(node_id=1023), nsqd_count=2), "below 1024"),
        (
            BoxOptions(nsqd=NSQDOptions(tcp_address="127.0.0.1:4160")),
            "nsqd 0 TCP and nsqlookupd TCP both want 127.0.0.1:4160",
        ),
    ],
)
def test_validate(options: BoxOptions, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options.validate()


def test_default_ports_do_not_collide() -> None:
    options = BoxOptions(nsqd_count=10)
    options.validate()
    ports = [
        int(options.lookupd_tcp_address.rsplit(":", 1)[1]),
        int(options.lookupd_http_address.rsplit(":", 1)[1]),
        int(options.admin_http_address.rsplit(":", 1)[1]),
    ]
    for i in range(options.nsqd_count):
        node = options.node_options(i, [])
        ports += [int(node.tcp_address.rsplit(":", 1)[1]), int(node.http_address.rsplit(":", 1)[1])]
    # NSQ's ports for the first nsqd, the lookupd and the admin; each further nsqd 100 higher.
    expected = {4160, 4161, 4171} | {4150 + 100 * i for i in range(10)}
    expected |= {4151 + 100 * i for i in range(10)}
    assert len(ports) == len(set(ports)) == 23
    assert set(ports) == expected


def _resolve(argv: list[str]) -> tuple[BoxOptions, bool]:
    defaults = BoxOptions()
    flags = up_flag_set(defaults)
    command = cli.parse_nsqd_command(argv, flags, defaults.nsqd)
    assert not isinstance(command, int)
    return resolve_up_options(flags, command.options)


def test_flags_and_config_file(tmp_path: Path) -> None:
    config = tmp_path / "box.toml"
    config.write_text(
        'nsqd_count = 2\nnsqlookupd_http_address = "127.0.0.1:5161"\n'
        'nsqadmin_http_address = "127.0.0.1:5171"\nmem_queue_size = 7\n'
    )
    options, ready = _resolve([f"--config={config}", "--nsqadmin-http-address=127.0.0.1:6171"])
    assert (options.nsqd_count, options.lookupd_http_address) == (2, "127.0.0.1:5161")
    assert options.admin_http_address == "127.0.0.1:6171"  # the flag beats the file
    assert (options.nsqd.mem_queue_size, options.nsqd.node_id, ready) == (7, 0, False)
    assert options.nsqd.log_level == "warn"  # quiet by default
    config.write_text("ephemeral_ports = true\nid = 5\n")
    options, _ = _resolve([f"--config={config}", "--ready-json"])
    assert (options.nsqd.tcp_address, options.lookupd_tcp_address) == ("127.0.0.1:0", "127.0.0.1:0")
    assert options.nsqd.node_id == 5


def test_nsqd_port_zero_frees_the_other_defaults() -> None:
    options, _ = _resolve(["--tcp-address=127.0.0.1:0", "--nsqlookupd-tcp-address=127.0.0.1:5160"])
    assert options.lookupd_tcp_address == "127.0.0.1:5160"  # given: kept
    assert (options.lookupd_http_address, options.admin_http_address) == (
        "127.0.0.1:0",
        "127.0.0.1:0",
    )


def test_bad_config_value_is_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "box.toml"
    config.write_text('nsqd_count = "many"\n')
    assert cli.main(["up", f"--config={config}"]) == 1
    assert "FATAL: failed to start nsqbox - failed to coerce config value nsqd_count" in (
        capsys.readouterr().err
    )


def test_up_help_lists_the_box_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["up", "-h"]) == 0
    err = capsys.readouterr().err
    for flag in (
        "nsqd-count",
        "nsqlookupd-tcp-address",
        "nsqadmin-http-address",
        "ephemeral-ports",
    ):
        assert f"  -{flag}" in err
    # the box's own defaults, each said once, as they are given
    lines = dict(zip(err.splitlines(), err.splitlines()[1:], strict=False))
    assert lines["  -log-level value"].endswith("(default warn)")
    data_path = lines["  -data-path string"]
    assert data_path.endswith('(default "./nsqbox-data")')
    assert data_path.count("default") == 1
    assert "hostname" not in lines["  -node-id int"]


def test_node_tag_marks_nsqd_lines() -> None:
    record = logging.LogRecord(
        "nsqbox.nsqd.domain.topic", logging.INFO, "", 0, "TOPIC(%s)", ("t",), None
    )
    token = node_index.set(2)
    try:
        assert NodeTag().filter(record)
    finally:
        node_index.reset(token)
    assert record.getMessage() == "node 2: TOPIC(t)"


# --- in process ---------------------------------------------------------------------------------


async def test_serve_box_runs_every_service(nursery: trio.Nursery, tmp_path: Path) -> None:
    options = BoxOptions(
        nsqd=NSQDOptions(data_path=str(tmp_path / "data"), node_id=0), nsqd_count=3
    )
    options.use_ephemeral_ports()
    box: BoxAddresses = await nursery.start(serve_box, options)
    ready = box.ready()
    assert len(ready["nsqd_tcp_addresses"]) == 3
    assert ready["nsqd_tcp_address"] == ready["nsqd_tcp_addresses"][0]
    assert box.banner().splitlines()[-1] == "nsqbox up: running; Ctrl-C stops"
    assert "clock" not in box.banner()  # the real clock goes without saying
    assert [n.nsqd.options.node_id for n in box.nsqds] == [0, 1, 2]
    assert (tmp_path / "data" / "node2" / "nsqd.dat").exists()
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
        for key in ("lookupd_http_address", "admin_http_address", "nsqd_http_address"):
            assert (await client.get(f"http://{ready[key]}/ping")).text == "OK"
        with trio.fail_after(TIMEOUT):
            while True:  # the nsqds register with the box's lookupd as they start
                nodes = (await client.get(f"http://{ready['lookupd_http_address']}/nodes")).json()
                if len(nodes["producers"]) == 3:
                    break
                await trio.sleep(0.01)
    ports = sorted(p["tcp_port"] for p in nodes["producers"])
    assert ports == sorted(n.tcp[1] for n in box.nsqds)


# --- as a process -------------------------------------------------------------------------------


class AsyncBox:
    """``nsqbox up`` as a child of a trio test."""

    def __init__(self, process: trio.Process, ready: dict[str, Any], stderr: Path) -> None:
        self.process = process
        self.ready = ready
        self.stderr = stderr

    @classmethod
    async def start(cls, directory: Path, *args: str) -> AsyncBox:
        stderr = directory / "stderr.txt"
        with stderr.open("wb") as err:
            process = await trio.lowlevel.open_process(
                [*NSQBOX, "up", "--ephemeral-ports", "--ready-json", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=directory,
            )
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(TIMEOUT):
            while not buffer.endswith(b"\n"):
                chunk = await process.stdout.receive_some(4096)
                assert chunk, stderr.read_text()
                buffer += chunk
        return cls(process, json.loads(buffer), stderr)

    async def stop(self, signum: signal.Signals = signal.SIGTERM) -> int:
        self.process.send_signal(signum)
        with trio.fail_after(TIMEOUT):
            return await self.process.wait()


async def run_nsqbox(*args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(TIMEOUT):
        return await trio.run_process(
            [*NSQBOX, *args], capture_stdout=True, capture_stderr=True, check=False
        )


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` (lookupd learns of registrations asynchronously)."""
    with trio.fail_after(TIMEOUT):
        while True:
            if await check():
                return
            await trio.sleep(0.01)


async def test_up_pub_tail_stat_admin_and_sigterm(tmp_path: Path) -> None:
    box = await AsyncBox.start(tmp_path)
    ready = box.ready
    tcp, http = ready["nsqd_tcp_address"], ready["nsqd_http_address"]
    lookupd, admin = ready["lookupd_http_address"], ready["admin_http_address"]
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:

            async def get(address: str, path: str, **params: str) -> Any:
                response = await client.get(f"http://{address}{path}", params=params)
                return response.json()

            async def api(method: str, path: str, body: object = None) -> tuple[int, Any]:
                content = None if body is None else json.dumps(body).encode()
                response = await client.request(method, f"http://{admin}{path}", content=content)
                return response.status_code, response.json()

            async def nsqd_topics() -> dict[str, Any]:
                doc = await get(http, "/stats", format="json")
                return {t["topic_name"]: t for t in doc["topics"] or []}

            async def node_topics() -> list[str]:
                [node] = (await get(lookupd, "/nodes"))["producers"]
                return list(node["topics"])

            # publish, tail, stat
            result = await run_nsqbox("pub", f"--nsqd-tcp-address={tcp}", "orders", "1", "2", "3")
            assert (result.returncode, result.stderr) == (0, b"")
            result = await run_nsqbox("tail", f"--nsqd-tcp-address={tcp}", "-n", "3", "orders")
            assert (result.returncode, result.stdout) == (0, b"1\n2\n3\n")
            await until(lambda: _has(node_topics, "orders"))
            result = await run_nsqbox("pub", f"--nsqd-tcp-address={tcp}", "orders", "4")
            assert result.returncode == 0
            assert (await nsqd_topics())["orders"]["channels"] == []  # the tail's channel is gone

            # create a topic's channel through the admin API
            assert await api("POST", "/api/topics", {"topic": "orders", "channel": "billing"}) == (
                200,
                {"message": ""},
            )
            assert await get(lookupd, "/channels", topic="orders") == {"channels": ["billing"]}
            [billing] = (await nsqd_topics())["orders"]["channels"]
            assert billing["channel_name"] == "billing"
            await run_nsqbox("pub", f"--nsqd-tcp-address={tcp}", "orders", "5", "6")
            result = await run_nsqbox(
                "stat", f"--lookupd-http-address={lookupd}", "orders", "billing", "--count=1"
            )
            assert result.returncode == 0
            assert result.stdout.splitlines()[-1].split() == (b"0 0 | 3 3 0 0 0 | 0 0 3 0".split())

            # reading routes
            status, topics = await api("GET", "/api/topics")
            assert (status, topics) == (200, {"topics": ["orders"], "message": ""})
            status, topic = await api("GET", "/api/topics/orders")
            assert (status, topic["message_count"], topic["depth"]) == (200, 6, 0)
            status, channel = await api("GET", "/api/topics/orders/billing")
            # "4" waited at the topic for a channel, then joined "5" and "6" in billing
            assert (status, channel["depth"], channel["message_count"]) == (200, 3, 3)
            status, nodes = await api("GET", "/api/nodes")
            assert [f"{n['broadcast_address']}:{n['http_port']}" for n in nodes["nodes"]] == [http]
            status, node = await api("GET", f"/api/nodes/{http}")
            assert (status, node["node"], node["total_messages"]) == (200, http, 6)
            status, counter = await api("GET", "/api/counter")
            assert counter["stats"][f"orders:billing:{http}"]["message_count"] == 3

            # actions, each checked on nsqd and lookupd
            for target in ("/api/topics/orders/billing", "/api/topics/orders"):
                assert await api("POST", target, {"action": "pause"}) == (200, {"message": ""})
                row = (await nsqd_topics())["orders"]
                assert (row if target.endswith("orders") else row["channels"][0])["paused"]
                assert await api("POST", target, {"action": "unpause"}) == (200, {"message": ""})
                row = (await nsqd_topics())["orders"]
                assert not (row if target.endswith("orders") else row["channels"][0])["paused"]
            assert (await api("POST", "/api/topics/orders/billing", {"action": "empty"}))[0] == 200
            assert (await nsqd_topics())["orders"]["channels"][0]["depth"] == 0
            await run_nsqbox("pub", f"--nsqd-tcp-address={tcp}", "events", "e")
            await until(lambda: _has(node_topics, "events"))
            assert (await api("POST", "/api/topics/events", {"action": "empty"}))[0] == 200
            assert (await nsqd_topics())["events"]["depth"] == 0
            assert await api("DELETE", "/api/topics/orders/billing") == (200, {"message": ""})
            assert (await nsqd_topics())["orders"]["channels"] == []
            assert await get(lookupd, "/channels", topic="orders") == {"channels": []}
            assert await api("DELETE", "/api/topics/events") == (200, {"message": ""})
            assert "events" not in await nsqd_topics()
            assert "events" not in (await get(lookupd, "/topics"))["topics"]
            assert await api("DELETE", f"/api/nodes/{http}", {"topic": "orders"}) == (
                200,
                {"message": ""},
            )
            assert "orders" not in await nsqd_topics()
            await until(lambda: _lacks(node_topics, "orders"))

        assert await box.stop() == 0
    finally:
        box.process.kill()
    banner = box.stderr.read_text()
    assert f"nsqbox up: nsqd: TCP {tcp}, HTTP {http}; data in {ready['data_path']}\n" in banner
    assert f"nsqbox up: admin: HTTP {admin} (nsqadmin's /api)\n" in banner


async def _has(get_topics: Callable[[], Awaitable[list[str]]], topic: str) -> bool:
    return topic in await get_topics()


async def _lacks(get_topics: Callable[[], Awaitable[list[str]]], topic: str) -> bool:
    return topic not in await get_topics()


async def test_sigint_stops_and_messages_survive_a_restart(tmp_path: Path) -> None:
    box = await AsyncBox.start(tmp_path)
    try:
        tcp, http = box.ready["nsqd_tcp_address"], box.ready["nsqd_http_address"]
        async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
            for path in ("/topic/create", "/channel/create"):
                response = await client.post(
                    f"http://{http}{path}", params={"topic": "kept", "channel": "c"}
                )
                assert response.status_code == 200
        assert (
            await run_nsqbox("pub", f"--nsqd-tcp-address={tcp}", "kept", "a", "b")
        ).returncode == 0
        assert await box.stop(signal.SIGINT) == 0
    finally:
        box.process.kill()
    again = await AsyncBox.start(tmp_path)  # the same ./nsqbox-data
    try:
        tcp = again.ready["nsqd_tcp_address"]
        result = await run_nsqbox(
            "tail", f"--nsqd-tcp-address={tcp}", "--channel=c", "-n=2", "kept"
        )
        assert (result.returncode, result.stdout) == (0, b"a\nb\n")
        assert await again.stop() == 0
    finally:
        again.process.kill()


def test_port_in_use_is_fatal(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = nsqbox("up", "--ephemeral-ports", f"--nsqadmin-http-address=127.0.0.1:{port}")
    assert result.returncode == 1
    assert b"FATAL: failed to start nsqbox - " in result.stderr


def test_three_nodes_feed_one_pynsq_reader(tmp_path: Path) -> None:
    import nsq
    import tornado.ioloop

    box = BoxProcess(tmp_path, "--nsqd-count=3")
    try:
        sent = set()
        for index, address in enumerate(box.ready["nsqd_tcp_addresses"]):
            bodies = [f"node{index}-{i}" for i in range(3)]
            assert nsqbox("pub", f"--nsqd-tcp-address={address}", "spread", *bodies).returncode == 0
            sent.update(b.encode() for b in bodies)
        received: set[bytes] = set()
        loop = tornado.ioloop.IOLoop()

        def handle(message: Any) -> bool:
            received.add(bytes(message.body))
            if received >= sent:
                loop.stop()
            return True

        async def make_reader() -> Any:
            return nsq.Reader(
                topic="spread",
                channel="all",
                lookupd_http_addresses=[f"http://{box.ready['lookupd_http_address']}"],
                message_handler=handle,
                max_in_flight=9,
                lookupd_poll_interval=1,
            )

        reader = loop.run_sync(make_reader)
        timeout = loop.call_later(TIMEOUT, loop.stop)
        loop.start()
        loop.remove_timeout(timeout)
        connected = sorted(conn.port for conn in reader.conns.values())
        reader.close()
        loop.close(all_fds=True)
        assert received == sent
        ports = sorted(int(a.rpartition(":")[2]) for a in box.ready["nsqd_tcp_addresses"])
        assert connected == ports
        assert box.stop() == 0, box.stderr
    finally:
        box.kill()


def test_up_loads_no_ui_or_spark(tmp_path: Path) -> None:
    code = (
        "import sys, trio\n"
        "from nsqbox.run.box import BoxOptions, serve_box\n"
        "from nsqbox.nsqd.domain.options import NSQDOptions\n"
        "async def main():\n"
        "    options = BoxOptions(nsqd=NSQDOptions(data_path='data'))\n"
        "    options.use_ephemeral_ports()\n"
        "    async with trio.open_nursery() as nursery:\n"
        "        await nursery.start(serve_box, options)\n"
        "        print(sorted(sys.modules))\n"
        "        nursery.cancel_scope.cancel()\n"
        "trio.run(main)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        check=True,
    )
    modules = result.stdout
    for heavy in ("textual", "pyspark", "rich", "nsqbox.admin.model", "prometheus_client"):
        assert f"'{heavy}'" not in modules, heavy


async def test_the_banner_says_the_clock_is_manual(nursery: trio.Nursery, tmp_path: Path) -> None:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(tmp_path)), clock="manual")
    options.use_ephemeral_ports()
    box: BoxAddresses = await nursery.start(serve_box, options)
    assert box.banner().splitlines()[-2:] == [
        "nsqbox up: broker clock: manual, standing still until `nsqbox clock advance 1h`",
        "nsqbox up: running; Ctrl-C stops",
    ]
    nursery.cancel_scope.cancel()
