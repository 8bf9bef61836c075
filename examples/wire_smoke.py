"""Wire-level smoke run of the QMF bus over AMQP 0-9-1 (transport only, no codec).

Connects, declares ``qpid.management``, opens a reply endpoint (bound to ``amq.direct``
under its own name) and a topic endpoint (bound to ``console.#``), then publishes

* a broker request ``B`` to ``qpid.management`` / ``broker`` with our reply key, and
* a heartbeat ``h`` (8-byte big-endian timestamp in ns) to ``console.heartbeat.1.0``,

prints what arrives (routing key, opcode, length) and exits 0 when our heartbeat came
back through the topic endpoint, 1 otherwise.  A broker response ``b`` arrives only when
a management-broker agent serves the bus; its absence is reported, not an error.

    python examples/wire_smoke.py --url amqp://guest:guest@localhost:5672/
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import time
import uuid

from qmf_async.errors import QmfError
from qmf_async.transport._aiormq import Delivery, Transport

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141

BROKER_REQUEST = b"AM2B\x00\x00\x00\x00"  # magic 'AM2', opcode 'B', sequence 0


def describe(d: Delivery, reply_endpoint: str) -> str:
    via = "reply" if d.endpoint == reply_endpoint else "topic"
    body = d.body
    if body[:3] == b"AM2" and len(body) >= 8:
        opcode = chr(body[3])
        seq = struct.unpack(">I", body[4:8])[0]
        what = f"opcode {opcode!r} seq {seq}"
    else:
        what = f"not a QMF v1 body ({body[:8]!r})"
    return f"  [{via}] {d.exchange or '(default)'}/{d.routing_key}: {what}, {len(body)} bytes"


async def run(url: str, wait: float) -> int:
    transport = Transport(url, name="qmf-async wire smoke")
    try:
        await transport.connect(timeout=10.0)
    except QmfError as exc:
        print(f"wire_smoke: {exc}", file=sys.stderr)
        return 1
    try:
        received: list[Delivery] = []
        arrived = asyncio.Event()
        heartbeat = b"AM2h\x00\x00\x00\x00" + struct.pack(">Q", time.time_ns())

        def dispatch(d: Delivery) -> None:
            received.append(d)
            if d.body == heartbeat and d.endpoint == topic:
                arrived.set()

        transport.set_dispatcher(dispatch)
        await transport.declare_management_exchange()
        reply = await transport.open_endpoint(f"qmf-smoke-{uuid.uuid4().hex[:12]}")
        await transport.bind(reply, "amq.direct", reply)
        topic = await transport.open_endpoint(
            bindings=[("qpid.management", "console.#")], max_length=10_000
        )
        print(f"connected to {transport.where}; reply endpoint {reply}, topic endpoint {topic}")

        await transport.publish(
            BROKER_REQUEST, exchange="qpid.management", routing_key="broker", reply_to=reply
        )
        await transport.publish(
            heartbeat, exchange="qpid.management", routing_key="console.heartbeat.1.0"
        )
        try:
            await asyncio.wait_for(arrived.wait(), timeout=wait)
            await asyncio.sleep(0.5)  # a little longer for a broker response
        except TimeoutError:
            pass

        print(f"received {len(received)} message(s):")
        for d in received:
            print(describe(d, reply))
        if not any(d.endpoint == reply for d in received):
            print("no broker response (b): no management-broker agent serves this bus")
        if arrived.is_set():
            print("OK: the heartbeat came back through the topic endpoint")
            return 0
        print(
            f"FAILED: the heartbeat did not come back through the topic endpoint within {wait} s",
            file=sys.stderr,
        )
        return 1
    except QmfError as exc:
        print(f"wire_smoke: {exc}", file=sys.stderr)
        return 1
    finally:
        await transport.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to wait (default 5)")
    args = parser.parse_args()
    try:
        return asyncio.run(run(args.url, args.wait))
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
