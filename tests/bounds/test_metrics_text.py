"""nsqbox's own writer of its metric families is byte for byte ``prometheus_client``'s
(issue #37, "Bounds": the library's generic writer was 6 of a 10,000-topic scrape's 7 s).

The families come from a real nsqd's state (topics, channels, e2e latency summaries, the
info family with a hostname that needs escaping); each format and escaping a scraper can
ask for is written by both and compared.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics

from nsqbox.metrics.families import MetricFamilies
from nsqbox.metrics.text import simple, write_families
from nsqbox.nsqd.routes.metrics import node_snapshot
from nsqbox.nsqd.server import serve_nsqd
from nsqbox.testing.trio_box import poll_on_loop
from tests.conftest import make_options
from tests.helpers import RawConn

ACCEPTS = [
    "",
    "text/plain; version=0.0.4",
    "text/plain; version=1.0.0; escaping=allow-utf-8",
    "application/openmetrics-text; version=1.0.0",
    "application/openmetrics-text; version=1.0.0; escaping=allow-utf-8",
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",  # what Prometheus sends
]


class _Families:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


async def _families(tmp_path: Path, node_label: bool) -> list[Metric]:
    options = make_options(data_path=str(tmp_path), e2e_processing_latency_percentiles=[0.5, 1.0])
    async with trio.open_nursery() as nursery:
        node = await nursery.start(serve_nsqd, options)
        node.nsqd.hostname = 'box "one"\\\nline two'
        conn = await RawConn.open(node.tcp)
        await conn.sub("orders", "billing", rdy=10)
        pub = await RawConn.open(node.tcp)
        await pub.mpub("orders", [b"a", b"b", b"c"])
        await pub.mpub("audit#ephemeral", [b"x"])
        for _ in range(2):
            msg = await conn.message()
            await conn.send(b"FIN " + msg.id + b"\n")
        channel = node.nsqd.topics["orders"].channels["billing"]
        assert await poll_on_loop(lambda: channel.in_flight_count() == 1, 10)
        families = MetricFamilies(node_label=node_label)
        families.add(node_snapshot(node.nsqd), "127.0.0.1:4151")
        if node_label:
            families.add_unreachable("10.0.0.1:4151")
        await conn.aclose()
        await pub.aclose()
        nursery.cancel_scope.cancel()
    return families.collect()


@pytest.mark.parametrize("node_label", [False, True])
async def test_the_writer_is_the_librarys_byte_for_byte(tmp_path: Path, node_label: bool) -> None:
    metrics = await _families(tmp_path, node_label)
    assert all(simple(m) for m in metrics)
    assert any(m.type == "summary" and m.samples for m in metrics)  # the latency quantiles
    for accept in ACCEPTS:
        encode, _ = choose_encoder(accept)
        om = getattr(encode, "func", encode) is openmetrics.generate_latest
        expected = encode(_Families(metrics))
        ours = "".join(write_families(metrics, om)).encode() + (b"# EOF\n" if om else b"")
        assert ours == expected, accept
    assert b'hostname="box \\"one\\"\\\\\\nline two"' in expected


def test_other_shapes_and_escapings_go_to_the_library() -> None:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from nsqbox.metrics.exposition import Exposition

    stamped = GaugeMetricFamily("nsqd_stamped", "A sample with a timestamp.", labels=["topic"])
    stamped.add_metric(["t"], 1, timestamp=12.5)
    created = CounterMetricFamily("nsqd_made", "A counter with _created.", labels=["topic"])
    created.add_metric(["t"], 3, created=100.0)
    plain = GaugeMetricFamily("nsqd_plain_value", "Plain.", labels=["topic"])
    plain.add_metric(["t"], 7)
    assert not simple(stamped)
    assert not simple(created)
    assert simple(plain)
    exposition = Exposition()
    body = exposition.render("", [stamped, created, plain]).body
    assert isinstance(body, bytes)
    text = body.decode()
    assert 'nsqd_stamped{topic="t"} 1.0 12500\n' in text
    assert 'nsqd_made_created{topic="t"} 100.0\n' in text
    assert text.index("nsqd_stamped") < text.index("nsqd_made") < text.index("nsqd_plain_value")
    dots = "application/openmetrics-text; version=1.0.0; escaping=dots"
    body = exposition.render(dots, [plain]).body
    assert isinstance(body, bytes)
    assert b'nsqd__plain__value{topic="t"} 7.0\n' in body
    assert body.endswith(b"# EOF\n")
