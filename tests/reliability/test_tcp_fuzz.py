"""Random and damaged protocol V2 streams against a live nsqd, while a canary uses it.

For every stream: the server answers only with frames nsqd could send (each
error's code and text are in nsqd's table for the command that caused it),
hangs up after a fatal error and after our end of stream, and forgets the
connection. Throughout, the canary's messages keep flowing; at the end it has
every one of them, and no topic or channel with an invalid name exists.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
from hypothesis import given

from nsqbox.wire.frames import MAGIC_V2, FrameReader, FrameType
from nsqbox.wire.message import decode_message
from tests.reliability import figures
from tests.reliability.blocking import IO_TIMEOUT, exchange, wait_for
from tests.reliability.canary import Canary
from tests.reliability.figures import TCP_EXAMPLES, reliability_settings
from tests.reliability.nsqd_errors import NON_FATAL, classify
from tests.reliability.observe import FUZZ_FLAGS, client_count, invalid_names
from tests.reliability.process import NSQDProcess
from tests.reliability.strategies import LIVE_MAX_DIGITS, v2_streams

RESPONSES = {b"OK", b"CLOSE_WAIT", b"_heartbeat_"}


def check_frames(sent: bytes, received: bytes, seen: Counter[str]) -> None:
    """Everything the server said is something nsqd could have said, in a legal order."""
    if len(sent) < 4:
        assert received == b"", received
        return
    if sent[:4] != MAGIC_V2:
        assert received == b"\x00\x00\x00\x12\x00\x00\x00\x01E_BAD_PROTOCOL", received
        seen["E_BAD_PROTOCOL"] += 1
        return
    reader = FrameReader(max_frame_size=64 * 1024 * 1024)
    reader.receive_data(received)
    frames = reader.frames()
    assert reader.buffered == 0, f"a partial frame: {received[-40:]!r}"
    for i, (frame_type, data) in enumerate(frames):
        if frame_type == FrameType.RESPONSE:
            if data not in RESPONSES:
                reply = json.loads(data)  # IDENTIFY with feature negotiation
                assert reply["max_rdy_count"] == 2500, reply
            seen["response"] += 1
        elif frame_type == FrameType.ERROR:
            found = classify(data)
            assert found is not None, f"nsqd never sends {data!r}"
            code = found[1]
            seen[code] += 1
            if code not in NON_FATAL:
                # Only deliveries may follow a fatal error: a closing connection
                # still takes messages until it is gone (reported, see
                # test_faults.py::test_fatal_error_stops_deliveries_at_once).
                after = [t for t, _ in frames[i + 1 :] if t != FrameType.MESSAGE]
                assert after == [], f"frames after fatal {data!r}: {frames[i + 1 :]}"
        elif frame_type == FrameType.MESSAGE:
            msg = decode_message(data)
            assert msg.attempts >= 1
            seen["message"] += 1
        else:
            raise AssertionError(f"frame type {frame_type}")


def test_random_v2_streams_against_a_live_server(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()
    cases = 0
    with (
        NSQDProcess(tmp_path / "nsqd", *FUZZ_FLAGS) as nsqd,
        httpx.Client(base_url=nsqd.http_url, timeout=IO_TIMEOUT) as http,
        Canary(nsqd.tcp) as canary,
    ):
        # the canary's consumer and producer: the producer's connection may still wait in
        # the listen backlog when the canary has subscribed
        baseline = 2
        wait_for(lambda: client_count(http) == baseline)

        @reliability_settings(TCP_EXAMPLES)
        @given(stream=v2_streams(LIVE_MAX_DIGITS))
        def case(stream: bytes) -> None:
            nonlocal cases
            cases += 1
            try:
                received = exchange(nsqd.tcp, stream)
            finally:
                nsqd.check_alive(stream)
            check_frames(stream, received, seen)
            # the server hung up, so it must forget the connection
            wait_for(lambda: client_count(http) == baseline)

        case()
        report = canary.stop()
        assert report.missing == []
        assert report.duplicates == 0
        assert invalid_names(http) == []
    figures.record("tcp fuzz: streams sent (max_examples)", f"{cases} ({TCP_EXAMPLES})")
    figures.record(
        "tcp fuzz: frames by kind", ", ".join(f"{k}={v}" for k, v in sorted(seen.items()))
    )
    figures.record(
        "tcp fuzz: canary messages sent/received",
        f"{report.sent}/{len(report.received)} (longest gap {report.max_gap * 1000:.0f} ms)",
    )
