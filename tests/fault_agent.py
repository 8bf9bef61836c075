"""An agent process for the fault tests: ``python -m tests.fault_agent URL COUNT INTERVAL
LABEL`` serves COUNT objects of ``org.qmfasync.faults:item`` (property ``n`` = 0..COUNT-1)
without a management broker (broker bank 7), heartbeating every INTERVAL seconds, and
prints ``ready <broker bank> <agent bank>`` once started.  It runs until killed."""

from __future__ import annotations

import asyncio
import sys

from qmf_async.agent import Agent, Property, Statistic, object_class

PACKAGE = "org.qmfasync.faults"
ITEM = object_class(PACKAGE, "item", properties=[Property("n", "uint32", index=True)],
                    statistics=[Statistic("v", "uint64")])


async def main(url: str, count: int, interval: float, label: str) -> None:
    """Start the agent, announce it, and serve until killed."""
    agent = Agent(url, label=label, schemas=[ITEM], interval=interval, attach=False,
                  broker_bank=7)
    for n in range(count):
        agent.create_object("item", n=n, v=n)
    await agent.start()
    print("ready", agent.broker_bank, agent.agent_bank, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]))
