"""The box saving a snapshot itself (the TUI's save), and loading one that replaces a busy
box's state: time and peak memory (issue #34).

    python bench/snapshot_replace_bench.py                     # 1,000,000 messages of 100 bytes
    python bench/snapshot_replace_bench.py --messages 100000 --gzip

Starts ``nsqbox up`` (a child process, ports the OS picks, a data path of its own), publishes
``--messages`` messages to topic ``snap`` with channel ``c`` (as ``snapshot_bench.py``), then:

- ``save``: ``POST /api/snapshot?file=NAME`` on the admin service (what the TUI's ``ctrl+s``
  asks): the box cuts its nsqd and writes the file itself, timed from the request to its
  answer; the box's peak RSS during it (``VmHWM`` reset first);
- ``replace``: a second box holding as many other messages (topic ``other``, channel ``c``)
  loads the file with ``nsqbox snapshot load FILE --replace``, timed from the command's start
  to its exit; the box's peak RSS during it, and what it holds afterwards.

Figures go to stdout as JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location(
    "snapshot_bench", Path(__file__).with_name("snapshot_bench.py")
)
assert _spec is not None
assert _spec.loader is not None
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)


def _post(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=600) as r:
        doc: dict[str, Any] = json.loads(r.read() or b"{}")
        return doc


def _fill(ready: dict[str, Any], topic: str, messages: int, body_bytes: int) -> None:
    http = ready["nsqd_http_address"]
    _post(f"http://{http}/topic/create?topic={topic}")
    _post(f"http://{http}/channel/create?topic={topic}&channel=c")
    base.TOPIC = topic
    base._publish(ready["nsqd_tcp_address"], messages, body_bytes)


def _stats(ready: dict[str, Any]) -> dict[str, int]:
    url = f"http://{ready['nsqd_http_address']}/stats?format=json"
    with urllib.request.urlopen(url, timeout=60) as r:
        doc = json.loads(r.read())
    return {
        f"{t['topic_name']}:{c['channel_name']}": c["depth"]
        for t in doc["topics"]
        for c in t["channels"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--gzip", action="store_true", help="save NAME.jsonl.gz")
    args = parser.parse_args()
    mb = 1_000_000
    figures: dict[str, Any] = {"messages": args.messages, "body_bytes": args.body_bytes}
    name = "box.jsonl.gz" if args.gzip else "box.jsonl"
    with tempfile.TemporaryDirectory(prefix="nsqbox-replace-bench-") as tmp:
        root = Path(tmp)
        saves = root / "saves"
        saves.mkdir()
        snapshot = saves / name
        os.chdir(saves)  # the box saves in the working directory it starts in
        box, ready, _ = base._box(root / "a")
        try:
            _fill(ready, "snap", args.messages, args.body_bytes)
            figures["box_rss_before_save_mb"] = round(base._status(box.pid, "VmRSS") / mb, 1)
            base._reset_peak(box.pid)
            admin = ready["admin_http_address"]
            start = time.perf_counter()
            saved = _post(f"http://{admin}/api/snapshot?file={name}")
            elapsed = time.perf_counter() - start
            assert Path(saved["directory"]) / saved["file"] == snapshot, saved
            figures["save_s"] = round(elapsed, 2)
            figures["save_messages_per_s"] = round(args.messages / elapsed)
            figures["file_mb"] = round(snapshot.stat().st_size / mb, 1)
            figures["save_box_peak_rss_mb"] = round(base._status(box.pid, "VmHWM") / mb, 1)
        finally:
            base._stop(box)
        busy, ready, _ = base._box(root / "b")
        try:
            _fill(ready, "other", args.messages, args.body_bytes)
            figures["busy_rss_before_replace_mb"] = round(base._status(busy.pid, "VmRSS") / mb, 1)
            base._reset_peak(busy.pid)
            command = [
                sys.executable,
                "-m",
                "nsqbox",
                "snapshot",
                "load",
                str(snapshot),
                "--replace",
                f"--admin-http-address={ready['admin_http_address']}",
            ]
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            elapsed = time.perf_counter() - start
            figures["replace_s"] = round(elapsed, 2)
            figures["replace_messages_per_s"] = round(args.messages / elapsed)
            figures["replace_box_peak_rss_mb"] = round(base._status(busy.pid, "VmHWM") / mb, 1)
            figures["after_replace"] = _stats(ready)
        finally:
            base._stop(busy)
        os.chdir(root.parent)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
