"""Fixtures for the plugin's own tests.

Most tests drive the plugin the way a user's suite would: a generated test module run
by pytester (in this process, so it is fast), with the plugin loaded by its entry point
or, until that is registered, by ``-p nsqbox.testing.plugin``. The others use the boxes
and handles directly.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

# The server stack, imported once here: pytester's in-process runs drop the modules a
# run imported, so without this every generated session would import it again.
import nsqbox.testing.boxes
import nsqbox.testing.cluster
import nsqbox.testing.server_ops  # noqa: F401
from nsqbox.testing import Address, BoxAddresses
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.handle import NSQBox
from nsqbox.testing.subprocess_box import SubprocessBox
from tests.helpers import real_nsqd as real_nsqd_process

#: A user's project that test_user_project.py copies and runs; not this suite's tests.
collect_ignore = ["user_project"]

#: Upper bound for waits in these tests (only reached when something is broken).
TIMEOUT = 10.0


def _entry_point_registered() -> bool:
    eps = importlib.metadata.entry_points(group="pytest11")
    return any(ep.value == "nsqbox.testing.plugin" for ep in eps)


#: What loads the plugin in a generated session (nothing once the entry point exists).
PLUGIN_ARGS: tuple[str, ...] = () if _entry_point_registered() else ("-p", "nsqbox.testing.plugin")

#: The generated sessions' configuration: like this project's (trio mode, warnings are errors).
INI = """\
[pytest]
trio_mode = true
addopts = -p no:cacheprovider
filterwarnings =
    error
{extra}
"""


def run_generated(pytester: pytest.Pytester, *args: str, ini: str = "") -> pytest.RunResult:
    """Run the generated modules in ``pytester``'s directory with the plugin loaded."""
    pytester.makeini(INI.format(extra=ini))
    return pytester.runpytest(*PLUGIN_ARGS, *args)


def box_in_mode(mode: str, spec: ClusterSpec, root: str) -> ThreadBox | SubprocessBox:
    """A box of ``spec`` in this process (``"thread"``) or in an ``nsqbox up`` child
    (``"subprocess"``), for the tests that run in both modes."""
    if mode == "thread":
        return ThreadBox(spec, root)
    return SubprocessBox(spec, root, python=sys.executable, start_timeout=30)


@pytest.fixture(scope="module")
def thread_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadBox]:
    """A box (nsqd + nsqlookupd) in a thread, shared by a module's direct tests."""
    box = ThreadBox(ClusterSpec(), str(tmp_path_factory.mktemp("thread-box")))
    yield box
    box.stop()


@pytest.fixture
def handle(thread_box: ThreadBox) -> Iterator[NSQBox]:
    """A handle on ``thread_box``, cleaned up after the test."""
    with NSQBox(thread_box, timeout=TIMEOUT) as h:
        yield h


@pytest.fixture
def real_nsqd(tmp_path: Path) -> Iterator[BoxAddresses]:
    """A real nsqd on 127.0.0.1, as a noproc box's addresses (skipped without one)."""
    with real_nsqd_process(tmp_path) as (tcp, web):
        yield BoxAddresses(nsqd_tcp=(Address(tcp),), nsqd_http=(Address(web),))


@pytest.fixture
def gevent_hub() -> Iterator[Any]:
    """gevent, with a fresh hub in this thread destroyed afterwards (no monkey patching)."""
    gevent = pytest.importorskip("gevent")
    pytest.importorskip("gnsq")
    yield gevent
    gevent.get_hub().destroy(destroy_loop=True)


@pytest.fixture
def docs_path() -> Path:
    """docs/testing.md."""
    return Path(__file__).resolve().parents[2] / "docs" / "testing.md"


@pytest.fixture(scope="session")
def subprocess_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubprocessBox]:
    """One ``nsqbox up`` child process for the modules that test subprocess mode."""
    box = SubprocessBox(
        ClusterSpec(nsqd=2, nsqd_options={"msg_timeout": 30.0}),
        str(tmp_path_factory.mktemp("subprocess-box")),
        python=sys.executable,
        start_timeout=30,
    )
    yield box
    box.stop()


@pytest.fixture
def remote(subprocess_box: SubprocessBox) -> Iterator[NSQBox]:
    with NSQBox(subprocess_box, timeout=TIMEOUT) as handle:
        yield handle


@pytest.fixture
def not_nsqbox() -> Iterator[Address]:
    """An HTTP server that answers 404 to every request, as real nsqd does to /nsqbox/..."""

    class NotFound(BaseHTTPRequestHandler):
        def _not_found(self) -> None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"404 page not found\n")

        do_GET = do_POST = do_DELETE = _not_found

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Address.of("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)
