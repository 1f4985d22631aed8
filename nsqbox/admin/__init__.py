"""The admin service: nsqbox's nsqadmin, and the cluster model a UI builds on.

Modules, bottom up (the first four never import trio; they run under asyncio too):

* :mod:`~nsqbox.admin.stats` — nodes, topics, channels, clients as frozen Structs; decoding
  lookupd's and nsqd's JSON; summing per-node rows into cluster-wide ones.
* :mod:`~nsqbox.admin.clusterinfo` — :class:`ClusterInfo`, the HTTP queries (httpx, anyio).
* :mod:`~nsqbox.admin.actions` — :class:`ClusterActions`: create, pause, unpause, empty, delete,
  tombstone, fanned out to the right hosts.
* :mod:`~nsqbox.admin.model` — :class:`ClusterModel`: snapshots, history, rates (for the TUI).
* :mod:`~nsqbox.admin.routes.nsqadmin` — nsqadmin's JSON ``/api`` on nsqbox's HTTP router.
* :mod:`~nsqbox.admin.server` — ``serve_admin`` (trio) and ``nsqbox admin``.

Nothing is imported here, so importing a submodule stays as light as that submodule.
"""

from __future__ import annotations
