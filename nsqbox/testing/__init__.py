"""Real nsqbox servers for test suites: the pytest plugin, its handles and helpers.

Names load on first use, so importing this package (which pytest does to load the
plugin) costs almost nothing. See docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .boxes import NoProcBox, ThreadBox
    from .config import Address, BoxAddresses, BoxConfig, Cleanup, ClusterSpec, Mode
    from .handle import NSQBox, NSQBoxFactory
    from .state import BoxStats, CapturedMessage, ChannelState, TopicState, WaitTimeout
    from .subprocess_box import SubprocessBox
    from .tap import Capture
    from .thread import ThreadedNSQD
    from .trio_box import TrioBoxFactory, TrioNSQBox

_EXPORTS = {
    "Address": "config",
    "BoxAddresses": "config",
    "BoxConfig": "config",
    "BoxStats": "state",
    "Capture": "tap",
    "CapturedMessage": "state",
    "ChannelState": "state",
    "Cleanup": "config",
    "ClusterSpec": "config",
    "Mode": "config",
    "NSQBox": "handle",
    "NSQBoxFactory": "handle",
    "NoProcBox": "boxes",
    "SubprocessBox": "subprocess_box",
    "ThreadBox": "boxes",
    "ThreadedNSQD": "thread",
    "TopicState": "state",
    "TrioBoxFactory": "trio_box",
    "TrioNSQBox": "trio_box",
    "WaitTimeout": "state",
}

__all__ = [
    "Address",
    "BoxAddresses",
    "BoxConfig",
    "BoxStats",
    "Capture",
    "CapturedMessage",
    "ChannelState",
    "Cleanup",
    "ClusterSpec",
    "Mode",
    "NSQBox",
    "NSQBoxFactory",
    "NoProcBox",
    "SubprocessBox",
    "ThreadBox",
    "ThreadedNSQD",
    "TopicState",
    "TrioBoxFactory",
    "TrioNSQBox",
    "WaitTimeout",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
