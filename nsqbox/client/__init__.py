"""nsqbox.client: NSQ clients that follow the client-library guide.

On trio: :func:`open_producer` (PUB, MPUB, DPUB over pooled connections) and
:func:`open_consumer` (discovery, RDY management, backoff, message handling).
Without trio: :mod:`nsqbox.client.blocking`, for scripts and Spark executors.

Names load on first use, so ``import nsqbox.client.blocking`` does not import
trio or httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..wire.errors import NSQError
    from .config import Config
    from .consumer import Consumer, ConsumerStats, open_consumer
    from .errors import ClientError, ConnectionClosed, HandshakeError
    from .handling import Handler
    from .message import Message
    from .producer import Producer, open_producer

_EXPORTS = {
    "ClientError": ".errors",
    "Config": ".config",
    "ConnectionClosed": ".errors",
    "Consumer": ".consumer",
    "ConsumerStats": ".consumer",
    "Handler": ".handling",
    "HandshakeError": ".errors",
    "Message": ".message",
    "NSQError": "..wire.errors",
    "Producer": ".producer",
    "open_consumer": ".consumer",
    "open_producer": ".producer",
}

__all__ = [
    "ClientError",
    "Config",
    "ConnectionClosed",
    "Consumer",
    "ConsumerStats",
    "Handler",
    "HandshakeError",
    "Message",
    "NSQError",
    "Producer",
    "open_consumer",
    "open_producer",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
