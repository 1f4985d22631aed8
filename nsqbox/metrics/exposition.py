"""A scrape target: collectors written in the exposition format the scraper asks for.

Prometheus' text format (``text/plain; version=0.0.4``) unless the request's ``Accept`` asks
for OpenMetrics (``application/openmetrics-text``), as Prometheus itself does;
``prometheus_client`` chooses and writes the format.

Imports ``prometheus_client``: import this module when a scrape comes, not before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics

from ..http.messages import Response
from .text import FAST_ESCAPINGS, simple, write_families

__all__ = ["Exposition"]


_EOF = b"# EOF\n"


class _Families:
    """A collector of some families."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


class _Chain:
    """A collector that yields some families and then a registry's."""

    def __init__(self, first: Iterable[Metric], then: CollectorRegistry) -> None:
        self.first = first
        self.then = then

    def collect(self) -> Iterator[Metric]:
        return itertools.chain(self.first, self.then.collect())


class Exposition:
    """What one ``/metrics`` route exports: the scrape's families, then the process's own.

    The process's metrics are ``prometheus_client``'s standard ``process_*`` (CPU, memory,
    file descriptors, start time; Linux only), ``python_info`` and ``python_gc_*``. Each
    exposition has a registry of its own (not the library's global one), so that several
    services in one process do not share or clash.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def render(self, accept: str | None, first: Iterable[Metric]) -> Response:
        """The answer to a scrape whose ``Accept`` header is ``accept``: ``first``, the families
        built for this scrape, then the process's."""
        try:
            encode, content_type = choose_encoder(accept or "")
        except (TypeError, ValueError):  # a version it cannot compare ("version=abc")
            encode, content_type = choose_encoder("")  # the plain text format, as for no header
        escaping = getattr(encode, "keywords", {}).get("escaping", openmetrics.UNDERSCORES)
        if escaping in FAST_ESCAPINGS:
            body = self._write(encode, first)
        else:  # names escaped another way: the library's own writer, every family
            body = encode(_Chain(first, self.registry))
        return Response(200, body, (("Content-Type", content_type),), nsq_header=False)

    def _write(self, encode: Callable[[Any], bytes], first: Iterable[Metric]) -> bytes:
        """``first`` written by :func:`~.text.write_families` (a family it cannot write
        exactly as the library does goes to the library), then the process's families."""
        om = getattr(encode, "func", encode) is openmetrics.generate_latest
        parts: list[bytes] = []
        run: list[Metric] = []
        for metric in first:
            if simple(metric):
                run.append(metric)
                continue
            parts.append("".join(write_families(run, om)).encode())
            run = []
            parts.append(_without_eof(encode(_Families([metric])), om))
        parts.append("".join(write_families(run, om)).encode())
        parts.append(encode(self.registry))  # its # EOF closes an OpenMetrics answer
        return b"".join(parts)


def _without_eof(body: bytes, om: bool) -> bytes:
    return body[: -len(_EOF)] if om and body.endswith(_EOF) else body
