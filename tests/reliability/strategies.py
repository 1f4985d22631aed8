"""Hypothesis strategies: protocol V2 and lookupd V1 command streams, valid and mutated.

A stream is built from commands that are mostly well formed (so the server gets
deep into its state machine) and then, often, damaged: truncated, a size field
overwritten, bytes inserted or deleted. Names come from a small pool of valid
ones (so commands on one connection meet each other) and from a zoo of invalid
ones. Nothing here produces the canary's names.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

from hypothesis import strategies as st

from nsqbox.wire import commands

CANARY: Final = "canary.reliability"

_INT32 = struct.Struct(">i")

VALID_NAMES: Final = [
    "fuzz",
    "fuzz.b",
    "fuzz_c-1",
    "fuzz#ephemeral",
    "F" * 64,
]
INVALID_NAMES: Final = [
    "",
    "F" * 65,
    "fuzz#ephemeral#ephemeral",
    "#ephemeral",
    "fuzz*",
    "*",
    "../../etc",
    "a:b",
    "tópic",
    "a\tb",
    "a\x00b",
    "fuzz#EPHEMERAL",
]


def _not_canary(name: str) -> bool:
    return "canary" not in name.lower()


#: Topic and channel names, as text: valid, invalid, and arbitrary.
names: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(VALID_NAMES),
    st.sampled_from(INVALID_NAMES),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\n "), min_size=0, max_size=70
    ).filter(_not_canary),
)

#: Names as raw bytes on a command line (no newline: a newline would be another command).
name_bytes: st.SearchStrategy[bytes] = st.one_of(
    names.map(lambda n: n.encode("utf-8", "surrogatepass")),
    st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"").replace(b" ", b"")),
)

#: CPython's int() refuses longer decimal strings (sys.get_int_max_str_digits()).
INT_MAX_STR_DIGITS: Final = 4300
#: Live servers get numbers past CPython's limit too (nsqd folds digits in chunks;
#: test_limits.py::test_a_long_number_does_not_kill_nsqd).
LIVE_MAX_DIGITS: Final = INT_MAX_STR_DIGITS + 100


def numbers(max_digits: int = INT_MAX_STR_DIGITS + 100) -> st.SearchStrategy[bytes]:
    """Integers around every bound nsqd checks, and far beyond (Go wraps uint64)."""
    return st.one_of(
        st.integers(min_value=-2, max_value=3000).map(lambda n: str(n).encode()),
        st.sampled_from([0, 1, 999, 1000, 2500, 2501, 3600000, 3600001, 2**63, 2**64 + 5]).map(
            lambda n: str(n).encode()
        ),
        st.sampled_from([b"", b"x", b"-1", b"+1", b"1e3", b" 1", b"\xff"]),
        st.sampled_from(
            [n for n in (20, 309, INT_MAX_STR_DIGITS, INT_MAX_STR_DIGITS + 1) if n <= max_digits]
        ).map(lambda n: b"9" * n),
    )


message_ids: st.SearchStrategy[bytes] = st.one_of(
    st.binary(min_size=16, max_size=16).map(lambda b: b.replace(b"\n", b"0").replace(b" ", b"0")),
    st.sampled_from([b"0" * 16, b"0" * 15, b"0" * 17, b""]),
)

bodies: st.SearchStrategy[bytes] = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.integers(min_value=900, max_value=1100).map(lambda n: b"m" * n),  # around max-msg-size
)

_identify_fields: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "client_id": st.text(max_size=20),
        "hostname": st.one_of(st.text(max_size=20), st.integers(), st.none()),
        "user_agent": st.text(max_size=20),
        "feature_negotiation": st.booleans(),
        "heartbeat_interval": st.sampled_from([-2, -1, 0, 999, 1000, 5000, 60000, 60001]),
        "output_buffer_size": st.sampled_from([-2, -1, 0, 63, 64, 65536, 65537]),
        "output_buffer_timeout": st.sampled_from([-2, -1, 0, 24, 25, 1000, 30000, 30001]),
        "sample_rate": st.sampled_from([-1, 0, 1, 50, 99, 100]),
        "msg_timeout": st.sampled_from([-1, 0, 999, 1000, 60000, 900000, 900001]),
        "deflate_level": st.integers(min_value=-1, max_value=10),
        "unknown_key": st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=3)),
        "long_id": st.integers(min_value=2**63, max_value=2**70),
    },
)


def _identify_body(fields: dict[str, Any]) -> bytes:
    # Compression and TLS upgrades change the framing of everything after the
    # reply; they are the TLS/compression suites' business, not this one's.
    fields = {**fields, "tls_v1": False, "snappy": False, "deflate": False}
    return json.dumps(fields).encode()


identify_bodies: st.SearchStrategy[bytes] = st.one_of(
    _identify_fields.map(_identify_body),
    st.sampled_from([b"{", b"[]", b"null", b'{"heartbeat_interval":"x"}', b"\xff\xfe", b"{}" * 3]),
    st.binary(min_size=1, max_size=40).filter(lambda b: b"snappy" not in b and b"deflate" not in b),
)


def _sized(body: bytes) -> bytes:
    return _INT32.pack(len(body)) + body


def _mpub_payload(messages: list[bytes]) -> bytes:
    payload = _INT32.pack(len(messages)) + b"".join(map(_sized, messages))
    return _sized(payload)


@st.composite
def v2_command(draw: st.DrawFn, max_digits: int) -> bytes:
    """One protocol V2 command, well formed in shape (its values may be anything)."""
    kind = draw(
        st.sampled_from(
            [
                "IDENTIFY",
                "SUB",
                "RDY",
                "FIN",
                "REQ",
                "TOUCH",
                "PUB",
                "DPUB",
                "MPUB",
                "NOP",
                "CLS",
                "AUTH",
                "garbage",
            ]
        )
    )
    nl = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    if kind == "IDENTIFY":
        return b"IDENTIFY" + nl + _sized(draw(identify_bodies))
    if kind == "SUB":
        return b"SUB " + draw(name_bytes) + b" " + draw(name_bytes) + nl
    if kind == "RDY":
        return b"RDY " + draw(numbers(max_digits)) + nl
    if kind in ("FIN", "TOUCH"):
        return kind.encode() + b" " + draw(message_ids) + nl
    if kind == "REQ":
        return b"REQ " + draw(message_ids) + b" " + draw(numbers(max_digits)) + nl
    if kind == "PUB":
        return b"PUB " + draw(name_bytes) + nl + _sized(draw(bodies))
    if kind == "DPUB":
        return (
            b"DPUB "
            + draw(name_bytes)
            + b" "
            + draw(numbers(max_digits))
            + nl
            + _sized(draw(bodies))
        )
    if kind == "MPUB":
        messages = draw(st.lists(bodies, min_size=1, max_size=6))
        return b"MPUB " + draw(name_bytes) + nl + _mpub_payload(messages)
    if kind in ("NOP", "CLS"):
        return kind.encode() + nl
    if kind == "AUTH":
        return b"AUTH" + nl + _sized(draw(st.binary(min_size=1, max_size=16)))
    line = draw(st.binary(max_size=40)).replace(b"\n", b"")
    return line + nl


@st.composite
def mutated(draw: st.DrawFn, data: bytes, *, skip: int = 0) -> bytes:
    """``data`` with a few random faults applied after its first ``skip`` bytes."""
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        if len(data) <= skip:
            break
        at = draw(st.integers(min_value=skip, max_value=len(data)))
        fault = draw(st.sampled_from(["truncate", "size", "insert", "delete", "flip"]))
        if fault == "truncate":
            data = data[:at]
        elif fault == "size" and at + 4 <= len(data):
            value = draw(
                st.sampled_from([-1, 0, 1, 5, 1024, 1025, 4096, 4097, 2**31 - 1, -(2**31)])
            )
            data = data[:at] + _INT32.pack(value) + data[at + 4 :]
        elif fault == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
        elif fault == "delete":
            data = data[:at] + data[at + draw(st.integers(min_value=1, max_value=8)) :]
        elif fault == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    return data


@st.composite
def v2_streams(draw: st.DrawFn, max_digits: int = INT_MAX_STR_DIGITS + 1) -> bytes:
    """What a client sends after connecting: magic (usually right), commands, faults."""
    magic = commands.MAGIC_V2
    if draw(st.integers(min_value=0, max_value=9)) == 9:
        magic = draw(
            st.one_of(
                st.sampled_from([b"  V1", b"V2  ", b"  v2", b"", b" ", b"GET / HTTP/1.1\r\n"]),
                st.binary(min_size=1, max_size=6),
            )
        )
    # A subscriber usually wants a heartbeat-friendly, working session: start many
    # streams with IDENTIFY+SUB+RDY so later commands meet in-flight messages.
    prefix = b""
    if draw(st.booleans()):
        topic = draw(st.sampled_from(VALID_NAMES))
        prefix = commands.sub(topic, "fuzz") + commands.rdy(5) + commands.pub(topic, b"seed")
    body = b"".join(draw(st.lists(v2_command(max_digits), min_size=1, max_size=12)))
    data = magic + prefix + body
    if draw(st.booleans()):
        data = draw(mutated(data, skip=len(magic)))
    return data


# --- lookupd V1 ---------------------------------------------------------------------


@st.composite
def v1_command(draw: st.DrawFn) -> bytes:
    """One lookupd V1 command, as an nsqd (or anything else) might send it."""
    kind = draw(st.sampled_from(["PING", "IDENTIFY", "REGISTER", "UNREGISTER", "garbage"]))
    nl = draw(st.sampled_from([b"\n", b"\r\n", b"  \n"]))
    if kind == "PING":
        return b"PING" + nl
    if kind == "IDENTIFY":
        fields = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "broadcast_address": st.sampled_from(["127.0.0.1", "", "fuzz.invalid"]),
                    "hostname": st.text(max_size=10),
                    "tcp_port": st.one_of(st.integers(-1, 70000), st.text(max_size=3)),
                    "http_port": st.integers(-1, 70000),
                    "version": st.sampled_from(["1.3.0", "", "x"]),
                },
            )
        )
        body = draw(st.one_of(st.just(json.dumps(fields).encode()), st.binary(max_size=20)))
        return b"IDENTIFY" + nl + _sized(body)
    if kind in ("REGISTER", "UNREGISTER"):
        parts = draw(st.lists(name_bytes, min_size=0, max_size=3))
        return b" ".join([kind.encode(), *parts]) + nl
    return draw(st.binary(max_size=30)).replace(b"\n", b"") + nl


@st.composite
def v1_streams(draw: st.DrawFn) -> bytes:
    """What a peer sends to lookupd's TCP port: magic (usually right), commands, faults."""
    magic = draw(st.one_of(st.just(b"  V1"), st.just(b"  V1"), st.binary(min_size=0, max_size=5)))
    data = magic + b"".join(draw(st.lists(v1_command(), max_size=8)))
    if draw(st.booleans()):
        data = draw(mutated(data, skip=len(magic)))
    return data
