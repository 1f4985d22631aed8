"""nsqbox: NSQ in a box.

A wire-compatible nsqd (and, as it grows, nsqlookupd and an nsqadmin
equivalent) in one Python process, under trio's structured concurrency.

PYTEST_DONT_REWRITE: nsqbox ships a pytest plugin (``nsqbox.testing.plugin``) but no
assertions of its own to rewrite; this marker keeps pytest from warning that the
package was imported before its plugin was loaded (pytester's in-process runs).
"""

from __future__ import annotations

__version__ = "0.1.0"

#: The NSQ release whose protocol and HTTP surface nsqbox implements. Clients
#: and tools (go-nsq, nsqadmin) read this from IDENTIFY, /info and /stats.
NSQ_VERSION = "1.3.0"

__all__ = ["NSQ_VERSION", "__version__"]
