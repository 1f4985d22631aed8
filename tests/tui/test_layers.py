"""The TUI's imports run one way: it knows nothing of the box, and no view imports another.

Read from the source (every import, lazy ones too), so a circle cannot come back unnoticed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nsqbox.admin.tui

TUI = Path(nsqbox.admin.tui.__file__).parent
PACKAGE = "nsqbox.admin.tui"
#: The cluster views: only the app imports them (a view posts a navigation message instead).
VIEWS = {"topics", "topic", "channel", "nodes", "faults", "journey", "troubles"}


def imported(module: str) -> set[str]:
    """Every module ``admin/tui/<module>.py`` imports, as absolute names."""
    tree = ast.parse((TUI / f"{module}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            package = PACKAGE.split(".")[: len(PACKAGE.split(".")) - node.level + 1]
            base = ".".join(package) if node.level else ""
            prefix = ".".join(part for part in (base, node.module) if part)
            names.add(prefix)
            names.update(f"{prefix}.{alias.name}" for alias in node.names)
    return names


def test_imports_are_read_with_their_package() -> None:
    assert "nsqbox.admin.tui.topic.TopicScreen" in imported("app")
    assert "nsqbox.client.blocking.BlockingConsumer" in imported("tail")  # ``from ...client``
    assert "nsqbox.admin.model.ClusterSnapshot" in imported("base")  # ``from ..model``


def test_the_tui_knows_nothing_of_the_box() -> None:
    for path in TUI.glob("*.py"):
        names = imported(path.stem)
        box = {n for n in names if n.split(".")[:2] in (["nsqbox", "box"], ["nsqbox", "up"])}
        assert not box, (path.name, box)
        assert not {n for n in names if n.startswith("nsqbox.run.up_tui")}, path.name


def test_no_view_imports_another() -> None:
    for view in VIEWS:
        others = {f"nsqbox.admin.tui.{v}" for v in VIEWS - {view}}
        assert not imported(view) & others, view
