"""docs/architecture.md names every module of the package, and only modules that exist.

Its "Every module" section has one heading per folder (``### `nsqd/tcp/`: ...``) and one
bullet per module under it (``- `connection.py`: ...``). A package's ``__init__.py`` is its
folder's heading; the root package's is listed like a module.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nsqbox"
DOC = ROOT / "docs" / "architecture.md"

HEADING = re.compile(r"^### `([\w/]+)/`")
BULLET = re.compile(r"^- `([\w]+\.py)`: \S")


def documented() -> set[str]:
    """The modules the doc lists, as paths relative to ``nsqbox/``."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Every module", 1)[1].split("\n## ", 1)[0]
    found: set[str] = set()
    folder: str | None = None
    for line in section.splitlines():
        if heading := HEADING.match(line):
            name = heading.group(1)
            folder = "" if name == "nsqbox" else name + "/"
        elif (bullet := BULLET.match(line)) and folder is not None:
            found.add(folder + bullet.group(1))
    return found


def modules() -> set[str]:
    return {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" or path.parent == PACKAGE
    }


def test_every_module_is_in_the_architecture_doc() -> None:
    missing = sorted(modules() - documented())
    assert not missing, f"add these to docs/architecture.md, under their folder: {missing}"


def test_the_architecture_doc_names_no_module_that_is_gone() -> None:
    listed = documented()
    assert len(listed) > 150  # the section was found and read
    stale = sorted(listed - modules())
    assert not stale, f"docs/architecture.md lists modules that no longer exist: {stale}"
