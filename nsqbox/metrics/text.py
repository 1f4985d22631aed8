"""Writing nsqbox's own families in the exposition formats, as ``prometheus_client`` would.

``prometheus_client`` writes every sample through generic code: each label name checked
against a regular expression, each name escaped character by character (OpenMetrics), for
every sample. With 10,000 topics a scrape has some 120,000 samples, and that was 6 of its 7
seconds. The families nsqbox builds (:mod:`.families`) are of one simple shape: names and
label names valid in the legacy character set, no timestamps, exemplars, ``_created`` or
native histograms. :func:`write_families` writes those byte for byte as the library does
(``tests/metrics``-style equality tests check it against the library), in one pass that costs
a string format per sample; anything else goes to the library (:func:`simple`).

Imports ``prometheus_client``: import this module when a scrape comes, not before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import ALLOWUTF8, UNDERSCORES
from prometheus_client.utils import floatToGoString

__all__ = ["FAST_ESCAPINGS", "simple", "write_families"]

#: The name escapings under which a legacy-valid name is written unchanged.
FAST_ESCAPINGS = (UNDERSCORES, ALLOWUTF8)

_LEGACY_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LEGACY_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
#: The Prometheus text format's type for each OpenMetrics type it renames.
_TEXT_TYPES = {"info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram"}
_TEXT_TYPES["unknown"] = "untyped"


def simple(metric: Metric) -> bool:
    """Whether :func:`write_families` writes ``metric`` as the library does."""
    if not _LEGACY_NAME.match(metric.name):
        return False
    extra = (metric.name + "_created", metric.name + "_gsum", metric.name + "_gcount")
    shapes: set[tuple[str, tuple[str, ...]]] = set()
    for s in metric.samples:
        if s.timestamp is not None or s.exemplar or s.native_histogram:
            return False
        shapes.add((s.name, tuple(s.labels)))
    return all(
        name not in extra and _LEGACY_NAME.match(name) and all(map(_LEGACY_LABEL.match, labels))
        for name, labels in shapes
    )


def _number(value: float) -> str:
    """``floatToGoString``, with a short cut for the whole numbers most samples are."""
    if type(value) is int and -(10**15) < value < 1_000_000:
        return f"{value}.0"  # what repr(float(value)) says, and Go's form below 1e6
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def _value(text: str) -> str:
    """A label value (or OpenMetrics help text) escaped: backslash, newline, double quote."""
    if "\\" in text or "\n" in text or '"' in text:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return text


def _header(metric: Metric, openmetrics: bool) -> str:
    name, kind, doc = metric.name, metric.type, metric.documentation
    if openmetrics:
        unit = f"# UNIT {name} {metric.unit}\n" if metric.unit else ""
        return f"# HELP {name} {_value(doc)}\n# TYPE {name} {kind}\n{unit}"
    if kind == "counter":
        name += "_total"
    elif kind == "info":
        name += "_info"
    kind = _TEXT_TYPES.get(kind, kind)
    doc = doc.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"


def write_families(metrics: Iterable[Metric], openmetrics: bool) -> list[str]:
    """The text of ``metrics`` (each :func:`simple`), in the OpenMetrics or the Prometheus
    text format, without OpenMetrics' closing ``# EOF``."""
    out: list[str] = []
    append = out.append
    order: dict[tuple[str, ...], tuple[str, ...]] = {}  # label names -> sorted
    for metric in metrics:
        append(_header(metric, openmetrics))
        for s in metric.samples:
            labels = s.labels
            if labels:
                keys = tuple(labels)
                names = order.get(keys)
                if names is None:
                    names = order[keys] = tuple(sorted(keys))
                text = ",".join([f'{k}="{_value(labels[k])}"' for k in names])
                append(f"{s.name}{{{text}}} {_number(s.value)}\n")
            else:
                append(f"{s.name} {_number(s.value)}\n")
    return out
