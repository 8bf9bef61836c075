"""The publisher of ``test_hostile``'s floods of malformed QMF v1 bodies, in a process of
its own: the test traces the memory of its process (``tracemalloc``), and that should be
the console's and the agent's, not the publisher's frames and confirms (which also took
most of the CPU of a traced round).

    python tests/flood_publisher.py URL COUNT SEED REPLY_QUEUE AGENT_KEY

publishes COUNT bodies of about 1 KiB with an unknown opcode (undecodable), drawn from
``random.Random(SEED)``: of every four, two to the console's reply queue (``amq.direct``,
REPLY_QUEUE), one to its topic bindings (``qpid.management``,
``console.obj.1.0.hostile.flood``), one to the agent (``qpid.management``, AGENT_KEY).
Every publish is confirmed by the broker (50 awaiting their confirms at once).  Prints
``TO_CONSOLE TO_AGENT`` once all are confirmed; exits 1 with the error on stderr
otherwise.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Iterator
from typing import Any

import aiormq

IN_FLIGHT = 50
#: the opcodes QMF v1 defines: a body with one of them might decode
KNOWN_OPCODES = b"zmsbqpgchexaAGMSQPB"


def bodies(count: int, seed: int, reply: str, agent_key: str
           ) -> Iterator[tuple[bytes, str, str]]:
    """(body, exchange, routing key) of each flood body."""
    rnd = random.Random(seed)
    for i in range(count):
        body = b"AM2" + bytes(rnd.randrange(256) for _ in range(8)) + rnd.randbytes(1000)
        if body[3:4] in KNOWN_OPCODES:  # keep it undecodable: an unknown opcode
            body = b"AM2Y" + body[4:]
        if i % 4 == 3:
            yield body, "qpid.management", agent_key
        elif i % 4 == 2:
            yield body, "qpid.management", "console.obj.1.0.hostile.flood"
        else:
            yield body, "amq.direct", reply


async def publish(url: str, count: int, seed: int, reply: str, agent_key: str
                  ) -> tuple[int, int]:
    """Publish the flood; returns (bodies to the console, bodies to the agent)."""
    props = aiormq.spec.Basic.Properties(content_type="x-application/qmf")
    to_agent = 0
    conn: Any = await asyncio.wait_for(aiormq.connect(url), 10.0)
    try:
        channel = await conn.channel()
        batch: list[Awaitable[Any]] = []
        for body, exchange, key in bodies(count, seed, reply, agent_key):
            to_agent += key == agent_key
            batch.append(channel.basic_publish(body, exchange=exchange, routing_key=key,
                                               properties=props))
            if len(batch) == IN_FLIGHT:
                await asyncio.wait_for(asyncio.gather(*batch), 30.0)
                batch.clear()
        await asyncio.wait_for(asyncio.gather(*batch), 30.0)
    finally:
        await asyncio.wait_for(conn.close(), 10.0)
    return count - to_agent, to_agent


def main(argv: list[str]) -> int:
    url, count, seed, reply, agent_key = argv
    to_console, to_agent = asyncio.run(publish(url, int(count), int(seed), reply, agent_key))
    print(to_console, to_agent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
