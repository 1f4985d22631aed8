"""docs/routes.md states the peek route's defaults and bounds and the clock's cap: they must
be the code's."""

from __future__ import annotations

from pathlib import Path

from nsqbox.broker.clock import MAX_ADVANCE
from nsqbox.nsqd.routes import peek

DOC = (Path(__file__).resolve().parents[2] / "docs" / "routes.md").read_text()


def test_the_peek_table_is_the_code() -> None:
    limit = f"| `limit` | {peek.DEFAULT_LIMIT} | 1 to {peek.MAX_LIMIT:,} |"
    body = f"| `body_bytes` | {peek.DEFAULT_BODY_BYTES:,} | 1 to {peek.MAX_BODY_BYTES:,} |"
    assert limit in DOC
    assert body in DOC
    assert f"a node refuses more than {peek.MAX_LIMIT:,}" in DOC
    assert f"a node refuses more than {peek.MAX_BODY_BYTES:,}" in DOC
    assert peek.PAGE_BYTES == 1024 * 1024
    assert "hold 1 MiB" in DOC


def test_the_clock_cap_is_the_code() -> None:
    assert MAX_ADVANCE == 366 * 24 * 3600  # "at most 366 days (`8784h`)"
    assert "above 0\nand at most 366 days (`8784h`)" in DOC
