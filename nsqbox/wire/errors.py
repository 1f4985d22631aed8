"""NSQ's client errors: a code, a description, and whether the server hangs up.

nsqd answers a bad command with an error frame whose body is ``CODE description``
(internal/protocol/errors.go). Every error is fatal (the connection closes after
the frame) except E_FIN_FAILED, E_REQ_FAILED and E_TOUCH_FAILED.
"""

from __future__ import annotations

from ..go.syntax import go_quote

__all__ = ["NON_FATAL_CODES", "NSQError", "ProtocolViolation", "go_quote", "invalid"]

#: Codes a client may receive without the connection being closed.
NON_FATAL_CODES = frozenset({"E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED"})


class NSQError(Exception):
    """An error frame: ``code`` (``E_*``), ``description``, and ``fatal``.

    Raised by the sans-IO parser and the nsqd command handlers; its
    :meth:`frame_body` is exactly the body of the error frame nsqd sends. Its message
    (``str(error)``, what logs show) has the peer's control characters and undecodable bytes
    made visible (:func:`~nsqbox.process.terminal_text.visible`): a log line is UTF-8 and safe for a
    terminal, whatever the peer sent.
    """

    def __init__(self, code: str, description: str = "", *, fatal: bool = True) -> None:
        from ..process.terminal_text import visible  # on the first error: off the start-up path

        super().__init__(visible(f"{code} {description}" if description else code))
        self.code = code
        self.description = description
        self.fatal = fatal

    def frame_body(self) -> bytes:
        """The error frame's payload, e.g. ``b"E_INVALID invalid command FOO"``.

        A description that carries a peer's raw bytes (``surrogateescape``) gets them back.
        """
        return f"{self.code} {self.description}".encode("utf-8", "surrogateescape")

    @classmethod
    def from_frame_body(cls, body: bytes) -> NSQError:
        """Client side: turn an error frame's payload back into an NSQError."""
        text = body.decode("utf-8", "replace")
        code, _, description = text.partition(" ")
        return cls(code, description, fatal=code not in NON_FATAL_CODES)


class ProtocolViolation(Exception):
    """The peer broke framing badly enough that nsqd drops it without an error frame.

    For example a command line longer than nsqd's 16 KiB read buffer.
    """


def invalid(description: str) -> NSQError:
    """A fatal E_INVALID."""
    return NSQError("E_INVALID", description)
