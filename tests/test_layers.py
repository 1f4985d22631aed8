"""The package's import graph: one-way layers, no circles.

Walks every module under ``nsqbox/`` with ``ast`` (imports at any depth, lazy
ones included) and fails on an import circle, or on an arrow into
``nsqbox.nsqd`` from below it or beside it: root plumbing, lookupd, admin and
the tools must not need nsqd's code (issue "One-way layers"). Also holds the project's
rule of one concept per module, at most 500 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

PACKAGE: Final = Path(__file__).resolve().parents[1] / "nsqbox"

#: The most lines a module may have (STYLE: one concept per module, 500 lines at most).
MAX_MODULE_LINES: Final = 500

#: Packages that must never import nsqbox.nsqd (they sit below or beside it).
NOT_ABOVE_NSQD: Final = (
    "nsqbox.go",
    "nsqbox.wire",
    "nsqbox.net",
    "nsqbox.process",
    "nsqbox.broker",
    "nsqbox.snapshot",
    "nsqbox.http",
    "nsqbox.metrics",
    "nsqbox.lookupd",
    "nsqbox.admin",
    "nsqbox.tools",
    "nsqbox.client",
)

#: nsqd's own floors, bottom up: each may import only the floors listed for it (and itself).
#: The TCP edge and the HTTP routes sit side by side over the domain; the modules at nsqd's
#: root (the server, the runner, config, lookup, statsd) assemble them. The routes may read
#: the command line's flag tables (``/config``) and statsd's prefix (``/info``).
NSQD_FLOORS: Final = {
    "nsqbox.nsqd.diskqueue": (),
    "nsqbox.nsqd.domain": ("nsqbox.nsqd.diskqueue",),
    "nsqbox.nsqd.tcp": ("nsqbox.nsqd.domain",),
    "nsqbox.nsqd.routes": (
        "nsqbox.nsqd.domain",
        "nsqbox.nsqd.diskqueue",
        "nsqbox.nsqd.config",
        "nsqbox.nsqd.statsd",
        "nsqbox.nsqd.tap_file",
    ),
}

#: The root of the package holds only its faces: the package itself and the command.
ROOT_MODULES: Final = {"__init__.py", "__main__.py", "cli.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str) -> set[str]:
    """The nsqbox modules ``path`` (module ``name``) imports, resolved to modules."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m == "nsqbox" or m.startswith("nsqbox.")}


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in imports(path, name) if t in modules and t != name}
        edges[name] = {t for t in targets if t != "nsqbox"}  # the root package is a face
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_circles() -> None:
    assert circles(graph()) == []


def test_nothing_below_or_beside_nsqd_imports_it() -> None:
    upward = sorted(
        (source, target)
        for source, targets in graph().items()
        for target in targets
        if target.startswith("nsqbox.nsqd")
        and any(source == low or source.startswith(low + ".") for low in NOT_ABOVE_NSQD)
    )
    assert upward == []


def test_nsqd_floors_import_only_downward() -> None:
    def floor(module: str) -> str | None:
        return next((f for f in NSQD_FLOORS if module == f or module.startswith(f + ".")), None)

    def allowed(target: str, floors: tuple[str, ...]) -> bool:
        return any(target == f or target.startswith(f + ".") for f in floors)

    wrong = sorted(
        (source, target)
        for source, targets in graph().items()
        if (here := floor(source)) is not None
        for target in targets
        if target.startswith("nsqbox.nsqd.")
        and floor(target) != here
        and not allowed(target, NSQD_FLOORS[here])
    )
    assert wrong == []


def test_the_package_root_holds_only_its_faces() -> None:
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == ROOT_MODULES, f"put these in the folder of their layer: {loose - ROOT_MODULES}"


def test_the_walk_sees_the_imports() -> None:
    # a walk that read nothing would pass the two tests above vacuously
    edges = graph()
    assert "nsqbox.nsqd.domain.channel" in edges["nsqbox.nsqd.domain.nsqd"]
    assert "nsqbox.wire.errors" in edges["nsqbox.nsqd.tcp.connection"]


def test_the_terminal_sanitizer_imports_no_nsqbox_module() -> None:
    # it sits at the bottom: the TUI, the tools and any service may use it
    assert graph()["nsqbox.process.terminal_text"] == set()


def test_every_module_is_at_most_500_lines() -> None:
    sizes = {
        module_name(path): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 100  # the walk found the package
    over = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not over, f"split these by concept (at most {MAX_MODULE_LINES} lines): {over}"
