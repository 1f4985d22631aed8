"""The admin service's ``/api/snapshot``: one consistent cut of every nsqd of a box, a snapshot
saved on the box's machine, and where the box was last loaded from.

Not part of nsqadmin. In a box (``nsqbox up``) every nsqd runs on one event loop, so the box
can cut them all in one synchronous pass: nothing happens on any node between the first
node's cut and the last one's. The box's node control does it (:class:`SnapshotControl`).

=======  ===============================  ==================================================
method   route                            answer
=======  ===============================  ==================================================
POST     /api/snapshot                    ``{"cuts": [{"node", "http_address", "id", "bytes",
                                          "topics", "channels", "messages", "clock",
                                          "clock_offset", "saved_at_ns"}, ...]}`` in node
                                          order: each node's records wait in a spool in its
                                          data path, and ``nsqbox snapshot save`` fetches
                                          them (``GET /nsqbox/snapshot``)
POST     /api/snapshot?file=NAME          the box saves the cut itself, as the file ``NAME``
                                          in its directory (its working directory): ``{"file",
                                          "directory", "bytes", "nodes", "topics",
                                          "channels", "messages"}`` (the TUI's save)
GET      /api/snapshot                    ``{"loaded": {"file", "loaded_at_ns", "replace",
                                          "messages", "nodes"} or null, "directory"}``: the
                                          box's last load (``up --load``, ``--seed``,
                                          ``nsqbox snapshot load``), and where saves go
=======  ===============================  ==================================================

``NAME`` is a file name, not a path (:func:`~nsqbox.snapshot.confined.check_save_name`: ASCII
letters, digits, ``.``, ``_``, ``-``, ending in ``.jsonl`` or ``.jsonl.gz``), and the file is
new: ``400 INVALID_FILE: ...`` for another name, ``409 FILE_EXISTS`` when the directory has
one of that name (never overwritten, nor a link followed). Without a box (``nsqbox admin`` over
some cluster) every route is ``501 NOT_IMPLEMENTED``: the cuts of separate processes cannot be
made one. ``403 FORBIDDEN`` to cut or save for a user ``--admin-user`` does not list (the cut
holds every message body); off (``404``) under ``--auth-http-address``; the Host allowlist and
same-origin check of every nsqbox route (:mod:`nsqbox.http.local_guard`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ...http.messages import HTTPError, Request
from ...http.router import Router

__all__ = ["SnapshotControl", "add_snapshot_routes"]

log = logging.getLogger("nsqbox.admin")


@runtime_checkable
class SnapshotControl(Protocol):
    """A box that can cut all its nsqds at once (the box's node control)."""

    def cut_snapshot(self) -> list[dict[str, Any]]:
        """Each running nsqd's cut, in node order, made in one synchronous pass."""
        ...

    async def save_snapshot(self, name: str) -> dict[str, Any]:
        """Save one cut of every nsqd as the file ``name`` in the box's directory (see the
        module doc); SaveNameError, FileExistsError, OSError."""
        ...

    def snapshot_info(self) -> dict[str, Any]:
        """``{"loaded": the box's last load or None, "directory": where saves go}``."""
        ...


def add_snapshot_routes(
    router: Router, control: object, authorize: Callable[[Request], None]
) -> None:
    """Add ``/api/snapshot`` to the admin ``router`` (``control``: the box's, if any)."""

    def box() -> SnapshotControl:
        if not isinstance(control, SnapshotControl):
            raise HTTPError(501, "NOT_IMPLEMENTED: only a box (nsqbox up) cuts every node at once")
        return control

    async def cut(request: Request) -> dict[str, Any]:
        authorize(request)
        snapshots = box()
        names = request.args().get("file")
        if names is not None:
            return await _save(snapshots, names[0])
        try:
            cuts = snapshots.cut_snapshot()
        except OSError as exc:
            raise HTTPError(500, f"SNAPSHOT_FAILED: {exc}") from None
        log.info("snapshot: cut %d nsqds", len(cuts))
        return {"cuts": cuts}

    async def info(request: Request) -> dict[str, Any]:
        return box().snapshot_info()

    router.add("POST", "/api/snapshot", cut, nsqbox_only=True)
    router.add("GET", "/api/snapshot", info, nsqbox_only=True, log=False)


async def _save(control: SnapshotControl, name: str) -> dict[str, Any]:
    from ...snapshot.confined import SaveNameError  # on first use: not while the box starts

    try:
        saved = await control.save_snapshot(name)
    except SaveNameError as exc:
        raise HTTPError(400, f"INVALID_FILE: {exc}") from None
    except FileExistsError:
        raise HTTPError(409, "FILE_EXISTS") from None
    except OSError as exc:
        raise HTTPError(500, f"SNAPSHOT_FAILED: {exc}") from None
    log.info(
        "snapshot: saved %d messages of %d nsqds to %s in %s",
        saved["messages"],
        saved["nodes"],
        saved["file"],
        saved["directory"],
    )
    return saved
