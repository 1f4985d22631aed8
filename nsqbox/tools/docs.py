"""``nsqbox docs``: the documentation that ships in the package, for installs without the repo.

``nsqbox docs`` lists the documents (name and title); ``nsqbox docs NAME`` prints one (the
Markdown of ``docs/NAME.md``); ``nsqbox docs --path`` prints the folder they are in. The README
links to these files relatively, which a wheel's description cannot follow: this is how a user
who installed nsqbox from a wheel reads them.
"""

from __future__ import annotations

import sys
from importlib import resources
from importlib.resources.abc import Traversable

__all__ = ["docs_folder", "main"]

USAGE = """\
usage: nsqbox docs [NAME | --path]
  with no argument, list the documents; with NAME (e.g. testing), print docs/NAME.md;
  --path prints the folder they are in
"""


def docs_folder() -> Traversable:
    """The folder of the packaged documents (``nsqbox/docs``, the repository's ``docs/``)."""
    return resources.files("nsqbox") / "docs"


def _documents() -> dict[str, Traversable]:
    folder = docs_folder()
    if not folder.is_dir():
        return {}
    return {
        entry.name.removesuffix(".md"): entry
        for entry in sorted(folder.iterdir(), key=lambda e: e.name.removesuffix(".md"))
        if entry.name.endswith(".md")
    }


def _title(doc: Traversable) -> str:
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def main(argv: list[str]) -> int:
    """Run ``nsqbox docs``; the exit status."""
    if argv and argv[0] in ("-h", "-help", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if len(argv) > 1:
        sys.stderr.write(USAGE)
        return 2
    documents = _documents()
    if not documents:
        print("nsqbox docs: this install has no documents", file=sys.stderr)
        return 1
    if not argv:
        width = max(len(name) for name in documents)
        for name, entry in documents.items():
            print(f"{name:<{width}}  {_title(entry)}")
        return 0
    if argv[0] in ("-path", "--path"):
        print(docs_folder())
        return 0
    name = argv[0].removeprefix("docs/").removesuffix(".md")
    doc = documents.get(name)
    if doc is None:
        print(
            f"nsqbox docs: no document {argv[0]!r} (there are: {', '.join(documents)})",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(doc.read_text(encoding="utf-8"))
    return 0
