"""Write a screenshot of every view of the admin TUI to ``screenshots/``.

Usage: ``.venv/bin/python scripts/screenshots.py [--no-png] [VIEW ...]``

Each view is rendered on the demo cluster (:mod:`nsqbox.admin.tui.demo`: fixed data, UTC clock)
by :func:`nsqbox.admin.tui.tour.render`, exactly as the snapshot tests do, and written as
``screenshots/<view>.svg``. When cairosvg is installed (``pip install cairosvg``; it needs
the system's libcairo2) each SVG is also rasterised to ``screenshots/<view>.png``, with the
monospace font the system has (DejaVu Sans Mono) in place of the SVG's web font. The SVG is
the reference; the PNG is for places that do not show SVG.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from nsqbox.admin.tui.tour import VIEWS, render

OUT = Path(__file__).resolve().parent.parent / "screenshots"
#: The local font used for PNGs; Rich's SVG asks for Fira Code from the web.
PNG_FONT = "DejaVu Sans Mono"


def to_png(svg: str, path: Path) -> bool:
    """Rasterise ``svg`` to ``path``; False when cairosvg is not available."""
    try:
        import cairosvg  # type: ignore[import-untyped]
    except (ImportError, OSError):  # not installed, or libcairo missing
        return False
    local = svg.replace('font-family: "Fira Code"', f'font-family: "{PNG_FONT}"')
    local = local.replace("font-family: Fira Code, monospace", f'font-family: "{PNG_FONT}"')
    cairosvg.svg2png(bytestring=local.encode(), write_to=str(path), scale=1.5)
    return True


def main(argv: list[str]) -> int:
    """Render the views named in ``argv`` (default: all); the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("views", nargs="*", metavar="VIEW", help=", ".join(VIEWS))
    parser.add_argument("--no-png", action="store_true", help="write the SVGs only")
    args = parser.parse_args(argv)
    unknown = [v for v in args.views if v not in VIEWS]
    if unknown:
        parser.error(f"no view {unknown[0]!r} (views: {', '.join(VIEWS)})")
    OUT.mkdir(exist_ok=True)
    png = not args.no_png
    for view in args.views or list(VIEWS):
        svg = asyncio.run(render(view))
        (OUT / f"{view}.svg").write_text(svg, encoding="utf-8")
        wrote = [f"{view}.svg"]
        if png and to_png(svg, OUT / f"{view}.png"):
            wrote.append(f"{view}.png")
        elif png:
            png = False
            print("cairosvg is not installed: SVG only", file=sys.stderr)
        print(f"screenshots/{' and '.join(wrote)}: {VIEWS[view]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
