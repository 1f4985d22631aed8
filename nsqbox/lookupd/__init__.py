"""nsqlookupd: the discovery service (registration DB, TCP protocol V1, HTTP API).

Layers, bottom up: :mod:`.registration_db` (pure data), :mod:`.core` (the
operations, with an injected clock), :mod:`.protocol_v1` and :mod:`.http_api`
(the faces), :mod:`.server` (:func:`serve_lookupd` and the ``nsqbox lookupd``
command line). The byte codec is :mod:`nsqbox.wire.lookupd`.
"""

from __future__ import annotations

from .core import NSQLookupd
from .options import LookupdOptions
from .registration_db import RegistrationDB

__all__ = ["LookupdOptions", "NSQLookupd", "RegistrationDB"]
