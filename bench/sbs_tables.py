"""bench/side_by_side.py's rows and tables: the figures, the CPU use, the instructions."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Protocol

from instructions import INSTR, RAW, WAITS

#: The label of bench/ceiling.py's figures.
CEILING = "bare loop"
#: Suffix of a row's key for the server's CPU use during it (cores busy).
CPU = "@cpu"


class ServerSpec(Protocol):
    """What the tables need of a server: its label, and whether it is a bench/ script."""

    @property
    def label(self) -> str: ...

    @property
    def script(self) -> str: ...


@dataclass(frozen=True)
class Row:
    """One line of the table: its name, its unit, and whether lower is better."""

    name: str
    unit: str
    lower_is_better: bool = False
    #: The row whose reference figure its ratio compares with (default: its own).
    against: str = ""


ROWS = {
    "mpub200": Row("MPUB ingest, 200 x 200 B", "msgs/s"),
    "consume": Row("consume, RDY 2500, FIN each", "msgs/s"),
    "mpub1000": Row("MPUB 1,000 x 100 B, 1,000,000 msgs", "msgs/s"),
    "pub": Row("PUB one at a time, 200 B", "msgs/s"),
    "disk": Row("MPUB ingest, --mem-queue-size 0", "msgs/s"),
    "http_pub": Row("HTTP /pub, 100 B", "req/s"),
    "http_pub_h11": Row("HTTP /pub, h11 alone", "req/s", against="http_pub"),
    "http_mpub": Row("HTTP /mpub, 100 x 100 B", "msgs/s"),
    "lat_p50": Row("e2e latency p50 at fixed rate", "ms", lower_is_better=True),
    "lat_p99": Row("e2e latency p99 at fixed rate", "ms", lower_is_better=True),
    "rss_idle": Row("RSS idle", "MB", lower_is_better=True),
    "rss_1m": Row("RSS, 1,000,000 x 100 B queued", "MB", lower_is_better=True),
    "idle_identify": Row("idle connection, IDENTIFY", "KB", lower_is_better=True),
    "idle_sub": Row("idle connection, IDENTIFY + SUB", "KB", lower_is_better=True),
}


def _figure(value: float, unit: str) -> str:
    if unit in ("ms", "MB", "KB"):
        return f"{value:,.1f}"
    return f"{value:,.0f}"


Samples = dict[tuple[str, str], list[float]]


def _median(samples: Samples, label: str, key: str) -> float | None:
    values = samples.get((label, key))
    return statistics.median(values) if values else None


def _cell(value: float | None, unit: str) -> str:
    return "" if value is None else _figure(value, unit)


def _ratio(value: float | None, reference: float | None) -> str:
    return "" if value is None or not reference else f"{value / reference:.2f}x"


def print_table(specs: list[ServerSpec], samples: Samples) -> None:
    """Servers, their ratios to the first, then the floor and its ratio, then the bare loops.

    A cell is blank where its server did not run the row.
    """
    servers = [s for s in specs if not s.script]
    floors = [s for s in specs if s.script]
    reference = servers[0]
    bare = any(label == CEILING for label, _ in samples)
    head = [
        "workload",
        *(s.label for s in servers),
        *(f"{s.label} / {reference.label}" for s in servers[1:]),
        *(x for s in floors for x in (s.label, f"{s.label} / {reference.label}")),
        *([f"{CEILING} (one core)"] if bare else []),
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, row in ROWS.items():
        values = {s.label: _median(samples, s.label, key) for s in specs}
        if all(v is None for v in values.values()):
            continue
        ref = _median(samples, reference.label, row.against or key)
        cells = [f"{row.name} ({row.unit}{', lower is better' if row.lower_is_better else ''})"]
        cells += [_cell(values[s.label], row.unit) for s in servers]
        cells += [_ratio(values[s.label], ref) for s in servers[1:]]
        for s in floors:
            cells += [_cell(values[s.label], row.unit), _ratio(values[s.label], ref)]
        if bare:
            cells.append(_cell(_median(samples, CEILING, key), row.unit))
        print("| " + " | ".join(cells) + " |", flush=True)


def print_cpu_table(specs: list[ServerSpec], samples: Samples) -> None:
    """Cores each server kept busy per row, and its rate per busy core (per-core efficiency);
    the floor's two columns last."""
    servers = [s for s in specs if not s.script]
    floors = [s for s in specs if s.script]
    head = [
        "workload",
        *(f"{s.label} cores" for s in servers),
        *(f"{s.label} per core" for s in servers),
        *(x for s in floors for x in (f"{s.label} cores", f"{s.label} per core")),
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, row in ROWS.items():
        busy = {s.label: _median(samples, s.label, key + CPU) for s in specs}
        if not any(busy.values()):
            continue
        cores = {label: "" if b is None else f"{b:.2f}" for label, b in busy.items()}
        per_core = {}
        for label, b in busy.items():
            rate = _median(samples, label, key)
            per_core[label] = f"{rate / b:,.0f}" if rate and b else ""
        cells = [f"{row.name} ({row.unit})", *(cores[s.label] for s in servers)]
        cells += [per_core[s.label] for s in servers]
        for s in floors:
            cells += [cores[s.label], per_core[s.label]]
        print("| " + " | ".join(cells) + " |", flush=True)


#: The instruction table's name for a row whose load is not its own (the latency rows').
INSTR_NAMES = {"lat_p50": "e2e latency rows' load: PUB, deliver, FIN at a fixed rate"}


def _change(value: float, reference: float) -> str:
    return f"{(value / reference - 1) * 100:+.1f}%"


#: Messages per request of the HTTP rows, whose waits for a read the table shows per request.
PER_REQUEST = {"http_pub": 1, "http_mpub": 100}


def _waits(samples: Samples, label: str, key: str) -> str:
    """A server's waits for a read per request on an HTTP row, run by run ("" elsewhere)."""
    values = samples.get((label, key + WAITS), []) if key in PER_REQUEST else []
    return ", ".join(f"{v * PER_REQUEST[key]:.3f}" for v in values)


def _median_change(pairs: list[tuple[float, float]]) -> str:
    """The median of the pairs' changes, and of their differences (instructions a message)."""
    if not pairs:
        return ""
    change = _change(statistics.median(a / b for a, b in pairs), 1.0)
    return f"{change} ({statistics.median(a - b for a, b in pairs):+,.0f} a message)"


def print_instruction_table(specs: list[ServerSpec], samples: Samples) -> None:
    """Each nsqbox server's median instructions per message by row; for each server after
    the first, the first's change against it, pair by pair (the rounds, which alternate
    the servers' order) and the median of the pairs; then, on the HTTP rows, each server's
    waits for a read per request, run by run (paced loads: one each, bench/instructions.py)."""
    counted = {label for label, key in samples if key.endswith(INSTR)}
    servers = [s for s in specs if s.label in counted]
    if not servers:
        return
    first = servers[0]
    head = [
        "workload (server instructions per message)",
        *(s.label for s in servers),
        *(f"{first.label} / {s.label}, median of pairs (difference)" for s in servers[1:]),
        *(f"pairs ({first.label}, {s.label}: change)" for s in servers[1:]),
        *(f"idle left in: median, pairs ({s.label})" for s in servers[1:]),
        *(f"waits per request ({s.label})" for s in servers),
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, row in ROWS.items():
        mine = samples.get((first.label, key + INSTR))
        if not mine:
            continue
        cells = [INSTR_NAMES.get(key, row.name)]
        cells += [_cell(_median(samples, s.label, key + INSTR), "") for s in servers]
        pairs = []
        for s in servers[1:]:
            theirs = samples.get((s.label, key + INSTR), [])
            pairs.append(list(zip(mine, theirs, strict=False)))
        cells += [_median_change(p) for p in pairs]
        cells += ["; ".join(f"{a:,.0f} vs {b:,.0f}: {_change(a, b)}" for a, b in p) for p in pairs]
        raw = samples.get((first.label, key + RAW), [])
        for s in servers[1:]:
            p = list(zip(raw, samples.get((s.label, key + RAW), []), strict=False))
            changes = ", ".join(_change(a, b) for a, b in p)
            cells.append(f"{_change(statistics.median(a / b for a, b in p), 1.0)}: {changes}")
        cells += [_waits(samples, s.label, key) for s in servers]
        print("| " + " | ".join(cells) + " |", flush=True)
