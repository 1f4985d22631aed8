"""Who may open the web TUI (``--web``): a per-run token, its cookie, and the page's own URL.

Each tab of the web TUI is a whole TUI (it reads message bodies, deletes topics, saves files),
so the server protects itself as Jupyter does:

* **A token per run** (:func:`new_token`, ``secrets.token_urlsafe``) in the printed URL
  (``http://127.0.0.1:4172/?token=...``). Opening that URL sets a cookie holding the token
  (``HttpOnly``, ``SameSite=Strict``, named after the port: cookies ignore ports) and redirects
  to the clean URL; the page and its websocket are then answered for that browser only.
  Without a valid token (``?token=`` or the cookie) every route but the static assets answers
  403. Tokens are compared with :func:`hmac.compare_digest`.
* **A Host allowlist and the same-origin rule** on every request, from
  :mod:`nsqbox.http.local_guard` (against DNS rebinding and cross-site websockets).
* **The page's URL** is the server's own (:func:`public_url`, from the address it bound), never
  the request's ``Host``: the page's websocket points there, and a page asked by another allowed
  name is redirected there.

The rest is pure: no aiohttp here (:mod:`.web` wires it into textual-serve).
"""

from __future__ import annotations

import hmac
import secrets
import socket

from ...net.addresses import format_address
from ...net.exposure import reach

#: Where the web TUI listens unless told otherwise.
DEFAULT_WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 4172

__all__ = [
    "MAX_HEIGHT",
    "MAX_SESSIONS",
    "MAX_WIDTH",
    "clamp_size",
    "cookie_name",
    "exposure_warning",
    "is_wildcard",
    "new_token",
    "public_url",
    "token_matches",
]

#: Browser tabs (TUI subprocesses, about 50 MB each) served at once; more are refused.
MAX_SESSIONS = 8
#: The terminal size a browser may ask for, in cells (1..MAX each way).
MAX_WIDTH = 500
MAX_HEIGHT = 200


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_matches(given: str | None, token: str) -> bool:
    """Whether ``given`` (from a query or a cookie; None when absent) is ``token``,
    compared in constant time."""
    if not given or not token:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def cookie_name(port: int) -> str:
    """The cookie that carries the token for the server on ``port`` (one per port, since a
    browser sends a host's cookies to every port of it)."""
    return f"nsqbox-tui-{port}"


def is_wildcard(host: str) -> bool:
    """Whether ``host`` (as bound) means every interface."""
    return host.strip("[]") in ("", "0.0.0.0", "::")


def public_url(bound_host: str, port: int) -> str:
    """The page's URL (no path) for a server bound to ``bound_host``:``port``: that address,
    or, for a wildcard bind, this machine's hostname (a name every allowlist accepts)."""
    host = socket.gethostname().lower() if is_wildcard(bound_host) else bound_host
    return f"http://{format_address((host.strip('[]'), port))}"


def exposure_warning(bound_host: str, port: int) -> str | None:
    """The warning to print when the server listens on more than loopback, naming the
    addresses other machines reach it at (:func:`nsqbox.net.exposure.reach`; None on loopback)."""
    where = reach(bound_host.strip("[]") or "0.0.0.0", port)
    if where is None:
        return None
    return (
        f"warning: the web TUI listens on {where}: anyone who can reach it and has "
        "the URL's token can drive the TUI (and, without --read-only, change the cluster)"
    )


def clamp_size(width: int, height: int) -> tuple[int, int]:
    """A browser's terminal size, kept within 1..MAX_WIDTH columns and 1..MAX_HEIGHT rows."""
    return min(max(width, 1), MAX_WIDTH), min(max(height, 1), MAX_HEIGHT)
