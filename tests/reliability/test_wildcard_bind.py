"""A wildcard bind, seen from another machine: two network namespaces joined by a veth pair.

``nsqbox nsqd`` runs in one namespace bound on ``0.0.0.0``; a client in the other reaches it
at the veth address. What must hold: the start-up warning names that real address, once per
listener; the allowlist takes the IP literal another machine uses as Host (so for a wildcard
bind the warning is the protection), and still refuses a rebound name and a foreign Origin
on nsqbox's routes while NSQ's own routes answer them, as real nsqd's do.

Needs root and ``ip`` (iproute2); skipped otherwise, and where namespaces cannot be made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from tests.helpers import TIMEOUT, stop_process

SERVER_ADDRESS = "10.237.0.1"
CLIENT_ADDRESS = "10.237.0.2"

pytestmark = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or shutil.which("ip") is None,
    reason="network namespaces need root and iproute2's ip",
)


@dataclass(frozen=True)
class Namespaces:
    server: str
    client: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=TIMEOUT)


@pytest.fixture
def namespaces() -> Iterator[Namespaces]:
    tag = f"{os.getpid() % 100000}"
    pair = Namespaces(f"nsqbox-srv-{tag}", f"nsqbox-cli-{tag}")
    made: list[str] = []
    try:
        for name in (pair.server, pair.client):
            _ip("netns", "add", name)
            made.append(name)
        # the veth ends live only inside the namespaces: the host's interfaces are untouched
        _ip("link", "add", f"nbs{tag}", "type", "veth", "peer", "name", f"nbc{tag}")
        _ip("link", "set", f"nbs{tag}", "netns", pair.server)
        _ip("link", "set", f"nbc{tag}", "netns", pair.client)
        _ip("-n", pair.server, "addr", "add", f"{SERVER_ADDRESS}/30", "dev", f"nbs{tag}")
        _ip("-n", pair.client, "addr", "add", f"{CLIENT_ADDRESS}/30", "dev", f"nbc{tag}")
        for name, dev in ((pair.server, f"nbs{tag}"), (pair.client, f"nbc{tag}")):
            _ip("-n", name, "link", "set", dev, "up")
            _ip("-n", name, "link", "set", "lo", "up")
    except subprocess.CalledProcessError as exc:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        pytest.skip(f"cannot make network namespaces here: {exc.stderr.decode().strip()}")
    try:
        yield pair
    finally:
        for name in made:  # deleting a namespace deletes its veth end, and so the pair
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


# What the client namespace runs: each request as given (an explicit Host, maybe an Origin),
# printing the statuses as JSON.
CLIENT = """
import http.client, json, sys
address, port, requests = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
statuses = []
for path, headers in requests:
    conn = http.client.HTTPConnection(address, port, timeout=10)
    conn.request("GET", path, headers=headers)
    statuses.append(conn.getresponse().status)
    conn.close()
print(json.dumps(statuses))
"""


async def test_a_wildcard_bind_warns_with_the_real_address(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    stderr_path = tmp_path / "stderr.txt"
    command = [
        *("ip", "netns", "exec", namespaces.server),
        *(sys.executable, "-m", "nsqbox", "nsqd"),
        *("--tcp-address=0.0.0.0:0", "--http-address=0.0.0.0:0", f"--data-path={tmp_path}"),
    ]
    with stderr_path.open("wb") as err:
        process = await trio.lowlevel.open_process(command, stderr=err)
    try:
        with trio.fail_after(TIMEOUT):
            while "HTTP: listening on" not in (text := stderr_path.read_text()):
                assert process.poll() is None, text
                await trio.sleep(0.05)
        match = re.search(r"HTTP: listening on 0\.0\.0\.0:(\d+)", text)
        assert match is not None, text
        port = int(match[1])
        http_warnings = [line for line in text.splitlines() if "nsqd HTTP listens on" in line]
        assert len(http_warnings) == 1, text
        where = f"0.0.0.0:{port}, every interface ({SERVER_ADDRESS}:{port})"
        assert where in http_warnings[0]
        assert "other machines can reach it" in http_warnings[0]
        assert len([line for line in text.splitlines() if "nsqd TCP listens on" in line]) == 1

        requests = [
            ("/nsqbox/faults", {"Host": f"{SERVER_ADDRESS}:{port}"}),
            ("/nsqbox/faults", {"Host": "evil.example"}),
            (
                "/nsqbox/faults",
                {"Host": f"{SERVER_ADDRESS}:{port}", "Origin": "http://evil.example"},
            ),
            ("/stats?format=json", {"Host": "evil.example"}),
            ("/stats?format=json", {"Host": f"{SERVER_ADDRESS}:{port}", "Origin": "http://x.y"}),
        ]
        client = [
            *("ip", "netns", "exec", namespaces.client, sys.executable, "-c", CLIENT),
            *(SERVER_ADDRESS, str(port), json.dumps(requests)),
        ]
        with trio.fail_after(TIMEOUT):
            done = await trio.run_process(client, capture_stdout=True, capture_stderr=True)
        assert json.loads(done.stdout) == [200, 403, 403, 200, 200]
    finally:
        await stop_process(process)
