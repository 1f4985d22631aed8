"""``python -m nsqbox``: the same as the ``nsqbox`` command."""

from __future__ import annotations

from nsqbox.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
