"""nsqbox: NSQ in a box.

A wire-compatible nsqd, nsqlookupd and nsqadmin equivalent (its ``/api`` and a terminal
UI) in one Python process, under trio's structured concurrency. docs/architecture.md lists
every package with its layer, and the module for each NSQ concept.

PYTEST_DONT_REWRITE: nsqbox ships a pytest plugin (``nsqbox.testing.plugin``) but no
assertions of its own to rewrite; this marker keeps pytest from warning that the
package was imported before its plugin was loaded (pytester's in-process runs).
"""

from __future__ import annotations

__version__ = "0.1.0"

#: The NSQ release whose protocol and HTTP surface nsqbox implements. Clients
#: and tools (go-nsq, nsqadmin) read this from IDENTIFY, /info and /stats.
NSQ_VERSION = "1.3.0"


def program_version(program: str) -> str:
    """An NSQ program's ``-version`` line, in the shape scripts parse.

    ``<program> v<semver> (built w/<one token>)``, as ``nsqd v1.3.0 (built w/go1.19.8)``;
    the token names the Python that runs it. nsqbox's own version is ``nsqbox --version``.
    """
    from platform import python_implementation, python_version

    return f"{program} v{NSQ_VERSION} (built w/{python_implementation().lower()}{python_version()})"


__all__ = ["NSQ_VERSION", "__version__", "program_version"]
