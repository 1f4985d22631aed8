"""docs/testing.md's examples, run as the user's suite would run them.

Every ``python`` block whose first line is ``# <file>.py`` is written to that file and
the files are run together by pytester: one module per client style (pynsq on tornado,
gnsq on gevent, ansq on asyncio, nsqbox's client on trio), factories and a conftest.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import run_generated

pytest_plugins = ["pytester"]

_BLOCK = re.compile(r"```python\n# (?P<name>[\w/]+\.py)\n(?P<body>.*?)```", re.DOTALL)


def examples(docs: Path) -> dict[str, str]:
    """The runnable blocks of ``docs``, by file name."""
    found: dict[str, str] = {}
    for match in _BLOCK.finditer(docs.read_text()):
        assert match["name"] not in found, f"two examples named {match['name']}"
        found[match["name"]] = match["body"]
    return found


def test_the_docs_have_an_example_per_client_style(docs_path: Path) -> None:
    assert {
        "test_orders_pynsq.py",
        "test_events_gnsq.py",
        "test_events_ansq.py",
        "test_events_trio.py",
        "conftest.py",
    } <= set(examples(docs_path))


def test_the_docs_examples_pass(pytester: pytest.Pytester, docs_path: Path) -> None:
    for client in ("nsq", "gnsq", "ansq"):  # the test extra installs them
        pytest.importorskip(client)
    blocks = examples(docs_path)
    for name, body in blocks.items():
        pytester.path.joinpath(name).write_text(body)
    expected = sum(len(re.findall(r"^(?:async )?def test_", b, re.M)) for b in blocks.values())
    result = run_generated(pytester, "-v")
    result.assert_outcomes(passed=expected)
