"""A real Prometheus (Debian's package) scrapes nsqd's and the admin's ``/metrics``.

Prometheus asks for OpenMetrics, so this also shows that a real scraper ingests that format.
Skips when the ``prometheus`` binary is not installed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import trio

from tests.admin.conftest import Box
from tests.helpers import eventually
from tests.prometheus import open_prometheus

#: The longest the whole scenario may take (Prometheus starts, scrapes every second).
DEADLINE = 60
#: What the publisher sends: batches of this many messages, at most this many batches.
BATCH = 20
MAX_BATCHES = 2000


DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def documented_queries() -> list[str]:
    """The PromQL in docs/metrics.md: one query a line, indented lines continuing it."""
    queries: list[str] = []
    for block in re.findall(r"```promql\n(.*?)```", DOCS.read_text(), re.DOTALL):
        for line in block.splitlines():
            if line.startswith(" ") and queries:
                queries[-1] += "\n" + line
            elif line.strip():
                queries.append(line)
    return queries


async def query(client: httpx.AsyncClient, prometheus: str, promql: str) -> list[Any]:
    """An instant query's result vector."""
    response = await client.get(f"{prometheus}/api/v1/query", params={"query": promql})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "success", body
    result: list[Any] = body["data"]["result"]
    return result


async def test_prometheus_gets_the_publish_rate(box: Box, tmp_path: Path) -> None:
    node = box.nsqd_http(0)
    admin = box.admin.removeprefix("http://")
    jobs = {"nsqd": [node], "nsqadmin": [admin]}
    async with (
        open_prometheus(tmp_path, jobs) as prometheus,
        httpx.AsyncClient(timeout=10, trust_env=False) as client,
        trio.open_nursery() as nursery,
    ):
        stop = trio.Event()

        async def publish() -> None:
            body = b"\n".join(b"m%d" % i for i in range(BATCH))
            for _ in range(MAX_BATCHES):
                if stop.is_set():
                    return
                response = await client.post(
                    f"http://{node}/mpub", params={"topic": "stream"}, content=body
                )
                assert response.status_code == 200
                await trio.sleep(0.05)  # a steady trickle, not a flood

        nursery.start_soon(publish)
        rates: dict[str, float] = {}

        async def rate_seen() -> bool:
            for job in jobs:
                promql = f'rate(nsqd_topic_messages_total{{job="{job}",topic="stream"}}[10s])'
                result = await query(client, prometheus.url, promql)
                if not result or float(result[0]["value"][1]) <= 0:
                    return False
                rates[job] = float(result[0]["value"][1])
                if job == "nsqadmin":
                    assert result[0]["metric"]["node"] == node
            return True

        await eventually(rate_seen, within=DEADLINE, every=0.5)  # its log is printed if not
        # the publisher stops between requests: one cancelled while it sends its body leaves
        # httpx's body iterator to the collector, a ResourceWarning in another test
        stop.set()
        # the documented queries are PromQL Prometheus takes (their results depend on timing)
        queries = documented_queries()
        assert len(queries) >= 8
        for promql in queries:
            await query(client, prometheus.url, promql)
        [publish_rate] = await query(client, prometheus.url, queries[0])
        assert publish_rate["metric"] == {"topic": "stream"}
    assert set(rates) == {"nsqd", "nsqadmin"}
