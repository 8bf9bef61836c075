"""Method calls per second: ``await broker.echo(sequence, body)`` through a Session to an
Agent in its own process, against raw aiormq request/reply in the same run.

    python benchmarks/echo.py [--url URL] [--quick] [--body-size N] [--profile FILE]

Ours: a Session calls ``echo(sequence uint32 IO, body lstr IO)`` on an
``org.apache.qpid.broker:broker``-like object served by an Agent running in a child
process (``attach=False``, fixed agent bank, a one-hour publish interval so nothing
but the calls crosses the bus).  Both QMF sides send one request (one ``M``) or one
reply (one ``m``) per AMQP message, like the classic console.

Baseline: a raw aiormq responder process (consumes its queue, publishes the same body
back to ``reply_to`` through the default exchange) and a raw aiormq client that
publishes one request per AMQP message with a correlation id and awaits a future
resolved by its consumer.  Its request payload has the byte size of the QMF ``M``
body, so both move the same bytes per request.

A third path splits the cost: a raw aiormq client sending pre-encoded QMF ``M`` bodies
(one per AMQP message, as the classic console does) to the same Agent and matching the
``m`` replies by sequence number, so it shows the Agent's share without the Session.

All are measured with 1 call in flight (sequential) and with 1,000 in flight (1,000
workers calling in a loop), interleaved over several rounds after a warm-up; the
table shows the median and best rates; "vs raw" is the median over rounds of the
ratio to the raw run of the same round.  CPU time of the client, the responder and
the RabbitMQ node is sampled from /proc around each run (medians over rounds): the CPU
cost of one call in each process, which a busy machine disturbs less than the rates.
The RabbitMQ figure includes whatever else the node serves meanwhile.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from typing import Any

from _common import (
    Child,
    CpuMeter,
    child_ready,
    emit_json,
    import_session,
    machine,
    parser,
    raw_reply_channel,
    serve_until_terminated,
    table,
)

PACKAGE = "org.apache.qpid.broker"
BROKER_BANK = 1
FLOOR, GOAL = 0.70, 0.90
SCRIPT = os.path.abspath(__file__)


def broker_schema() -> Any:
    from qmf_async.agent import Arg, Property, Statistic, method, object_class

    return object_class(
        PACKAGE, "broker",
        properties=[
            Property("name", "sstr", index=True),
            Property("systemRef", "objId"),
            Property("port", "uint16"),
            Property("version", "sstr"),
        ],
        statistics=[Statistic("uptime", "deltaTime")],
        methods=[method("echo", Arg("sequence", "uint32", direction="IO"),
                        Arg("body", "lstr", direction="IO"))],
    )


def payload_sizes(body_size: int) -> tuple[int, int]:
    """Byte sizes of the QMF ``M`` request and ``m`` reply bodies of one echo."""
    from qmf_async import wire
    from qmf_async.wire._values import ObjectId

    schema = broker_schema()
    reg = wire.SchemaRegistry([schema])
    oid = ObjectId.make(sequence=1, broker_bank=BROKER_BANK, agent_bank=1 << 27, object=1)
    args = {"sequence": 1 << 31, "body": "x" * body_size}
    m = wire.encode(wire.MethodRequest(1, oid, schema.class_key, "echo", args), reg)
    r = wire.encode(wire.MethodResponse(1, 0, "OK", args), reg,
                    methods={1: (schema, schema.methods[0])})
    return len(m), len(r)


# --------------------------------------------------------------------------- children

async def role_qmf_agent(url: str, bank: int) -> None:
    from qmf_async.agent import Agent
    from qmf_async.wire._values import ObjectId

    async with Agent(url, label="bench-echo", schemas=[broker_schema()], interval=3600.0,
                     broker_bank=BROKER_BANK, agent_bank=bank, attach=False,
                     max_outgoing=100_000) as agent:
        agent.create_object("broker", name="bench", systemRef=ObjectId(bytes(16)), port=5672,
                            version="bench")

        @agent.method("broker", "echo")
        def echo(obj: Any, sequence: int, body: str) -> dict[str, Any]:
            return {"sequence": sequence, "body": body}

        child_ready()
        await serve_until_terminated()


async def role_raw_responder(url: str, queue: str) -> None:
    import aiormq
    from pamqp import commands as spec

    conn = await aiormq.connect(url)
    ch = await conn.channel(publisher_confirms=False)
    await ch.queue_declare(queue, exclusive=True, auto_delete=True)
    publish = ch.basic_publish
    Props = spec.Basic.Properties

    async def on_request(msg: Any) -> None:
        props = msg.header.properties
        await publish(msg.body, exchange="", routing_key=props.reply_to,
                      properties=Props(correlation_id=props.correlation_id), wait=False)

    await ch.basic_consume(queue, on_request, no_ack=True)
    child_ready()
    await serve_until_terminated()
    await conn.close()


# --------------------------------------------------------------------------- clients

class RawClient:
    """Raw aiormq request/reply: one request per AMQP message, futures by correlation id."""

    def __init__(self, url: str, target: str, payload: bytes) -> None:
        self.url, self.target, self.payload = url, target, payload
        self.futures: dict[str, asyncio.Future[bytes]] = {}
        self.counter = 0

    async def open(self) -> None:
        import aiormq
        from pamqp import commands as spec

        self.spec = spec
        self.conn = await aiormq.connect(self.url)
        self.ch = await self.conn.channel(publisher_confirms=False)
        ok = await self.ch.queue_declare("", exclusive=True, auto_delete=True)
        self.reply_queue = ok.queue
        futures = self.futures

        async def on_reply(msg: Any) -> None:
            fut = futures.pop(msg.header.properties.correlation_id, None)
            if fut is not None and not fut.done():
                fut.set_result(msg.body)

        await self.ch.basic_consume(self.reply_queue, on_reply, no_ack=True)

    async def call(self) -> bytes:
        self.counter += 1
        cid = str(self.counter)
        fut = asyncio.get_running_loop().create_future()
        self.futures[cid] = fut
        await self.ch.basic_publish(
            self.payload, exchange="", routing_key=self.target,
            properties=self.spec.Basic.Properties(correlation_id=cid, reply_to=self.reply_queue),
            wait=False)
        return await fut

    async def close(self) -> None:
        await self.conn.close()


class RawQmfClient:
    """Raw aiormq client speaking QMF to the Agent: pre-encoded ``M`` bodies (the
    sequence number patched in), one per AMQP message, to ``agent.<bb>.<ab>`` on
    ``qpid.management``; replies matched by the sequence number of the ``m``."""

    def __init__(self, url: str, bank: int, body_size: int) -> None:
        from qmf_async import wire
        from qmf_async.wire._values import ObjectId

        schema = broker_schema()
        oid = ObjectId.make(sequence=1, broker_bank=BROKER_BANK, agent_bank=bank, object=1)
        template = wire.encode(wire.MethodRequest(0, oid, schema.class_key, "echo",
                                                  {"sequence": 7, "body": "x" * body_size}),
                               wire.SchemaRegistry([schema]))
        self.tail = template[8:]
        self.url, self.key = url, f"agent.{BROKER_BANK}.{bank}"
        self.futures: dict[bytes, asyncio.Future[bytes]] = {}
        self.seq = random.randrange(1, 1 << 31)

    async def open(self) -> None:
        self.conn, self.ch, self.name, self.props = await raw_reply_channel(
            self.url, "bench-qmf-reply")
        futures = self.futures

        async def on_reply(msg: Any) -> None:
            fut = futures.pop(msg.body[4:8], None)
            if fut is not None and not fut.done():
                fut.set_result(msg.body)

        await self.ch.basic_consume(self.name, on_reply, no_ack=True)

    async def call(self) -> bytes:
        self.seq = (self.seq + 1) & 0xFFFFFFFF or 1
        seq = self.seq.to_bytes(4, "big")
        fut = asyncio.get_running_loop().create_future()
        self.futures[seq] = fut
        await self.ch.basic_publish(b"AM2M" + seq + self.tail, exchange="qpid.management",
                                    routing_key=self.key, properties=self.props, wait=False)
        reply = await fut
        if reply[:4] != b"AM2m" or reply[8:12] != b"\0\0\0\0":
            raise AssertionError(f"echo failed: {reply[:40]!r}")
        return reply

    async def close(self) -> None:
        await self.conn.close()


async def run_calls(call: Any, count: int, in_flight: int) -> float:
    """Seconds to complete ``count`` calls with ``in_flight`` workers."""
    per, extra = divmod(count, in_flight)

    async def worker(n: int) -> None:
        for _ in range(n):
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(worker(per + (1 if i < extra else 0)) for i in range(in_flight)))
    return time.perf_counter() - start


async def bench(url: str, quick: bool, body_size: int, profile: str | None) -> dict[str, Any]:
    Session = import_session()
    from qmf_async.wire._values import ObjectId

    m_size, r_size = payload_sizes(body_size)
    counts = {1: 500 if quick else 2000, 1000: 5000 if quick else 20000}
    rounds = 1 if quick else 5
    bank = random.randrange(1 << 20, 1 << 27)
    raw_queue = f"bench-raw-echo-{os.getpid()}-{random.randrange(1 << 30)}"
    script = SCRIPT

    agent = Child(script, "qmf-agent", url, [bank])
    raw = Child(script, "raw-responder", url, [raw_queue])
    try:
        await asyncio.gather(agent.ready(), raw.ready())
        rawc = RawClient(url, raw_queue, b"x" * m_size)
        await rawc.open()
        qmfc = RawQmfClient(url, bank, body_size)
        await qmfc.open()
        session = Session(agent_interval=3600.0, broker_timeout=0.5, rcv_objects=False,
                          rcv_events=False, rcv_heartbeats=False)
        await session.add_broker(url)
        oid = ObjectId.make(sequence=1, broker_bank=BROKER_BANK, agent_bank=bank, object=1)
        (obj,) = await session.get_objects(_objectId=oid)
        body = "x" * body_size
        seqs = iter(range(1 << 40))

        async def ours() -> None:
            s = next(seqs) & 0xFFFFFFFF
            r = await obj.echo(s, body)
            if r.sequence != s:
                raise AssertionError("echo returned another sequence")

        check = await obj.echo(7, body)
        assert check.sequence == 7 and check.body == body, check
        assert (await rawc.call()) == rawc.payload
        await qmfc.call()

        # warm-up: both paths, both concurrency levels
        for fn in (rawc.call, ours, qmfc.call):
            await run_calls(fn, counts[1] // 10, 1)
            await run_calls(fn, counts[1000] // 10, 1000)

        results: dict[str, dict[int, list[dict[str, float]]]] = {
            "raw": {1: [], 1000: []}, "ours": {1: [], 1000: []}, "agent": {1: [], 1000: []}}
        for _ in range(rounds):
            for in_flight in (1, 1000):
                for name, fn, child in (("raw", rawc.call, raw), ("ours", ours, agent),
                                        ("agent", qmfc.call, agent)):
                    n = counts[in_flight]
                    with CpuMeter(child.pid) as cpu:
                        secs = await run_calls(fn, n, in_flight)
                    results[name][in_flight].append(
                        {"rate": n / secs, "seconds": secs,
                         **{f"cpu_us_{k}": v / n * 1e6 for k, v in cpu.used.items()}})

        prof_stats = None
        if profile:
            prof = cProfile.Profile(time.process_time)  # CPU time: robust to a busy machine
            prof.enable()
            await run_calls(ours, counts[1000] // 2, 1000)
            prof.disable()
            prof.dump_stats(profile)
            prof_stats = profile
        await session.close()
        await rawc.close()
        await qmfc.close()
    finally:
        agent.stop()
        raw.stop()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    def cpu_us(runs: list[dict[str, float]]) -> dict[str, float]:
        keys = [k for k in runs[0] if k.startswith("cpu_us_")]
        return {k[7:]: round(med([r[k] for r in runs]), 1) for k in keys}

    out: dict[str, Any] = {"benchmark": "echo", "quick": quick, "body_size": body_size,
                           "request_bytes": m_size, "reply_bytes_qmf": r_size,
                           "reply_bytes_raw": m_size, "rounds": rounds, "counts": counts,
                           "requests_per_amqp_message": 1, "machine": machine(),
                           "loadavg_after": os.getloadavg()}
    rows = []
    for in_flight in (1, 1000):
        raw_runs = results["raw"][in_flight]
        entry: dict[str, Any] = {}
        for name, label in (("raw", "raw aiormq <-> raw responder"),
                            ("ours", "Session <-> Agent (ours)"),
                            ("agent", "raw QMF client <-> Agent")):
            runs = results[name][in_flight]
            rates = [r["rate"] for r in runs]
            # ratio to raw per round (paired: same round, minutes apart at most), then median
            ratios = [r["rate"] / b["rate"] for r, b in zip(runs, raw_runs, strict=True)]
            cpu = cpu_us(runs)
            entry[name] = {"calls_per_s_median": round(med(rates), 1),
                           "calls_per_s_best": round(max(rates), 1),
                           "rates": [round(x, 1) for x in rates],
                           "ratio_to_raw_median": round(med(ratios), 3),
                           "ratios_to_raw": [round(x, 3) for x in ratios],
                           "cpu_us_per_call_median": cpu}
            rows.append([f"{label}, {in_flight} in flight", f"{med(rates):,.0f}",
                         f"{max(rates):,.0f}", f"{cpu['client']:.0f}", f"{cpu['responder']:.0f}",
                         f"{cpu['rabbitmq']:.0f}",
                         "" if name == "raw" else f"{med(ratios):.0%}"])
        ratio = entry["ours"]["ratio_to_raw_median"]
        entry["ratio"] = ratio
        entry["meets_floor"], entry["meets_goal"] = ratio >= FLOOR, ratio >= GOAL
        out[f"inflight_{in_flight}"] = entry
    if prof_stats:
        out["profile"] = prof_stats
    print(f"echo: body {body_size} B (M {m_size} B, m {r_size} B), one request per AMQP "
          f"message, median of {rounds} round(s); floor {FLOOR:.0%}, goal {GOAL:.0%}")
    print(table(rows, ["path", "calls/s (median)", "calls/s (best)", "client CPU us/call",
                       "responder CPU us/call", "rabbitmq CPU us/call", "vs raw"]))
    return out


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--body-size", type=int, default=100, help="echo body length in bytes")
    p.add_argument("--profile", help="write a cProfile of the client (1,000 in flight) here")
    args = p.parse_args()
    if args.role == "qmf-agent":
        asyncio.run(role_qmf_agent(args.url, int(args.arg[0])))
        return 0
    if args.role == "raw-responder":
        asyncio.run(role_raw_responder(args.url, args.arg[0]))
        return 0
    result = asyncio.run(bench(args.url, args.quick, args.body_size, args.profile))
    emit_json(result)
    if args.profile:
        pstats.Stats(args.profile, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
