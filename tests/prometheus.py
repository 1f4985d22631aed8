"""Test helpers for the ``/metrics`` routes: parsing expositions, expected series, promtool,
and a real Prometheus server."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import eventually

#: A series: its sample name and its labels, sorted.
Key = tuple[str, tuple[tuple[str, str], ...]]

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")


def key(name: str, **labels: str) -> Key:
    return (name, tuple(sorted(labels.items())))


def series(text: str, *, openmetrics: bool = False) -> dict[Key, float]:
    """Every sample of an exposition, parsed by prometheus_client's own parser."""
    parse = openmetrics_families if openmetrics else text_string_to_metric_families
    found: dict[Key, float] = {}
    for family in parse(text):
        for sample in family.samples:
            k = key(sample.name, **sample.labels)
            assert k not in found, f"duplicate series {k}"
            found[k] = sample.value
    return found


def nsq_series(found: dict[Key, float], node: str | None = None) -> dict[Key, float]:
    """The per-topic and per-channel series (of ``node`` when given)."""
    return {
        k: v
        for k, v in found.items()
        if k[0].startswith(("nsqd_topic_", "nsqd_channel_"))
        and (node is None or ("node", node) in k[1])
    }


def _flag(value: bool) -> str:
    return "true" if value else "false"


def expected_series(stats: dict[str, Any], node: str | None = None) -> dict[Key, float]:
    """What ``/metrics`` must say of the topics and channels in a /stats JSON document."""
    base = {} if node is None else {"node": node}
    out: dict[Key, float] = {}
    for topic in stats["topics"] or []:
        labels = {**base, "topic": topic["topic_name"], "paused": _flag(topic["paused"])}
        out[key("nsqd_topic_messages_total", **labels)] = topic["message_count"]
        out[key("nsqd_topic_message_bytes_total", **labels)] = topic["message_bytes"]
        out[key("nsqd_topic_depth", **labels)] = topic["depth"]
        out[key("nsqd_topic_backend_depth", **labels)] = topic["backend_depth"]
        _latency(out, "nsqd_topic_e2e_processing_latency_seconds", labels, topic)
        for channel in topic["channels"]:
            labels = {
                **base,
                "topic": topic["topic_name"],
                "channel": channel["channel_name"],
                "paused": _flag(channel["paused"]),
            }
            for name, field in (
                ("messages_total", "message_count"),
                ("requeues_total", "requeue_count"),
                ("timeouts_total", "timeout_count"),
                ("depth", "depth"),
                ("backend_depth", "backend_depth"),
                ("in_flight", "in_flight_count"),
                ("deferred", "deferred_count"),
                ("clients", "client_count"),
            ):
                out[key(f"nsqd_channel_{name}", **labels)] = channel[field]
            _latency(out, "nsqd_channel_e2e_processing_latency_seconds", labels, channel)
    return out


def _latency(out: dict[Key, float], name: str, labels: dict[str, str], row: Any) -> None:
    for p in row["e2e_processing_latency"]["percentiles"] or []:
        out[key(name, **labels, quantile=repr(float(p["quantile"])))] = p["value"] / 1e9


def promtool_check(text: str) -> str:
    """``promtool check metrics`` on a text-format exposition: its complaints ("" for none)."""
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return "" if result.returncode == 0 else f"{result.returncode}: {result.stdout}{result.stderr}"


@dataclass(frozen=True)
class PrometheusServer:
    """A running Prometheus: its base URL and its log file."""

    url: str
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


#: How often a start is tried when another process took the port chosen for Prometheus.
START_ATTEMPTS = 3


@asynccontextmanager
async def open_prometheus(
    directory: Path, jobs: dict[str, list[str]], *, interval: str = "1s"
) -> AsyncIterator[PrometheusServer]:
    """Debian's Prometheus on 127.0.0.1 scraping ``jobs`` (job name: ``host:port`` targets).

    Its configuration, storage and log go in ``directory``; yields once it is ready and stops
    it (killed if it lingers) on the way out, printing its log if the test failed. Skips the
    test when Prometheus is not installed.
    """
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (Debian's prometheus package)")
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": targets}]}
            for job, targets in jobs.items()
        ],
    }
    config_file = directory / "prometheus.yml"
    await trio.Path(config_file).write_text(json.dumps(config))  # JSON is YAML
    for attempt in range(1, START_ATTEMPTS + 1):
        server, process = await _start(directory, config_file, attempt)
        try:
            if await _ready(server, process):
                break
        except BaseException:
            await _stop(process)
            raise
        await _stop(process)
        if "address already in use" not in server.log_tail() or attempt == START_ATTEMPTS:
            raise AssertionError(f"prometheus exited:\n{server.log_tail()}")
    try:
        yield server
    except BaseException:
        print(f"Prometheus log ({server.log}):\n{server.log_tail()}")
        raise
    finally:
        await _stop(process)


async def _start(
    directory: Path, config_file: Path, attempt: int
) -> tuple[PrometheusServer, trio.Process]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = PrometheusServer(f"http://127.0.0.1:{port}", directory / f"prometheus-{attempt}.log")
    async with await trio.open_file(server.log, "wb") as log_file:
        process = await trio.lowlevel.open_process(
            [
                PROMETHEUS or "prometheus",
                f"--config.file={config_file}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log_file.wrapped,
            stderr=subprocess.STDOUT,
        )
    return server, process


async def _ready(server: PrometheusServer, process: trio.Process) -> bool:
    """True once Prometheus answers ``/-/ready``; False if it exits first."""
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:

        async def ready_or_gone() -> bool:
            if process.returncode is not None:
                return True
            try:
                return (await client.get(f"{server.url}/-/ready")).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(ready_or_gone, within=60, every=0.1)
    return process.returncode is None


async def _stop(process: trio.Process) -> None:
    process.terminate()
    with trio.move_on_after(30):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
