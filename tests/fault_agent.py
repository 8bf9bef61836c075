"""An agent process for the fault tests: ``python -m tests.fault_agent URL COUNT INTERVAL
LABEL [PARTS]`` serves COUNT objects of ``org.qmfasync.faults:item`` (property ``n`` =
0..COUNT-1) without a management broker (broker bank 7), heartbeating every INTERVAL
seconds, and prints ``ready <broker bank> <agent bank>`` once started.  It runs until
killed.

With PARTS, it sends only the first PARTS bodies of each QMF v1 ``G`` answer: a longer
answer's other bodies, and its ``z``, are held until it is killed, so a test that kills
it once the first object arrived kills it mid-answer however fast the machine delivers
the answer.  (Over QMF v2 the agent does not evaluate ``_where``: a test's first,
selective query is answered in as many parts as the big one.)"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from qmf_async.agent import Agent, Property, Statistic, object_class

PACKAGE = "org.qmfasync.faults"
ITEM = object_class(PACKAGE, "item", properties=[Property("n", "uint32", index=True)],
                    statistics=[Statistic("v", "uint64")])


def hold_answers(agent: Agent, parts: int) -> None:
    """Let ``agent`` send the first ``parts`` bodies of each QMF v1 ``G`` answer; the
    later bodies of a longer one, and its ``z``, are never sent."""
    sent: dict[bytes, int] = {}
    enqueue = agent._enqueue

    def held(out: Any) -> None:
        body = bytes(out.body)
        opcode, seq = body[3:4], body[4:8]  # the v1 header: AM2, opcode, sequence
        if opcode == b"g":
            sent[seq] = sent.get(seq, 0) + 1
            if sent[seq] > parts:
                return
        if opcode == b"z" and sent.get(seq, 0) > parts:
            return
        enqueue(out)

    agent._enqueue = held  # type: ignore[method-assign]


async def main(url: str, count: int, interval: float, label: str, parts: int | None) -> None:
    """Start the agent, announce it, and serve until killed."""
    agent = Agent(url, label=label, schemas=[ITEM], interval=interval, attach=False,
                  broker_bank=7)
    for n in range(count):
        agent.create_object("item", n=n, v=n)
    if parts is not None:
        hold_answers(agent, parts)
    await agent.start()
    print("ready", agent.broker_bank, agent.agent_bank, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
                     int(sys.argv[5]) if len(sys.argv) > 5 else None))
