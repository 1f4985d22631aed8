"""Decoding JSON that a peer sent: the one door every peer document comes through.

nsqd, nsqlookupd, the admin service and the clients read JSON from the other
side of a socket: IDENTIFY bodies, auth-server and lookupd replies, HTTP request
bodies, ``/stats`` documents. :func:`decode_peer_json` reads all of them, so
that every way a document can be wrong (too large, not JSON, invalid UTF-8,
nested too deep, the wrong shape) comes out as one exception,
:class:`PeerJSONError`, which each protocol turns into its own bad-body error.
Nothing else escapes: a peer cannot crash a server with a document.

It decodes as Go's ``encoding/json`` does where the two differ:

- invalid UTF-8 inside a string becomes U+FFFD, one per bad byte (Go replaces,
  msgspec refuses);
- nesting is accepted up to Go's limit of 10,000 levels (msgspec stops at
  Python's recursion limit): a deeper document is checked and cut down by an
  iterative scan, with every container deeper than :data:`KEEP_DEPTH` emptied.
  The schemas read here are all shallower than that, so only the contents of
  fields that are ignored anyway are dropped, and the verdict is Go's.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Final, TypeVar

import msgspec

__all__ = [
    "MAX_DEPTH",
    "PeerJSONError",
    "decode_go_struct",
    "decode_peer_json",
    "decode_peer_object",
    "peer_count",
]

T = TypeVar("T")

#: Go's encoding/json maxNestingDepth: deeper documents are refused.
MAX_DEPTH: Final = 10_000
#: Containers nested deeper than this are emptied before a deep document is decoded.
KEEP_DEPTH: Final = 64


class PeerJSONError(ValueError):
    """A peer's JSON document that cannot be used; ``str()`` says why, for the log."""


def _go_replace(err: UnicodeError) -> tuple[str, int]:
    # Go's decoder replaces each invalid byte on its own (utf8.DecodeRune's width 1);
    # Python's "replace" would fold a truncated sequence into one U+FFFD.
    assert isinstance(err, UnicodeDecodeError)
    return "\ufffd" * (err.end - err.start), err.end


codecs.register_error("nsqbox-go-replace", _go_replace)


def decode_peer_json(
    data: bytes | bytearray | memoryview,
    decoder: msgspec.json.Decoder[T],
    *,
    max_size: int | None = None,
) -> T:
    """Decode a peer's document with ``decoder``; :class:`PeerJSONError` if it is unusable.

    ``max_size`` bounds the document's length in bytes (None: the caller bounded it).
    """
    if max_size is not None and len(data) > max_size:
        raise PeerJSONError(f"document of {len(data)} bytes is larger than {max_size}")
    return _decode(data, decoder, pruned=False)


_object_decoder: msgspec.json.Decoder[dict[str, Any]] = msgspec.json.Decoder(dict[str, Any])


def decode_peer_object(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """A peer's JSON object, or ``{}`` when the document is not one (the caller reads each
    field it needs with its own check)."""
    try:
        return decode_peer_json(data, _object_decoder)
    except PeerJSONError:
        return {}


def _decode(
    data: bytes | bytearray | memoryview, decoder: msgspec.json.Decoder[T], *, pruned: bool
) -> T:
    try:
        return decoder.decode(data)
    except UnicodeDecodeError:
        text = bytes(data).decode("utf-8", "nsqbox-go-replace").encode()
        return _decode(text, decoder, pruned=pruned)
    except RecursionError as exc:
        if pruned:  # not deeper than KEEP_DEPTH: the stack itself is nearly used up
            raise PeerJSONError(str(exc)) from None
        return _decode(prune_deep_json(bytes(data), KEEP_DEPTH), decoder, pruned=True)
    except (msgspec.DecodeError, ValueError, TypeError, OverflowError) as exc:
        # msgspec.ValidationError is a DecodeError; ValueError/TypeError/OverflowError
        # come from __post_init__ checks and number conversions in custom types.
        raise PeerJSONError(str(exc)) from None


def peer_count(value: object, most: int = (1 << 63) - 1) -> int:
    """A count a peer's loosely typed document gave (``"fired"``, ``"lifted"``): a JSON
    integer from 0 to ``most``, 0 for anything else (a string, a float, ``true``, 1e300)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most:
        return value
    return 0


_raw_object: Final = msgspec.json.Decoder(dict[str, msgspec.Raw] | None)


def decode_go_struct(
    data: bytes | bytearray | memoryview,
    decoder: msgspec.json.Decoder[T],
    *,
    max_size: int | None = None,
) -> T:
    """Decode a JSON object into a flat struct the way Go's ``json.Unmarshal`` fills one.

    On top of :func:`decode_peer_json`: ``null`` (the whole document or a field's
    value) leaves the default in place, and a key that is not a field's exact
    name matches it case-insensitively (``Heartbeat_Interval``). A later key wins
    over an earlier one for the same field, as in Go, except that a repeated key
    whose last value is ``null`` counts as absent (Go keeps the earlier value).
    Costs a second, shallow pass; meant for documents read once per connection
    (IDENTIFY), not per message.
    """
    fields = decoder.type
    names = {f.encode_name for f in msgspec.structs.fields(fields)}  # type: ignore[arg-type]
    folded = {name.lower(): name for name in names}
    raw = decode_peer_json(data, _raw_object, max_size=max_size) or {}
    chosen: dict[str, msgspec.Raw] = {}
    for key, value in raw.items():
        name = key if key in names else folded.get(key.lower())
        if name is not None and bytes(value) != b"null":
            chosen[name] = value
    return decode_peer_json(msgspec.json.encode(chosen), decoder)


# One token of JSON, after optional whitespace: a string, a number or literal, or punctuation.
_TOKEN: Final = re.compile(
    rb"[ \t\n\r]*(?:"
    rb'("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")'
    rb"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)"
    rb"|([\[\]{},:]))"
)
_SPACE: Final = b" \t\n\r"

# What the scanner expects next.
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON, _AFTER = range(6)


def prune_deep_json(data: bytes, keep: int) -> bytes:
    """``data`` with every container nested deeper than ``keep`` levels emptied.

    Checks the whole document's syntax without recursion, as Go's scanner does,
    and refuses nesting deeper than :data:`MAX_DEPTH` (:class:`PeerJSONError`).
    """
    out = bytearray()
    stack = bytearray()  # the open containers: ord("[") or ord("{")
    state = _VALUE
    pos = 0
    while True:
        match = _TOKEN.match(data, pos)
        if match is None:
            if state == _AFTER and not stack and not data[pos:].strip(_SPACE):
                return bytes(out)
            raise PeerJSONError(f"invalid JSON at offset {pos}")
        pos = match.end()
        string, scalar, punct = match.groups()
        depth = len(stack)
        visible = depth <= keep
        if string is not None or scalar is not None:
            if state in (_KEY, _KEY_OR_CLOSE):
                if string is None:
                    raise PeerJSONError(f"invalid object key at offset {match.start()}")
                state = _COLON
            elif state in (_VALUE, _VALUE_OR_CLOSE):
                state = _AFTER
            else:
                raise PeerJSONError(f"unexpected value at offset {match.start()}")
            if visible:
                out += string if string is not None else scalar
            continue
        if punct in (b"[", b"{"):
            if state not in (_VALUE, _VALUE_OR_CLOSE):
                raise PeerJSONError(f"unexpected {punct.decode()} at offset {match.start()}")
            if depth >= MAX_DEPTH:
                raise PeerJSONError("exceeded max depth")
            stack += punct
            if depth < keep:
                out += punct
            elif depth == keep:  # the first level that is cut: an empty container
                out += b"[]" if punct == b"[" else b"{}"
            state = _VALUE_OR_CLOSE if punct == b"[" else _KEY_OR_CLOSE
        elif punct in (b"]", b"}"):
            opener = b"[" if punct == b"]" else b"{"
            closable = (_VALUE_OR_CLOSE, _AFTER) if opener == b"[" else (_KEY_OR_CLOSE, _AFTER)
            if not stack or stack[-1] != opener[0] or state not in closable:
                raise PeerJSONError(f"unexpected {punct.decode()} at offset {match.start()}")
            stack.pop()
            if depth <= keep:
                out += punct
            state = _AFTER
        elif punct == b",":
            if state != _AFTER or not stack:
                raise PeerJSONError(f"unexpected , at offset {match.start()}")
            state = _VALUE if stack[-1] == ord("[") else _KEY
            if visible:
                out += punct
        else:  # b":"
            if state != _COLON:
                raise PeerJSONError(f"unexpected : at offset {match.start()}")
            state = _VALUE
            if visible:
                out += punct
