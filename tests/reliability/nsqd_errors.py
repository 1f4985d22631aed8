"""Every error frame nsqd v1.3.0 can send, by command (nsqd/protocol_v2.go, client_v2.go).

An error text names the command that failed, so matching a frame against this
table checks both that the code is one nsqd sends for that command and that the
text has nsqd's shape.
"""

from __future__ import annotations

import re
from typing import Final

#: A number as Go's %d prints it.
_N = r"-?[0-9]+"
#: Anything (names and parameters may hold any byte but ``\n`` and space).
_ANY = r".*"

# (command, code, description pattern); the frame body is "CODE description".
_TABLE: Final[list[tuple[str, str, str]]] = [
    ("*", "E_INVALID", rf"invalid command {_ANY}"),
    ("*", "E_INVALID", rf"cannot {_ANY} in current state \(TLS required\)"),
    ("IDENTIFY", "E_INVALID", "cannot IDENTIFY in current state"),
    ("IDENTIFY", "E_BAD_BODY", "IDENTIFY failed to read body size"),
    ("IDENTIFY", "E_BAD_BODY", rf"IDENTIFY body too big {_N} > {_N}"),
    ("IDENTIFY", "E_BAD_BODY", rf"IDENTIFY invalid body size {_N}"),
    ("IDENTIFY", "E_BAD_BODY", "IDENTIFY failed to read body"),
    ("IDENTIFY", "E_BAD_BODY", "IDENTIFY failed to decode JSON body"),
    (
        "IDENTIFY",
        "E_BAD_BODY",
        rf"IDENTIFY (heartbeat interval|output buffer size|output buffer timeout"
        rf"|sample rate|msg timeout) \({_N}\) is invalid",
    ),
    ("IDENTIFY", "E_IDENTIFY_FAILED", "cannot enable both deflate and snappy compression"),
    ("IDENTIFY", "E_IDENTIFY_FAILED", rf"IDENTIFY failed {_ANY}"),
    ("AUTH", "E_INVALID", "cannot AUTH in current state"),
    ("AUTH", "E_INVALID", "AUTH invalid number of parameters"),
    ("AUTH", "E_BAD_BODY", "AUTH failed to read body size"),
    ("AUTH", "E_BAD_BODY", rf"AUTH body too big {_N} > {_N}"),
    ("AUTH", "E_BAD_BODY", rf"AUTH invalid body size {_N}"),
    ("AUTH", "E_BAD_BODY", "AUTH failed to read body"),
    ("AUTH", "E_INVALID", "AUTH already set"),
    ("AUTH", "E_AUTH_DISABLED", "AUTH disabled"),
    ("AUTH", "E_AUTH_FAILED", "AUTH failed"),
    ("AUTH", "E_UNAUTHORIZED", "AUTH no authorizations found"),
    ("AUTH", "E_AUTH_ERROR", rf"AUTH error {_ANY}"),
    ("SUB", "E_INVALID", "cannot SUB in current state"),
    ("SUB", "E_INVALID", "cannot SUB with heartbeats disabled"),
    ("SUB", "E_INVALID", "SUB insufficient number of parameters"),
    ("SUB", "E_BAD_TOPIC", rf'SUB topic name "{_ANY}" is not valid'),
    ("SUB", "E_BAD_CHANNEL", rf'SUB channel name "{_ANY}" is not valid'),
    ("SUB", "E_SUB_FAILED", rf"SUB failed {_ANY}"),
    ("RDY", "E_INVALID", "cannot RDY in current state"),
    ("RDY", "E_INVALID", rf"RDY could not parse count {_ANY}"),
    ("RDY", "E_INVALID", rf"RDY count {_N} out of range 0-{_N}"),
    ("FIN", "E_INVALID", "cannot FIN in current state"),
    ("FIN", "E_INVALID", "FIN insufficient number of params"),
    ("FIN", "E_FIN_FAILED", rf"FIN {_ANY} failed {_ANY}"),
    ("REQ", "E_INVALID", "cannot REQ in current state"),
    ("REQ", "E_INVALID", "REQ insufficient number of params"),
    ("REQ", "E_INVALID", rf"REQ could not parse timeout {_ANY}"),
    ("REQ", "E_REQ_FAILED", rf"REQ {_ANY} failed {_ANY}"),
    ("FIN|REQ|TOUCH", "E_INVALID", "invalid message ID"),
    ("CLS", "E_INVALID", "cannot CLS in current state"),
    ("TOUCH", "E_INVALID", "cannot TOUCH in current state"),
    ("TOUCH", "E_INVALID", "TOUCH insufficient number of params"),
    ("TOUCH", "E_TOUCH_FAILED", rf"TOUCH {_ANY} failed {_ANY}"),
    ("PUB", "E_INVALID", "PUB insufficient number of parameters"),
    ("PUB", "E_BAD_TOPIC", rf'PUB topic name "{_ANY}" is not valid'),
    ("PUB", "E_BAD_MESSAGE", "PUB failed to read message body size"),
    ("PUB", "E_BAD_MESSAGE", rf"PUB invalid message body size {_N}"),
    ("PUB", "E_BAD_MESSAGE", rf"PUB message too big {_N} > {_N}"),
    ("PUB", "E_BAD_MESSAGE", "PUB failed to read message body"),
    ("PUB", "E_PUB_FAILED", rf"PUB failed {_ANY}"),
    ("DPUB", "E_INVALID", "DPUB insufficient number of parameters"),
    ("DPUB", "E_BAD_TOPIC", rf'DPUB topic name "{_ANY}" is not valid'),
    ("DPUB", "E_INVALID", rf"DPUB could not parse timeout {_ANY}"),
    ("DPUB", "E_INVALID", rf"DPUB timeout {_N} out of range 0-{_N}"),
    ("DPUB", "E_BAD_MESSAGE", "DPUB failed to read message body size"),
    ("DPUB", "E_BAD_MESSAGE", rf"DPUB invalid message body size {_N}"),
    ("DPUB", "E_BAD_MESSAGE", rf"DPUB message too big {_N} > {_N}"),
    ("DPUB", "E_BAD_MESSAGE", "DPUB failed to read message body"),
    ("DPUB", "E_DPUB_FAILED", rf"DPUB failed {_ANY}"),
    ("MPUB", "E_INVALID", "MPUB insufficient number of parameters"),
    ("MPUB", "E_BAD_TOPIC", rf'E_BAD_TOPIC MPUB topic name "{_ANY}" is not valid'),
    ("MPUB", "E_BAD_BODY", "MPUB failed to read body size"),
    ("MPUB", "E_BAD_BODY", rf"MPUB invalid body size {_N}"),
    ("MPUB", "E_BAD_BODY", rf"MPUB body too big {_N} > {_N}"),
    ("MPUB", "E_BAD_BODY", "MPUB failed to read message count"),
    ("MPUB", "E_BAD_BODY", rf"MPUB invalid message count {_N}"),
    ("MPUB", "E_BAD_MESSAGE", rf"MPUB failed to read message\({_N}\) body size"),
    ("MPUB", "E_BAD_MESSAGE", rf"MPUB invalid message\({_N}\) body size {_N}"),
    ("MPUB", "E_BAD_MESSAGE", rf"MPUB message too big {_N} > {_N}"),
    ("MPUB", "E_BAD_MESSAGE", "MPUB failed to read message body"),
    ("MPUB", "E_MPUB_FAILED", rf"MPUB failed {_ANY}"),
]

#: nsqd's CheckAuth, on SUB and the publish commands.
_TABLE.extend(
    entry
    for cmd in ("SUB", "PUB", "MPUB", "DPUB")
    for entry in (
        (cmd, "E_AUTH_FIRST", f"AUTH required before {cmd}"),
        (cmd, "E_AUTH_FAILED", "AUTH failed"),
        (cmd, "E_UNAUTHORIZED", rf'AUTH failed for {cmd} on "{_ANY}" "{_ANY}"'),
    )
)

_PATTERNS: Final = [
    (command, code, re.compile(rf"{code} {text}", re.DOTALL)) for command, code, text in _TABLE
]

#: The errors after which nsqd keeps the connection.
NON_FATAL: Final = frozenset({"E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED"})


def classify(body: bytes) -> tuple[str, str] | None:
    """``(command, code)`` of an error frame's body when nsqd could send it, else None."""
    text = body.decode("utf-8", "surrogateescape")
    for command, code, pattern in _PATTERNS:
        if pattern.fullmatch(text):
            return command, code
    return None


def codes() -> frozenset[str]:
    """Every E_* code in the table."""
    return frozenset(code for _, code, _ in _TABLE)
