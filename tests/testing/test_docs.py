"""docs/testing.md's examples, run as the user's suite would run them.

Every ``python`` block whose first line is ``# <file>.py`` is written to that file and
the files are run together by pytester: one module per client style (pynsq on tornado,
gnsq on gevent, ansq on asyncio, nsqbox's client on trio), factories and a conftest.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

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


def test_the_docs_fixture_examples_pass_in_subprocess_mode(
    pytester: pytest.Pytester, docs_path: Path
) -> None:
    """The docs say tests pass the same way in every mode: the examples that use nsqbox's
    own fixtures and client (no third-party client) run in subprocess mode too, faults
    included (through the nsqds' /nsqbox/faults routes)."""
    blocks = examples(docs_path)
    chosen = ["test_session_app.py", "test_restart.py", "test_cluster.py", "conftest.py",
              "test_custom_box.py", "test_under_faults.py", "test_testing_time.py"]  # fmt: skip
    for name in chosen:
        pytester.path.joinpath(name).write_text(blocks[name])
    expected = sum(len(re.findall(r"^(?:async )?def test_", blocks[n], re.M)) for n in chosen)
    result = run_generated(pytester, "-v", "--nsqbox-mode=subprocess", "--nsqbox-start-timeout=30")
    result.assert_outcomes(passed=expected)


# -- the reference lines ------------------------------------------------------------------

_API_SECTION = re.compile(r"<!-- api: (?P<target>[\w.]+) -->\n(?P<body>.*?)<!-- /api -->", re.S)


def documented_api(docs: Path) -> dict[str, dict[str, str | None]]:
    """``{class path: {name: parameter text or None}}`` from the ``<!-- api -->`` sections.

    Entries may list several names (``- `a(x)`, `b(y)`: ...``); every one is checked.
    """
    found: dict[str, dict[str, str | None]] = {}
    for section in _API_SECTION.finditer(docs.read_text()):
        entries = found.setdefault(section["target"], {})
        for line in re.split(r"\n(?=- )", section["body"]):
            line = re.sub(r"\s*\n\s*", " ", line)
            head = line.split("`:", 1)[0] + "`" if "`:" in line else line
            for match in re.finditer(r"`(\w+)(?:\(([^`]*)\))?`", head):
                entries[match[1]] = match[2]
    return found


def _signature_text(function: Any) -> str:
    """A function's parameters as the docs spell them (no self, no annotations)."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    parts: list[str] = []
    star = False
    for p in parameters:
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = p.name if p.kind is not p.VAR_KEYWORD else f"**{p.name}"
        if p.default is not p.empty:
            text += f"={p.default!r}"
        parts.append(text)
    return ", ".join(parts)


def _public_names(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and n not in _NOT_REFERENCE}


#: Public names that are data or internals, not part of the documented reference.
_NOT_REFERENCE = {
    "addresses",
    "box",
    "cleanup",
    "cluster",
    "expectation",
    "lookupd_http_address",
    "lookupd_http_addresses",
    "lookupd_tcp_address",
    "lookupd_tcp_addresses",
    "mode",
    "namespace",
    "nsqd_http_address",
    "nsqd_http_addresses",
    "nsqd_tcp_address",
    "nsqd_tcp_addresses",
    "ops",
    "timeout",
    "topic",
    "messages",
    "bodies",
}


_REFERENCES = {
    "docs/testing.md": {
        "nsqbox.testing.NSQBox",
        "nsqbox.testing.Capture",
        "nsqbox.testing.TrioNSQBox",
        "nsqbox.testing.faults.Faults",
        "nsqbox.testing.faults_trio.TrioFaults",
    },
    "docs/client.md": {"nsqbox.client.blocking.BlockingConsumer"},
}


@pytest.mark.parametrize("path", sorted(_REFERENCES))
def test_the_reference_matches_the_code(path: str) -> None:
    """Every documented signature is the code's, and every public method is documented."""
    docs = Path(__file__).resolve().parents[2] / path
    api = documented_api(docs)
    assert set(api) == _REFERENCES[path]
    for target, entries in api.items():
        module, _, name = target.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        for method, params in entries.items():
            member = getattr(cls, method, None)
            assert member is not None, f"{target}.{method} is documented but does not exist"
            if params is not None:
                assert params == _signature_text(member), f"{target}.{method}"
        undocumented = _public_names(cls) - set(entries)
        assert not undocumented, f"{target}: not in {path}: {sorted(undocumented)}"


# -- docs/client.md ---------------------------------------------------------------------


def test_the_client_docs_examples_pass(pytester: pytest.Pytester) -> None:
    blocks = examples(Path(__file__).resolve().parents[2] / "docs" / "client.md")
    assert set(blocks) == {
        "test_client_producer.py",
        "test_client_consumer.py",
        "test_client_blocking.py",
    }
    for name, body in blocks.items():
        pytester.path.joinpath(name).write_text(body)
    expected = sum(len(re.findall(r"^(?:async )?def test_", b, re.M)) for b in blocks.values())
    run_generated(pytester, "-v").assert_outcomes(passed=expected)


def test_the_client_docs_list_every_config_field() -> None:
    """The Config table has every field, in order, with the code's default."""
    import dataclasses

    from nsqbox.client import Config

    text = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text()
    table = text.split("<!-- config: nsqbox.client.Config -->", 1)[1].split("<!-- /config -->")[0]
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \|", table, re.M)
    fields = dataclasses.fields(Config)
    assert [name for name, _ in rows] == [f.name for f in fields]
    for (name, default), f in zip(rows, fields, strict=True):
        if f.default is not dataclasses.MISSING and name != "user_agent":
            assert default == f"`{f.default!r}`", name


# -- the fixture table --------------------------------------------------------------------


def test_the_fixture_table_matches_the_plugin(docs_path: Path) -> None:
    """Every fixture is in the table, and the factories' signatures are the code's."""
    from nsqbox.testing import NSQBoxFactory, TrioBoxFactory, plugin

    table = docs_path.read_text().split("## The fixtures", 1)[1].split("\n\n###", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| \w+ \| (.*) \|$", table, re.M))
    fixtures = {name for name in plugin.__all__ if name.startswith("nsqbox")}
    assert set(rows) == fixtures
    for name, protocol in (
        ("nsqbox_factory", NSQBoxFactory),
        ("nsqbox_trio_factory", TrioBoxFactory),
    ):
        documented = re.search(rf"`(?:await )?{name}\(([^`]*)\)`", rows[name])
        assert documented is not None, name
        assert documented[1] == _signature_text(protocol.__call__), name
