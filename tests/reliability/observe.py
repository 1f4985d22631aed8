"""Looking at a live nsqd from outside, over its HTTP API, and the fuzz servers' limits."""

from __future__ import annotations

import httpx

from nsqbox.wire.names import is_valid_channel_name, is_valid_topic_name

MAX_MSG = 1024
MAX_BODY = 4096


#: Small limits, so fuzzed sizes land on both sides of them.
FUZZ_FLAGS = (f"--max-msg-size={MAX_MSG}", f"--max-body-size={MAX_BODY}")


def client_count(http: httpx.Client) -> int:
    """Connections the server holds (its /debug page)."""
    count = http.get("/debug").json()["client_count"]
    assert isinstance(count, int)
    return count


def invalid_names(http: httpx.Client) -> list[str]:
    """Topics and channels whose names nsqd would refuse."""
    stats = http.get("/stats", params={"format": "json"}).json()
    bad = []
    for topic in stats["topics"] or []:
        if not is_valid_topic_name(topic["topic_name"]):
            bad.append(topic["topic_name"])
        for channel in topic["channels"]:
            if not is_valid_channel_name(channel["channel_name"]):
                bad.append(f"{topic['topic_name']}:{channel['channel_name']}")
    return bad
