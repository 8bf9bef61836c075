"""CPU an Agent spends answering one ``G`` for ``count`` objects, in process.

    python benchmarks/agent_answer.py [--count 10000] [--rounds 7] [--changed N]
    python benchmarks/agent_answer.py --calls 20000 [--rounds 7]

The objects are those of benchmarks/get_objects.py (``queue_schema()`` /
``queue_values()``).  Each round hands the agent a ``G`` for the class, as its request
handler would, and runs its reply path to the end (selection, records, encoding of
every ``g`` body and the ``z``, streamed body by body as for a real answer); the
bodies are collected instead of published.  Result: the best round in CPU time
(``time.process_time``), in microseconds per object.  ``--changed N`` sets a property
of N objects before each round (so their cached encodings are rebuilt).

The bodies of the first round are checked to decode back to the objects' values.

``--calls N`` measures the agent's method-call path instead: N ``M`` deliveries of an
``echo`` (``sequence`` uint32 IO, ``body`` lstr IO, a plain-function handler) handed to
the agent's dispatcher, each decoded, served in a concurrency slot and answered with an
encoded ``m`` on the agent's send queue (drained, not published): the best round's CPU
per call, in microseconds (the agent's share of ``benchmarks/echo.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import QUEUE_PACKAGE, queue_schema, queue_values  # noqa: E402

from qmf_async import wire  # noqa: E402
from qmf_async.agent import Agent  # noqa: E402


async def measure(count: int, rounds: int, changed: int) -> tuple[float, int, int]:
    schema = queue_schema()
    agent = Agent("amqp://unused/", label="bench", schemas=[schema], interval=3600.0,
                  agent_bank=7, attach=False)
    objs = [agent.create_object(schema, **queue_values(i)) for i in range(count)]
    bodies: list[bytes] = []
    agent._enqueue = lambda out: bodies.append(out.body)  # type: ignore[method-assign]
    best = float("inf")
    seq = 1
    for r in range(rounds):
        for k in range(changed):
            objs[(r * changed + k) % count].set(name=f"renamed.{r}.{k}")
        bodies.clear()
        query = wire.GetQuery(seq, {"_class": "queue", "_package": QUEUE_PACKAGE})
        start = time.process_time()
        agent._handle(query, "amq.direct/reply")
        while agent._tasks:
            await asyncio.gather(*list(agent._tasks))
        used = time.process_time() - start
        best = min(best, used)
        if r == 0:
            check(bodies, objs, seq)
        seq += 1
    return best, len(bodies), count


async def measure_calls(calls: int, rounds: int) -> float:
    """The best round's CPU per call (seconds) of ``calls`` echo requests."""
    from qmf_async.agent import Arg, Property, method, object_class
    from qmf_async.protocol import Delivery

    schema = object_class("org.qmfasync.bench", "echoer",
                          properties=[Property("name", "sstr", index=True)],
                          methods=[method("echo", Arg("sequence", "uint32", direction="IO"),
                                          Arg("body", "lstr", direction="IO"))])
    agent = Agent("amqp://unused/", label="bench", schemas=[schema], interval=3600.0,
                  broker_bank=1, agent_bank=7, attach=False, max_outgoing=calls + 10)
    obj = agent.create_object(schema, name="e")
    agent.set_method_handler("echoer", "echo",
                             lambda o, sequence, body: {"sequence": sequence, "body": body})
    registry = wire.SchemaRegistry([schema])
    deliveries = [
        Delivery(wire.encode(wire.MethodRequest(seq, obj.object_id, schema.class_key, "echo",
                                                {"sequence": seq, "body": "x" * 100}),
                             registry),
                 "qpid.management", "agent.1.7", "reply-key", "x-application/qmf", {},
                 "guest", "agent-queue")
        for seq in range(1, calls + 1)]
    outgoing = agent._outgoing
    dispatch = agent._dispatch
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for delivery in deliveries:
            dispatch(delivery)
        used = time.process_time() - start
        assert outgoing.qsize() == calls, outgoing.qsize()
        while not outgoing.empty():
            outgoing.get_nowait()
            outgoing.task_done()
        best = min(best, used)
    return best / calls


def check(bodies: list[bytes], objs: list[Any], seq: int) -> None:
    registry = wire.SchemaRegistry([objs[0].schema])
    records = [m for b in bodies for m in wire.decode(b, registry)]
    assert records[-1].OPCODE == "z" and records[-1].seq == seq
    got = records[:-1]
    assert len(got) == len(objs)
    for rec, obj in zip(got, objs, strict=True):
        assert rec.OPCODE == "g" and rec.seq == seq and rec.object_id == obj.object_id
        assert rec.properties == tuple(obj._props), (rec.properties, obj._props)
        assert rec.statistics == tuple(obj._stats)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--changed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=0,
                    help="measure N method calls instead of a G answer")
    args = ap.parse_args(argv)
    if args.calls:
        per_call = asyncio.run(measure_calls(args.calls, args.rounds))
        print(f"agent method calls (echo, plain handler), {args.calls} per round: best of "
              f"{args.rounds} rounds {per_call * 1e6:.2f} us CPU/call")
        return
    best, nbodies, count = asyncio.run(measure(args.count, args.rounds, args.changed))
    print(f"agent answer to G for {count} objects ({nbodies} bodies), "
          f"{args.changed} changed per round: best of {args.rounds} rounds "
          f"{best * 1e3:.1f} ms CPU = {best / count * 1e6:.2f} us/object")


if __name__ == "__main__":
    main()
