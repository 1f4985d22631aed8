"""httprouter's redirects: the cleaned path (:func:`clean_path`) and Go's ``http.Redirect``
answer (:func:`redirect`), for a path that matches a route only once fixed (see
:mod:`nsqbox.http.router`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from nsqbox.http.messages import Request, Response

__all__ = ["clean_path", "redirect"]


def clean_path(path: str) -> str:
    """httprouter's CleanPath: Go's ``path.Clean`` that keeps a trailing slash.

    ``//``, ``.`` and ``..`` segments go, the result starts with ``/``.
    """
    if not path:
        return "/"
    cleaned = posixpath.normpath("/" + path.lstrip("/"))
    # normpath keeps a leading "//" (POSIX allows it a meaning); Go does not.
    cleaned = "/" + cleaned.lstrip("/")
    if path.endswith("/") and cleaned != "/":
        cleaned += "/"
    return cleaned


#: Go's url.PathEscape-like escaping of a path (url.URL.EscapedPath): these stay as they are.
_PATH_SAFE = "$&+,/:;=@"


def redirect(path: str, status: int) -> Callable[[Request], Awaitable[Response]]:
    """Go's ``http.Redirect`` to ``path`` (and the request's query), as httprouter calls it."""
    # http.Redirect cleans the path it is given, keeping a trailing slash.
    escaped = clean_path(quote(path, safe=_PATH_SAFE))

    async def respond(request: Request) -> Response:
        # url.URL.String(): "?" and the raw query when the target had a "?".
        has_query = bool(request.raw_query) or request.target.endswith("?")
        location = escaped + ("?" + request.raw_query if has_query else "")
        headers: tuple[tuple[str, str], ...] = (("Location", location),)
        body = b""
        if request.method in ("GET", "HEAD"):
            headers = (("Content-Type", "text/html; charset=utf-8"), *headers)
        if request.method == "GET":
            text = _STATUS_TEXT[status]
            body = f'<a href="{_html_escape(location)}">{text}</a>.\n\n'.encode()
        return Response(status, body, headers, nsq_header=False)

    return respond


_STATUS_TEXT = {301: "Moved Permanently", 307: "Temporary Redirect"}


def _html_escape(text: str) -> str:
    # Go's htmlEscape: the five characters, with numeric references for quotes.
    import html  # on the first redirect: keeps html.entities off the start-up path

    return html.escape(text, quote=False).replace('"', "&#34;").replace("'", "&#39;")
