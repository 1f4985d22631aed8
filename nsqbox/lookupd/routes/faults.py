"""nsqbox's fault routes on nsqlookupd: faults on demand over its HTTP API (issue #18).

Not part of NSQ (real nsqlookupd answers ``404``): they let a test in any
language, or the pytest plugin's ``nsqbox.faults``, make this nsqlookupd
misbehave through its :class:`~.faults.LookupdFaults`. They mirror nsqd's
(:mod:`nsqbox.nsqd.routes.faults`): JSON answers, the same fault documents, bad
parameters get ``400 {"message": "INVALID_..."}``, a fault past the 64 in force
``409 TOO_MANY_FAULTS``. They keep answering while
the fault ``lookupd_down`` silences the rest of the API.

- ``GET /nsqbox/faults``: ``{"faults": [...]}``, the faults in force, oldest first.
- ``POST /nsqbox/faults/hide_producers?topic=&duration=``: ``/lookup`` lists no
  producers for ``topic`` (every topic without one); the new fault's document.
- ``POST /nsqbox/faults/lookupd_down?duration=``: the HTTP API stops answering;
  the new fault's document.
- ``DELETE /nsqbox/faults/:id``: ``{"lifted": true|false}``; ``DELETE
  /nsqbox/faults``: ``{"lifted": N}``.
"""

from __future__ import annotations

from ...http import Request, Router
from ...http.faults import (
    FAULTS_PATH,
    add_listing_routes,
    adding,
    seconds_arg,
    topic_arg,
)
from ..faults import LookupdFaults

__all__ = ["add_fault_routes"]

Doc = dict[str, object]


def add_fault_routes(router: Router, faults: LookupdFaults) -> None:
    """Add the ``/nsqbox/faults`` routes for an nsqlookupd's ``faults`` to its router."""

    async def hide_producers(request: Request) -> Doc:
        topic, duration = topic_arg(request), seconds_arg(request)
        return faults.hide_producers(topic, duration=duration).describe()

    async def lookupd_down(request: Request) -> Doc:
        return faults.lookupd_down(duration=seconds_arg(request)).describe()

    add_listing_routes(router, faults)
    router.add("POST", f"{FAULTS_PATH}/hide_producers", adding(hide_producers))
    router.add("POST", f"{FAULTS_PATH}/lookupd_down", adding(lookupd_down))
