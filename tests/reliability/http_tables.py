"""What nsqd's and nsqlookupd's HTTP APIs may answer, route by route (v1.3.0's http.go).

Each route maps to the set of ``(status, message)`` it can send; ``message`` is
the ``{"message": ...}`` of an error, or None for a success. Conventions every
route shares (404, 405, trailing-slash redirects, OPTIONS, 413 for a body over
the server's limit) are applied by :func:`allowed`.
"""

from __future__ import annotations

from typing import Final

from nsqbox.http.router import clean_path

Answer = tuple[int, str | None]

_OK: Final[Answer] = (200, None)
_BAD_QUERY: Final[Answer] = (400, "INVALID_REQUEST")
_NO_TOPIC: Final[Answer] = (400, "MISSING_ARG_TOPIC")
_TOPIC_404: Final[Answer] = (404, "TOPIC_NOT_FOUND")
_BODY_TOO_BIG: Final[Answer] = (413, "BODY_TOO_BIG")
_CHANNEL_ARGS: Final[frozenset[Answer]] = frozenset(
    {
        _OK,
        _BAD_QUERY,
        _NO_TOPIC,
        (400, "INVALID_ARG_TOPIC"),
        (400, "MISSING_ARG_CHANNEL"),
        (400, "INVALID_ARG_CHANNEL"),
        _TOPIC_404,
    }
)

_FAULT_ADD: Final[frozenset[Answer]] = frozenset(
    {
        _OK,
        (400, "INVALID_TOPIC"),
        (400, "INVALID_COUNT"),
        (400, "INVALID_DURATION"),
        (400, "INVALID_ERROR"),
        (409, "TOO_MANY_FAULTS"),
    }
)

_WRITE_FAULT_ADD: Final[frozenset[Answer]] = frozenset(
    {
        _OK,
        (400, "INVALID_TOPIC"),
        (400, "INVALID_CHANNEL"),
        (400, "INVALID_USER_AGENT"),
        (400, "INVALID_CLIENT_ID"),
        (400, "INVALID_COUNT"),
        (400, "INVALID_DURATION"),
        (409, "TOO_MANY_FAULTS"),
    }
)

#: What the journal's lists of a channel's messages answer (troubles, given up).
_JOURNAL_LIST: Final[frozenset[Answer]] = frozenset(
    {
        _OK,
        _BAD_QUERY,
        _NO_TOPIC,
        (400, "MISSING_ARG_CHANNEL"),
        (400, "INVALID_TOPIC"),
        (400, "INVALID_CHANNEL"),
        (400, "INVALID_BODY_BYTES"),
        (400, "INVALID_LIMIT"),
    }
)

NSQD_ROUTES: Final[dict[tuple[str, str], frozenset[Answer]]] = {
    ("GET", "/ping"): frozenset({_OK}),
    ("GET", "/info"): frozenset({_OK}),
    ("GET", "/debug"): frozenset({_OK}),
    ("GET", "/stats"): frozenset({_OK, _BAD_QUERY}),
    ("POST", "/pub"): frozenset(
        {
            _OK,
            _BAD_QUERY,
            _NO_TOPIC,
            (400, "INVALID_TOPIC"),
            (400, "MSG_EMPTY"),
            (400, "INVALID_DEFER"),
            (413, "MSG_TOO_BIG"),
        }
    ),
    ("POST", "/mpub"): frozenset(
        {
            _OK,
            _BAD_QUERY,
            _NO_TOPIC,
            (400, "INVALID_TOPIC"),
            (413, "MSG_TOO_BIG"),
            (413, "BODY_TOO_BIG"),
            (413, "BAD_BODY"),
            (413, "BAD_MESSAGE"),
        }
    ),
    ("POST", "/topic/create"): frozenset({_OK, _BAD_QUERY, _NO_TOPIC, (400, "INVALID_TOPIC")}),
    ("POST", "/topic/delete"): frozenset({_OK, _BAD_QUERY, _NO_TOPIC, _TOPIC_404}),
    ("POST", "/topic/empty"): frozenset(
        {_OK, _BAD_QUERY, _NO_TOPIC, (400, "INVALID_TOPIC"), _TOPIC_404}
    ),
    ("POST", "/topic/pause"): frozenset({_OK, _BAD_QUERY, _NO_TOPIC, _TOPIC_404}),
    ("POST", "/topic/unpause"): frozenset({_OK, _BAD_QUERY, _NO_TOPIC, _TOPIC_404}),
    ("POST", "/channel/create"): _CHANNEL_ARGS,
    ("POST", "/channel/delete"): _CHANNEL_ARGS | {(404, "CHANNEL_NOT_FOUND")},
    ("POST", "/channel/empty"): _CHANNEL_ARGS | {(404, "CHANNEL_NOT_FOUND")},
    ("POST", "/channel/pause"): _CHANNEL_ARGS | {(404, "CHANNEL_NOT_FOUND")},
    ("POST", "/channel/unpause"): _CHANNEL_ARGS | {(404, "CHANNEL_NOT_FOUND")},
    ("GET", "/config/:opt"): frozenset({_OK, (400, "INVALID_OPTION")}),
    ("PUT", "/config/:opt"): frozenset(
        {_OK, (400, "INVALID_OPTION"), (400, "INVALID_VALUE"), (413, "INVALID_VALUE")}
    ),
    # nsqbox's own: list what a topic or channel holds (nsqbox/nsqd/routes/peek.py)
    ("GET", "/nsqbox/peek"): frozenset(
        {
            _OK,
            _BAD_QUERY,
            _NO_TOPIC,
            (400, "INVALID_TOPIC"),
            (400, "INVALID_CHANNEL"),
            (400, "INVALID_LIMIT"),
            (400, "INVALID_BODY_BYTES"),
            (400, "INVALID_CURSOR"),
            _TOPIC_404,
            (404, "CHANNEL_NOT_FOUND"),
        }
    ),
    # nsqbox's own: what happened to each message (nsqbox/nsqd/routes/journal.py)
    ("GET", "/nsqbox/journal"): frozenset(
        {
            _OK,
            _BAD_QUERY,
            (400, "INVALID_ID"),
            (400, "INVALID_TOPIC"),
            (400, "INVALID_CHANNEL"),
            (400, "INVALID_KIND"),
            (400, "INVALID_CLIENT"),
            (400, "INVALID_SINCE"),
            (400, "INVALID_UNTIL"),
            (400, "INVALID_AFTER"),
            (400, "INVALID_LIMIT"),
        }
    ),
    ("GET", "/nsqbox/journal/troubles"): _JOURNAL_LIST
    | {(400, "INVALID_REQUEUES"), (400, "INVALID_HELD_MS"), (400, "INVALID_TIMED_OUT")},
    ("GET", "/nsqbox/journal/given_up"): _JOURNAL_LIST | {(400, "INVALID_ATTEMPTS")},
    # nsqbox's own: faults on demand (nsqbox/nsqd/routes/faults.py); not fuzzed (FUZZED_NSQD_ROUTES)
    ("GET", "/nsqbox/faults"): frozenset({_OK}),
    ("DELETE", "/nsqbox/faults"): frozenset({_OK}),
    ("POST", "/nsqbox/faults/fail_publishes"): _FAULT_ADD,
    ("POST", "/nsqbox/faults/disk_full"): _FAULT_ADD,
    ("POST", "/nsqbox/faults/latency"): _WRITE_FAULT_ADD
    | {(400, "MISSING_ARG_DELAY"), (400, "INVALID_DELAY"), (400, "INVALID_JITTER")},
    ("POST", "/nsqbox/faults/stall"): _WRITE_FAULT_ADD,
    ("POST", "/nsqbox/faults/time_out_in_flight"): frozenset(
        {_OK, (400, "INVALID_TOPIC"), (400, "INVALID_CHANNEL")}
    ),
    ("POST", "/nsqbox/faults/drop_connections"): frozenset(
        {_OK, (400, "INVALID_TOPIC"), (400, "INVALID_CHANNEL"), (400, "INVALID_RESET")}
    ),
    ("DELETE", "/nsqbox/faults/:id"): frozenset({_OK, (400, "INVALID_ID")}),
}
# nsqbox keeps nsqd 0.x's /put as an alias of /pub.
NSQD_ROUTES["POST", "/put"] = NSQD_ROUTES["POST", "/pub"]
#: What the fuzzer sends requests to: not the fault routes, which fail the canary's
#: publishes and drop its connections by design.
FUZZED_NSQD_ROUTES: Final[dict[tuple[str, str], frozenset[Answer]]] = {
    key: answers for key, answers in NSQD_ROUTES.items() if not key[1].startswith("/nsqbox/faults")
}

_LOOKUPD_MUTATING: Final[dict[str, frozenset[Answer]]] = {
    "/topic/create": frozenset({_OK, _BAD_QUERY, _NO_TOPIC, (400, "INVALID_ARG_TOPIC")}),
    "/topic/delete": frozenset({_OK, _BAD_QUERY, _NO_TOPIC}),
    "/channel/create": _CHANNEL_ARGS - {_TOPIC_404},
    "/channel/delete": (_CHANNEL_ARGS - {_TOPIC_404}) | {(404, "CHANNEL_NOT_FOUND")},
    "/topic/tombstone": frozenset({_OK, _BAD_QUERY, _NO_TOPIC, (400, "MISSING_ARG_NODE")}),
}

LOOKUPD_ROUTES: Final[dict[tuple[str, str], frozenset[Answer]]] = {
    ("GET", "/ping"): frozenset({_OK}),
    ("GET", "/info"): frozenset({_OK}),
    ("GET", "/debug"): frozenset({_OK}),
    ("GET", "/topics"): frozenset({_OK}),
    ("GET", "/nodes"): frozenset({_OK}),
    ("GET", "/lookup"): frozenset({_OK, _BAD_QUERY, _NO_TOPIC, _TOPIC_404}),
    ("GET", "/channels"): frozenset({_OK, _BAD_QUERY, _NO_TOPIC}),
    # POST only, as v1.3.0
    **{("POST", path): answers for path, answers in _LOOKUPD_MUTATING.items()},
    # nsqbox's own: faults on demand (nsqbox/lookupd/routes/faults.py); not fuzzed
    ("GET", "/nsqbox/faults"): frozenset({_OK}),
    ("DELETE", "/nsqbox/faults"): frozenset({_OK}),
    ("POST", "/nsqbox/faults/hide_producers"): frozenset(
        {_OK, (400, "INVALID_TOPIC"), (400, "INVALID_DURATION"), (409, "TOO_MANY_FAULTS")}
    ),
    ("POST", "/nsqbox/faults/lookupd_down"): frozenset(
        {_OK, (400, "INVALID_DURATION"), (409, "TOO_MANY_FAULTS")}
    ),
    ("DELETE", "/nsqbox/faults/:id"): frozenset({_OK, (400, "INVALID_ID")}),
}
#: What the fuzzer sends requests to: not the fault routes (lookupd_down silences it).
FUZZED_LOOKUPD_ROUTES: Final[dict[tuple[str, str], frozenset[Answer]]] = {
    key: answers for key, answers in LOOKUPD_ROUTES.items() if not key[1].startswith("/nsqbox/")
}


def _match(pattern: str, path: str) -> bool:
    want = pattern.split("/")
    got = path.split("/")
    if len(want) != len(got):
        return False
    return all(w == g or (w.startswith(":") and g) for w, g in zip(want, got, strict=True))


def methods_for(routes: dict[tuple[str, str], frozenset[Answer]], path: str) -> set[str]:
    """The methods ``path`` has routes for."""
    return {m for (m, p) in routes if _match(p, path)}


#: A route's own body limit and its answer to a body over it.
Limits = dict[tuple[str, str], tuple[int, Answer]]


def allowed(
    routes: dict[tuple[str, str], frozenset[Answer]],
    method: str,
    path: str,
    body_size: int,
    limits: Limits,
    default_limit: int,
) -> frozenset[Answer]:
    """Every answer the server may give to ``method path`` with a body of ``body_size`` bytes.

    Routes in ``limits`` have their own body limit and answer; the others refuse
    a body over ``default_limit`` with 413 BODY_TOO_BIG, and unknown routes one
    over 256 KiB.
    """
    methods = methods_for(routes, path)
    if method in methods:
        pattern = next(p for (m, p) in routes if m == method and _match(p, path))
        limit, too_large = limits.get((method, pattern), (default_limit, _BODY_TOO_BIG))
        if body_size > limit:
            return frozenset({too_large})
        return routes[method, pattern]
    if path != "/" and _redirects(routes, method, path):
        return frozenset({(301 if method == "GET" else 307, None)})
    if methods:
        if method == "OPTIONS":
            return frozenset({_OK})
        return _refused(405, "METHOD_NOT_ALLOWED", body_size)
    return _refused(404, "NOT_FOUND", body_size)


def _redirects(routes: dict[tuple[str, str], frozenset[Answer]], method: str, path: str) -> bool:
    """httprouter's redirects: a trailing slash off or on, or the path cleaned and case-folded."""
    other = path[:-1] if path.endswith("/") else path + "/"
    if method in methods_for(routes, other):
        return True
    cleaned = clean_path(path)
    toggled = cleaned[:-1] if cleaned.endswith("/") else cleaned + "/"
    for candidate in (cleaned, toggled):
        folded = candidate.lower()
        for m, pattern in routes:
            if m == method and _match(pattern.lower(), folded) and candidate != path:
                return True
    return False


def _refused(status: int, message: str, body_size: int) -> frozenset[Answer]:
    if body_size > 256 * 1024:
        return frozenset({(status, message), _BODY_TOO_BIG})
    return frozenset({(status, message)})
