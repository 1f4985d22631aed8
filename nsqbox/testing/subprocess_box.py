"""Subprocess mode: the servers in a child process, for full isolation.

The child is ``python -m nsqbox up --ready-json --ephemeral-ports``: one nsqlookupd and
``--nsqd-count`` nsqds (every one registered with the lookupd) on ports the OS picks,
which it prints as one JSON line once everything listens. Start-up ends when the
lookupd lists every nsqd. A box with one nsqd can stop it (SIGTERM), crash it
(SIGKILL) and start it again: the whole process goes, and comes back on the ports
it bound first, with the same data path.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, Any

import nsqbox

from ..wire.documents import NodesDocument
from .config import (
    Address,
    AddressView,
    BoxAddresses,
    BoxStartError,
    Cleanup,
    ClusterSpec,
    Mode,
    SpecError,
)
from .remote import RemoteOps, http_document
from .state import BoxStats, CaptureSource

__all__ = ["SubprocessBox", "option_flags"]

#: Why subprocess mode cannot stop one node of several.
ONE_PROCESS = (
    "nsqbox: subprocess mode runs every node in one 'nsqbox up' process, so one nsqd of "
    "several cannot be stopped alone; use thread mode (nsqbox_factory(mode='thread')) or "
    "a box with one nsqd for restarts"
)


def option_flags(options: Mapping[str, Any]) -> list[str]:
    """NSQDOptions field values as the nsqd flags that set them (``msg_timeout=1.5`` ->
    ``--msg-timeout=1.5s``)."""
    from ..go.syntax import format_duration
    from ..nsqd.config import NSQD_OPTION_FLAGS, TLS_REQUIRED_KIND, Kind

    by_attr = {flag.attr: flag for flag in NSQD_OPTION_FLAGS}
    out: list[str] = []
    for key, value in options.items():
        flag = by_attr.get(key)
        if flag is None:
            raise SpecError(
                f"unknown nsqd option {key!r} (see nsqbox.nsqd.domain.options.NSQDOptions)"
            )
        values = value if flag.kind in (Kind.STRING_ARRAY, Kind.FLOAT_ARRAY) else [value]
        for item in values:
            if flag.kind is Kind.DURATION:
                text = format_duration(float(item))
            elif flag.kind is Kind.BOOL:
                text = "true" if item else "false"
            elif flag.kind is TLS_REQUIRED_KIND:
                text = {0: "false", 1: "tcp-https", 2: "true"}.get(item, str(item))
            else:
                text = str(item)
            out.append(f"--{flag.flag}={text}")
    return out


class _Child:
    """One server process; its output is drained by threads into a short tail."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.argv = argv
        # The start and the end of the output: an error (or a usage text) is near one of them.
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=60)
        self.lines = 0
        self.found: dict[str, str] = {}
        self.changed = threading.Condition()
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            errors="replace",
        )
        assert self.popen.stdout is not None
        assert self.popen.stderr is not None
        self._readers = [
            threading.Thread(target=self._drain, args=(stream,), daemon=True)
            for stream in (self.popen.stdout, self.popen.stderr)
        ]
        for reader in self._readers:
            reader.start()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            with self.changed:
                self.lines += 1
                if len(self.head) < 20:
                    self.head.append(line)
                else:
                    self.tail.append(line)
                if line.startswith("{") and "json" not in self.found:
                    self.found["json"] = line
                self.changed.notify_all()
        with self.changed:
            self.found.setdefault("eof", "")
            self.changed.notify_all()

    def wait_for(self, keys: tuple[str, ...], deadline: float) -> dict[str, str]:
        """Wait until the output showed every key; BoxStartError with the output otherwise."""
        with self.changed:
            while not all(k in self.found for k in keys):
                remaining = deadline - time.monotonic()
                if "eof" in self.found or remaining <= 0:
                    why = "exited" if "eof" in self.found else "did not report its addresses"
                    raise BoxStartError(self.failure(why))
                self.changed.wait(remaining)
            return dict(self.found)

    def failure(self, why: str) -> str:
        """An error message with the command line and the output's tail."""
        skipped = self.lines - len(self.head) - len(self.tail)
        lines = [*self.head, *([f"... ({skipped} lines)"] if skipped else []), *self.tail]
        output = "\n".join(f"    {line}" for line in lines) or "    (no output)"
        return f"nsqbox subprocess {self.name} {why}: {' '.join(self.argv)}\n{output}"

    def stop(self, timeout: float = 10.0, *, kill: bool = False) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` (at once with ``kill``)."""
        if self.popen.poll() is None:
            if kill:
                self.popen.kill()
            else:
                self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        for reader in self._readers:
            reader.join(timeout)
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()


class SubprocessBox(AddressView):
    """nsqd(s) and an nsqlookupd in a child process (``python -m nsqbox up``)."""

    mode = Mode.SUBPROCESS

    def __init__(
        self,
        spec: ClusterSpec,
        data_root: str,
        *,
        python: str,
        start_timeout: float = 10.0,
        timeout: float = 10.0,
    ) -> None:
        """Start the process; the servers listen and are registered when this returns.

        ``nsqbox up`` runs exactly one nsqlookupd and takes no nsqlookupd flags, so
        ``spec.lookupd`` must be 0 or 1 and ``spec.lookupd_args`` empty (with 0, the
        box's lookupd still runs but the handle does not show it).
        """
        if spec.lookupd > 1 or spec.lookupd_args:
            raise SpecError(
                "subprocess mode runs 'nsqbox up', which has one nsqlookupd and takes no "
                "nsqlookupd flags; use thread mode for lookupd > 1 or lookupd_args"
            )
        self.spec = spec
        self._env = dict(os.environ)
        # The child runs this very nsqbox, installed or not.
        source = str(Path(nsqbox.__file__).resolve().parent.parent)
        self._env["PYTHONPATH"] = os.pathsep.join(
            p for p in (source, self._env.get("PYTHONPATH")) if p
        )
        self._argv = [python, "-m", "nsqbox", "up", "--ready-json"]
        self._argv += [f"--data-path={data_root}", f"--nsqd-count={spec.nsqd}"]
        self._argv += [*spec.nsqd_args, *option_flags(spec.nsqd_options)]
        if spec.clock != "real":
            self._argv.append(f"--clock={spec.clock}")
        self._start_timeout = start_timeout
        self._timeout = timeout
        #: What the first start bound: a restart binds the same (``nsqbox up`` flags).
        self._bound: list[str] = []
        self._down = False
        self._spawn(["--ephemeral-ports"])

    def _spawn(self, flags: list[str]) -> None:
        """Start ``nsqbox up``; its servers listen and are registered when this returns."""
        deadline = time.monotonic() + self._start_timeout
        self._child = _Child("nsqbox up", [*self._argv, *flags], self._env)
        spec = self.spec
        try:
            ready = json.loads(self._child.wait_for(("json",), deadline)["json"])
            lookupd = spec.lookupd > 0
            self.addresses = BoxAddresses(
                nsqd_tcp=tuple(Address(a) for a in ready["nsqd_tcp_addresses"]),
                nsqd_http=tuple(Address(a) for a in ready["nsqd_http_addresses"]),
                lookupd_tcp=(Address(ready["lookupd_tcp_address"]),) if lookupd else (),
                lookupd_http=(Address(ready["lookupd_http_address"]),) if lookupd else (),
            )
            self.ops = RemoteOps(self.addresses, self._timeout)
            self._wait_registered(deadline)
        except BaseException:
            self.stop()
            raise
        self._down = False
        if not self._bound:
            self._bound = [
                f"--tcp-address={ready['nsqd_tcp_address']}",
                f"--http-address={ready['nsqd_http_address'] or ''}",
                f"--nsqlookupd-tcp-address={ready['lookupd_tcp_address']}",
                f"--nsqlookupd-http-address={ready['lookupd_http_address']}",
                f"--nsqadmin-http-address={ready['admin_http_address']}",
            ]

    def _wait_registered(self, deadline: float) -> None:
        """Wait until the lookupd lists every nsqd."""
        ports = {a.port for a in self.addresses.nsqd_tcp}
        delay = 0.001
        for lookupd in self.addresses.lookupd_http:
            while True:
                nodes = http_document(lookupd, "/nodes", NodesDocument).producers or []
                if ports <= {n.tcp_port for n in nodes}:
                    break
                if time.monotonic() > deadline:
                    raise BoxStartError(self._child.failure("did not register its nsqds"))
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    # -- the Box operations ----------------------------------------------------------
    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel, from ``/stats``."""
        return self.ops.stats(node)

    def publish(self, topic: str, bodies: list[bytes], defer_ms: int = 0, node: int = 0) -> None:
        """Publish over HTTP; return once nsqlookupd lists the node for the topic (as
        in thread mode, a consumer that discovers through nsqlookupd finds it at once)."""
        from .discovery import lookup_producers

        self.ops.publish(topic, bodies, defer_ms, node)
        port = self.addresses.nsqd_tcp[node].port
        deadline = time.monotonic() + self.ops.timeout
        delay = 0.0005
        for lookupd in self.addresses.lookupd_http:
            while port not in {a.port for a in lookup_producers(lookupd, topic)}:
                if time.monotonic() > deadline:
                    break  # the handle's waits will say what is missing
                time.sleep(delay)
                delay = min(delay * 2, 0.02)

    def open_capture(self, topic: str, timeout: float, mode: str = "tap") -> CaptureSource:
        """Tap the topic through nsqd's ``/nsqbox/tap`` route (or subscribe a channel)."""
        return self.ops.open_capture(topic, timeout, mode)

    def begin_test(self) -> object:
        """Nothing to note: everything on this box belongs to the tests."""
        return None

    def end_test(
        self, mark: object, cleanup: Cleanup, owned: Collection[str], namespace: str
    ) -> None:
        """Start the process again if a test stopped it; delete or empty every topic;
        forget them in nsqlookupd."""
        if self._down:
            self._spawn(self._bound)
        self.ops.reset(cleanup)

    def stop(self) -> None:
        """Terminate the process (SIGTERM: the servers shut down cleanly)."""
        self._child.stop()

    def _one_node(self, node: int) -> None:
        if self.spec.nsqd != 1:
            raise NotImplementedError(ONE_PROCESS)
        if node != 0:
            raise IndexError(f"nsqd {node}: this box has one nsqd (node 0)")

    def stop_nsqd(self, node: int) -> None:
        """Stop the ``nsqbox up`` process with SIGTERM (a clean shutdown of every server
        in it); NotImplementedError unless the box has one nsqd."""
        self._one_node(node)
        self._child.stop()
        self._down = True

    def crash_nsqd(self, node: int) -> None:
        """Kill the ``nsqbox up`` process (SIGKILL: nothing is flushed); NotImplementedError
        unless the box has one nsqd."""
        self._one_node(node)
        self._child.stop(kill=True)
        self._down = True

    def start_nsqd(self, node: int) -> None:
        """Start the process again (same ports, same data path) if it was stopped."""
        self._one_node(node)
        if self._down:
            self._spawn(self._bound)

    def __repr__(self) -> str:
        addresses = getattr(self, "addresses", None)
        return f"SubprocessBox(nsqd={list(addresses.nsqd_tcp) if addresses else []})"
