"""docs/state.md's walk-through, run as a user's suite would run it, and its figures checked
against the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nsqbox.snapshot.format import FORMAT_VERSION, MAX_ATTEMPTS, MAX_LINE_BYTES, MAX_NODES
from nsqbox.snapshot.transfer import PIECE_BYTES
from tests.testing.conftest import run_generated

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "state.md"
_BLOCK = re.compile(r"```python\n# (?P<name>[\w/]+\.py)\n(?P<body>.*?)```", re.DOTALL)


def test_the_walk_through_passes(pytester: pytest.Pytester) -> None:
    blocks = {m["name"]: m["body"] for m in _BLOCK.finditer(DOC.read_text())}
    assert list(blocks) == ["test_payment_retry.py"]
    for name, body in blocks.items():
        pytester.path.joinpath(name).write_text(body)
    run_generated(pytester, "-v").assert_outcomes(passed=1)


def test_the_doc_states_the_code() -> None:
    text = DOC.read_text()
    assert f'{{"nsqbox_snapshot":{FORMAT_VERSION},' in text
    assert f"1 to {MAX_NODES}" in text
    assert f"0 to {MAX_ATTEMPTS}" in text
    assert MAX_LINE_BYTES == 64 * 1024 * 1024
    assert "over 64 MiB" in text
    assert PIECE_BYTES == 1024 * 1024
    assert "at most 1 MiB" in text
