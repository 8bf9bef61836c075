#!/usr/bin/env python3
"""Record what RabbitMQ's management API answers to the RabbitMQ bridge, for the
mapping tests (tests/data/rabbitmq-api/).

    python3 scripts/record_rabbitmq_api.py [--api URL] [--amqp URL] [OUT_DIR]

Builds a known state in a fresh vhost ``bridge-record`` (a durable queue ``orders``
with a length limit and a dead-letter exchange, a queue ``audit``, a topic exchange
``events`` with an alternate exchange, bindings, one connection with a consumer on
``orders``, 5 messages published and 2 acknowledged), waits until the API's
statistics show that traffic, and writes the bridge's requests' answers as
``state1.json``; then removes a binding, the consumer's connection and the queue
``audit`` and writes ``state2.json``.  The vhost is deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import aiormq
import attrs

from qmf_async.agent import Agent
from qmf_async.bridge.rabbitmq import RabbitApi, RabbitBridge

VHOST = "bridge-record"


async def wait_for(predicate, what: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"record: {what} not seen within {timeout}s")
        await asyncio.sleep(0.25)


async def dump(bridge: RabbitBridge, path: Path) -> None:
    raw = await bridge.fetch()
    text = json.dumps(attrs.asdict(raw), indent=1, sort_keys=True) + "\n"
    await asyncio.to_thread(path.write_text, text)
    print(f"wrote {path}")


async def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", default="http://guest:guest@localhost:15672/")
    p.add_argument("--amqp", default="amqp://guest:guest@localhost:5672/")
    p.add_argument("out", nargs="?", default="tests/data/rabbitmq-api")
    args = p.parse_args(argv)
    out = Path(args.out)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    api = RabbitApi(args.api)
    v = "bridge-record"
    await api.request("DELETE", f"vhosts/{v}", params=None) if await _exists(api, v) else None
    await api.request("PUT", f"vhosts/{v}")
    await api.request("PUT", f"permissions/{v}/{api.user}",
                      body={"configure": ".*", "write": ".*", "read": ".*"})
    # the bridge object only for its fetch (never started)
    bridge = RabbitBridge(Agent("amqp://unused/"), api, interval=1.0, vhost=v)
    conn = await aiormq.connect(f"{args.amqp.rstrip('/')}/{v}",
                                client_properties={"connection_name": "recorder"})
    try:
        ch = await conn.channel()
        await ch.exchange_declare("dead", exchange_type="fanout", durable=True)
        await ch.exchange_declare("lost", exchange_type="fanout")
        await ch.exchange_declare("events", exchange_type="topic", durable=True,
                                  arguments={"alternate-exchange": "lost"})
        await ch.queue_declare("orders", durable=True, arguments={
            "x-max-length": 1000, "x-dead-letter-exchange": "dead"})
        await ch.queue_declare("audit")
        await ch.queue_bind("orders", "events", routing_key="order.#")
        await ch.queue_bind("audit", "events", routing_key="#")
        await ch.queue_bind("audit", "amq.fanout")
        for i in range(5):
            await ch.basic_publish(b"x" * (100 + i), exchange="events", routing_key="order.new")
        await ch.basic_publish(b"nowhere", exchange="amq.direct", routing_key="nobody")
        consumer_ch = await conn.channel()
        await consumer_ch.basic_qos(prefetch_count=2)
        seen: list[aiormq.abc.DeliveredMessage] = []

        async def on_message(msg: aiormq.abc.DeliveredMessage) -> None:
            seen.append(msg)
            if len(seen) <= 2:
                await msg.channel.basic_ack(msg.delivery.delivery_tag)

        await consumer_ch.basic_consume("orders", on_message, consumer_tag="recorder-1")

        async def traffic_seen() -> bool:
            q = await api.get(f"queues/{v}/orders")
            stats = q.get("message_stats") or {}
            return bool(stats.get("publish") == 5 and stats.get("ack") == 2
                        and q.get("messages") == 3 and (q.get("message_bytes") or 0) > 0)

        await wait_for(traffic_seen, "the traffic in the API's statistics")
        await dump(bridge, out / "state1.json")
        await ch.queue_unbind("audit", "amq.fanout")
        await ch.queue_delete("audit")
        await conn.close()
        conn = None

        async def gone() -> bool:
            raw = await bridge.fetch()
            orders = [q for q in raw.queues if q["name"] == "orders"]
            return (not raw.connections and not raw.consumers and len(raw.queues) == 1
                    and orders[0].get("consumers") == 0
                    and orders[0].get("messages_unacknowledged") == 0)

        await wait_for(gone, "the connection and audit gone")
        await dump(bridge, out / "state2.json")
    finally:
        if conn is not None:
            await conn.close()
        await api.request("DELETE", f"vhosts/{v}")
        await api.close()
    return 0


async def _exists(api: RabbitApi, vhost: str) -> bool:
    from qmf_async.bridge.rabbitmq import ApiError

    try:
        await api.get(f"vhosts/{vhost}")
    except ApiError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
