"""A small orders service, as a user of nsqbox would write it (not part of nsqbox's tests).

It publishes orders over nsqd's HTTP API or with gnsq, and has workers on pynsq
(requeueing transient failures) and on nsqbox.client (trio).
"""

from __future__ import annotations

import json
import urllib.request


class TransientError(Exception):
    """A failure worth retrying (a payment gateway time-out, say)."""


def publish_order_http(nsqd_http_url: str, order_id: int) -> None:
    """POST one order to nsqd's /pub."""
    body = json.dumps({"id": order_id}).encode()
    request = urllib.request.Request(f"{nsqd_http_url}/pub?topic=orders", data=body)
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.read() == b"OK"


def publish_order_gnsq(nsqd_tcp_address: str, order_id: int) -> None:
    """Publish one order with gnsq (gevent)."""
    import gnsq

    producer = gnsq.Producer(nsqd_tcp_address)
    producer.start()
    try:
        producer.publish("orders", json.dumps({"id": order_id}).encode())
    finally:
        producer.close()
        producer.join(timeout=10)


def bill(order: dict[str, int], attempts: int) -> str:
    """Bill an order; the gateway fails the first attempt of odd ids."""
    if order["id"] % 2 and attempts == 1:
        raise TransientError(order["id"])
    return f"billed {order['id']}"
