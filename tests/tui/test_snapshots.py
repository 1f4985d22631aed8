"""SVG snapshots of every view on a fixed cluster (the demo backend: no server, no clock).

Each view is rendered by :func:`nsqbox.admin.tui.tour.render` and compared with
``tests/tui/snapshots/<view>.svg``. After an intended change to the look, regenerate them with::

    NSQBOX_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/tui/test_snapshots.py

and look at the new files (any browser shows them) before committing. A mismatch leaves the
new rendering next to the test's temporary files and says where.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from nsqbox.admin.tui.tour import VIEWS, render

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("NSQBOX_UPDATE_SNAPSHOTS") == "1"

# Rich names the SVG's classes and clip paths after a hash of the content; the hash changes
# with the rendering, which the comparison already sees: drop it so diffs show what changed.
_IDS = re.compile(r"terminal-\d+")


def normalize(svg: str) -> str:
    """The SVG without its content-hash ids, one element per line."""
    return _IDS.sub("terminal", svg).replace("><", ">\n<")


@pytest.mark.parametrize("view", list(VIEWS))
def test_view_snapshot(view: str, tmp_path: Path) -> None:
    svg = asyncio.run(render(view))
    path = SNAPSHOTS / f"{view}.svg"
    if UPDATE or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"no snapshot for {view}: wrote {path}; check it and commit it")
        return
    if normalize(svg) != normalize(path.read_text(encoding="utf-8")):
        actual = tmp_path / f"{view}.svg"
        actual.write_text(svg, encoding="utf-8")
        pytest.fail(
            f"the {view} view does not match {path}; it now renders as {actual}. If the "
            "change is intended: NSQBOX_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_snapshots.py"
        )


def test_rendering_is_deterministic() -> None:
    """Two renderings of the busiest view are identical, ids included."""
    assert asyncio.run(render("channel")) == asyncio.run(render("channel"))
