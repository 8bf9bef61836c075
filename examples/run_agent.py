"""A tiny self-contained QMF agent: its own class, method and event.

    python examples/run_agent.py --url amqp://guest:guest@localhost:5672/
        [--duration SECONDS] [--interval 1] [--label counter-agent]

Serves package ``com.example.counters``: objects of class ``counter`` (property
``name``, statistics ``count`` and ``step``) that count up by ``step`` every interval,
the methods ``add(amount) -> total`` and ``reset() -> previous``, and the event
``counterReset`` raised by ``reset``.  Runs until Ctrl-C, SIGTERM or ``--duration``
seconds; exits 0 on a clean stop, 1 when the broker cannot be reached.

Try it with the console examples:

    python examples/call_method.py --url URL --class counter --name ticks add 5
    python examples/watch_events.py --url URL --class counterReset --count 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys

from qmf_async import QmfError
from qmf_async.agent import (
    Agent,
    Arg,
    ManagedObject,
    Property,
    Statistic,
    event_class,
    method,
    object_class,
)

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141

PACKAGE = "com.example.counters"

COUNTER = object_class(
    PACKAGE, "counter",
    properties=[Property("name", "sstr", index=True, desc="counter name")],
    statistics=[Statistic("count", "uint64", unit="tick"),
                Statistic("step", "uint32", desc="added every interval")],
    methods=[
        method("add", Arg("amount", "uint32", direction="I", max=1_000_000),
               Arg("total", "uint64", direction="O"), desc="Add to the count"),
        method("reset", Arg("previous", "uint64", direction="O"),
               desc="Set the count to zero (raises counterReset)"),
    ],
)
COUNTER_RESET = event_class(PACKAGE, "counterReset",
                            [Arg("name", "sstr"), Arg("previous", "uint64")])


def build_agent(url: str, *, interval: float = 1.0, label: str = "counter-agent") -> Agent:
    """The agent with two counters and its method handlers (not started)."""
    agent = Agent(url, label=label, schemas=[COUNTER, COUNTER_RESET], interval=interval)
    agent.create_object("counter", name="ticks", step=1)
    agent.create_object("counter", name="tocks", step=10)

    @agent.method("counter", "add")
    async def add(obj: ManagedObject, amount: int) -> dict[str, int]:
        obj.inc("count", amount)
        return {"total": obj["count"]}

    @agent.method("counter", "reset")
    async def reset(obj: ManagedObject) -> dict[str, int]:
        previous = obj["count"]
        obj.set(count=0)
        agent.raise_event("counterReset", name=obj["name"], previous=previous)
        return {"previous": previous}

    return agent


async def run(url: str, interval: float, label: str, duration: float | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    agent = build_agent(url, interval=interval, label=label)
    deadline = None if duration is None else loop.time() + duration
    async with agent:
        print(f"agent {label!r} ready as {agent.broker_bank}.{agent.agent_bank} "
              f"({'attached' if agent.attached else 'no management broker'}), serving "
              f"{PACKAGE}:counter x{len(agent.objects('counter'))}", flush=True)
        while not stop.is_set():
            wait = interval if deadline is None else min(interval, deadline - loop.time())
            if wait <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            for obj in agent.objects("counter"):
                obj.inc("count", obj["step"])
    print("agent stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/",
                        help="AMQP 0-9-1 broker URL")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="publish and counting interval in seconds (default 1)")
    parser.add_argument("--label", default="counter-agent", help="agent label")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error("--interval must be positive")
    try:
        return asyncio.run(run(args.url, args.interval, args.label, args.duration))
    except QmfError as exc:
        print(f"run_agent: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
