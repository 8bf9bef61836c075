"""QMF v2 map messages through both transports: a dict or list body goes out as an
AMQP 1.0 amqp-value (qpidd) or in the AMQP 0-10 map encoding with content type
``amqp/map`` (RabbitMQ), and comes back with its correlation id: over AMQP 1.0 decoded
in ``Delivery.value``, over 0-9-1 as the ``amqp/map`` bytes the core decodes."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from qmf_async.transport import (
    AiormqTransport,
    Delivery,
    NativeAmqp10Transport,
    open_reply_endpoint,
)
from qmf_async.wire import decode_v2_body

from ._util import wait_until

V2_HEADERS = {"x-amqp-0-10.app-id": "qmf2", "method": "request"}


async def _first(deliveries: list[Delivery], timeout: float = 10.0) -> Delivery:
    await wait_until(lambda: deliveries, timeout=timeout, message="a delivery")
    return deliveries[0]


@pytest.mark.qpidd
async def test_a_v2_query_to_qpidd_over_amqp_1_0(qpidd_stock: Any) -> None:
    t = NativeAmqp10Transport(qpidd_stock.url)
    await t.connect()
    try:
        got: list[Delivery] = []
        t.set_dispatcher(got.append)
        reply = await open_reply_endpoint(t)
        query = {"_what": "OBJECT", "_schema_id": {"_class_name": "broker"}}
        await t.publish(query, exchange="qmf.default.direct", routing_key="broker",
                        reply_to=reply, correlation_id="q-1",
                        headers={**V2_HEADERS, "qmf.opcode": "_query_request"})
        answer = await _first(got)
        assert answer.body == b"" and answer.correlation_id == "q-1"
        assert answer.headers["qmf.opcode"] == "_query_response"
        assert isinstance(answer.value, list) and len(answer.value) == 1
        broker = answer.value[0]
        name = broker["_values"]["name"]
        # qpidd sends the text of v2 maps as AMQP binary over 1.0
        assert (name.decode() if isinstance(name, bytes) else name) == "amqp-broker"
        assert broker["_values"]["port"] == qpidd_stock.port
    finally:
        await t.close()


@pytest.mark.integration
async def test_a_map_message_over_amqp_0_9_1(amqp_url: str) -> None:
    t = AiormqTransport(amqp_url)
    await t.connect()
    try:
        got: list[Delivery] = []
        t.set_dispatcher(got.append)
        endpoint = await open_reply_endpoint(t)
        body = {"_what": "OBJECT", "_schema_id": {"_class_name": "queue"},
                "n": 7, "id": uuid.uuid4(), "list": [1, "two", None]}
        await t.publish(body, exchange="amq.direct", routing_key=endpoint,
                        correlation_id="c-9", headers={**V2_HEADERS, "qmf.opcode": "x"})
        msg = await _first(got)
        # the bytes come up as they came, with their content type: the core decodes them
        assert msg.content_type == "amqp/map" and msg.value is None
        assert decode_v2_body(msg.content_type, msg.body) == body
        assert msg.correlation_id == "c-9"
        await t.publish([{"a": 1}, {"b": 2}], exchange="amq.direct", routing_key=endpoint)
        await asyncio.wait_for(_wait_len(got, 2), 10.0)
        assert got[1].content_type == "amqp/list" and got[1].value is None
        assert decode_v2_body("amqp/list", got[1].body) == [{"a": 1}, {"b": 2}]
        # v1 bodies are unchanged
        await t.publish(b"AM2h", exchange="amq.direct", routing_key=endpoint)
        await asyncio.wait_for(_wait_len(got, 3), 10.0)
        assert got[2].body == b"AM2h" and got[2].value is None
    finally:
        await t.close()


async def _wait_len(items: list[Any], n: int) -> None:
    await wait_until(lambda: len(items) >= n, timeout=30.0)


@pytest.mark.qpidd
async def test_qpidd_filters_with_a_selector(qpidd_stock: Any) -> None:
    """The broker passes only the heartbeats: data indications (several a second on a
    qpidd publishing every second) never arrive on the filtered binding."""
    t = NativeAmqp10Transport(qpidd_stock.url)
    await t.connect()
    try:
        assert t.server_selectors
        got: list[Delivery] = []
        t.set_dispatcher(got.append)
        endpoint = await t.open_endpoint(None)
        await t.bind(endpoint, "qmf.default.topic", "agent.ind.#",
                     selector="qmf.opcode = '_agent_heartbeat_indication'")
        await asyncio.wait_for(_wait_len(got, 2), 15.0)
        assert {d.headers.get("qmf.opcode") for d in got} == {"_agent_heartbeat_indication"}
        assert all(d.routing_key.startswith("agent.ind.heartbeat.") for d in got)
        await t.unbind(endpoint, "qmf.default.topic", "agent.ind.#",
                       selector="qmf.opcode = '_agent_heartbeat_indication'")
    finally:
        await t.close()
