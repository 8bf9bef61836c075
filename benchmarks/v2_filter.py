"""QMF v2 indications with and without server-side filtering on a stock qpidd.

    python benchmarks/v2_filter.py [--queues 10000] [--seconds 8] [--json FILE] [--quick]
                                   [--only all] [--transports proton,native]

``--transports``: each subscription runs once per AMQP 1.0 transport (``QMF_AMQP10``),
interleaved in one run; the table gives the subscriber's CPU per object.

Starts a fresh qpidd (QMF v1 off, the stock default; ``--pub-interval`` 1 s), creates
the queues (pipelined 0-10 declares, ``benchmarks/qpidd/make_queues.py``), and keeps
traffic on it (``benchmarks/qpidd/traffic.py``: messages to the queues, dynamic
receivers attached and detached for events, and a second v2 agent ``bench.org:fake:1``
publishing a heartbeat and 20 objects a second).  Then, one after the other, each
subscription of ``VARIANTS`` runs for ``--seconds`` in its own process
(``benchmarks/qpidd/v2_subscriber.py``: ``NativeAmqp10Transport`` + ``ConsoleProtocolV2``):
messages, objects, events and socket bytes received, its CPU and qpidd's.

A binding key filters on the subject (qpidd's topic exchange); a selector
(``apache.org:selector-filter:string``) on the application properties ``qmf.agent``,
``qmf.content``, ``qmf.opcode``, ``method``.  ``subject_selector`` shows that qpidd
1.40's selectors do not see the subject of its own management messages.

Then (unless ``--no-session``, and when the Session speaks v2) the same window through
the Session: ``object_updates()`` and ``events()`` subscriptions, unfiltered and for
one class, which ask qpidd for what they follow (``SESSION_VARIANTS``); counted:
objects and events yielded, bytes, CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import (  # noqa: E402
    HERE,
    QpiddError,
    create_queues,
    session_takes,
)
from benchmarks.qpidd.v2 import V2Qpidd, last_json, run_measured  # noqa: E402

FAKE_AGENT = "bench.org:fake:1"
CLASS_KEY = "agent.ind.data.org_apache_qpid_broker.exchange.#"
#: (name, binding key, selector); ``{agent}`` is qpidd's agent name, found by locate
VARIANTS: list[tuple[str, str, str]] = [
    ("all", "agent.ind.#", ""),
    ("data_selector", "agent.ind.#", "qmf.content = '_data'"),
    ("class_key", CLASS_KEY, ""),
    ("subject_selector", "agent.ind.#",
     "amqp.subject LIKE 'agent.ind.data.org_apache_qpid_broker.exchange.%'"),
    ("qpidd_agent_selector", "agent.ind.#", "qmf.agent = '{agent}'"),
    ("fake_agent_selector", "agent.ind.#", f"qmf.agent = '{FAKE_AGENT}'"),
    ("events_key", "agent.ind.event.#", ""),
    ("events_selector", "agent.ind.#", "qmf.content = '_event'"),
    ("event_class_key", "agent.ind.event.org_apache_qpid_broker.queueDeclare.#", ""),
]

#: (name, --follow of the subscriber): the same broker through Session subscriptions
SESSION_VARIANTS: list[tuple[str, str]] = [
    ("session: everything", "all"),
    ("session: object_updates(_class='exchange')", "class"),
    ("session: events()", "events"),
    ("session: events(_class='queueDeclare')", "event_class"),
]


async def qpidd_agent_name(port: int) -> str:
    """qpidd's v2 agent name, from an agent locate.

    Raises:
        RuntimeError: no answer within 10 s.
    """
    from qmf_async.protocol import AgentArrived, ConsoleProtocolV2
    from qmf_async.transport import Delivery, NativeAmqp10Transport, open_reply_endpoint

    t = NativeAmqp10Transport(f"amqp://127.0.0.1:{port}/")
    await t.connect()
    core = ConsoleProtocolV2()
    names: list[str] = []

    def on_delivery(d: Delivery) -> None:
        for ev in core.receive(d.headers, d.value, subject=d.routing_key,
                               correlation_id=d.correlation_id, now=time.monotonic()):
            if isinstance(ev, AgentArrived) and ev.product == "qpidd":
                names.append(str(ev.agent))
    try:
        t.set_dispatcher(on_delivery)
        reply = await open_reply_endpoint(t)
        out = core.send_locate(time.monotonic())
        await t.publish(out.body, exchange=out.exchange, routing_key=out.key,
                        reply_to=reply, correlation_id=out.correlation_id, headers=out.headers)
        deadline = time.monotonic() + 10
        while not names:
            if time.monotonic() > deadline:
                raise RuntimeError("qpidd's agent did not answer the locate within 10 s")
            await asyncio.sleep(0.02)
    finally:
        await t.close()
    return names[0]


def subscribe(port: int, pid: int, key: str, selector: str, seconds: float,
              follow: str | None = None, transport: str = "native") -> dict[str, Any]:
    """One subscription in its own process (through the Session when ``follow``).

    Raises:
        RuntimeError: the subscriber failed.
    """
    cmd = [sys.executable, str(HERE / "v2_subscriber.py"), "--port", str(port),
           "--qpidd-pid", str(pid), "--key", key, "--selector", selector,
           "--seconds", str(seconds)]
    if follow is not None:
        cmd += ["--via", "session", "--follow", follow]
    env = dict(os.environ, PYTHONPATH=str(ROOT), QMF_AMQP10=transport)
    return last_json(run_measured(cmd, env=env, timeout=seconds + 60), f"subscriber {key}")


def report(results: list[dict[str, Any]]) -> str:
    base = next((r for r in results if r["name"] == "all"), None)
    header = ["subscription", "binding key", "selector", "msgs", "msgs/s", "objects", "events",
              "kB", "kB/s", "vs all", "our CPU s", "us/object", "qpidd CPU s"]
    rows = [header]
    for r in results:
        ratio = (f"{r['bytes'] / base['bytes']:.3f}" if base and base["bytes"] else "--")
        msgs = r.get("messages")
        rows.append([r["name"], r.get("key", "(Session)"), r.get("selector") or "-",
                     "--" if msgs is None else str(msgs),
                     "--" if msgs is None else f"{msgs / r['seconds']:.1f}",
                     str(r["objects"]), str(r["events"]),
                     f"{r['bytes'] / 1000:.0f}", f"{r['bytes'] / 1000 / r['seconds']:.1f}",
                     ratio, f"{r['cpu']:.3f}",
                     f"{1e6 * r['cpu'] / r['objects']:.1f}" if r["objects"] else "--",
                     f"{r['qpidd_cpu']:.2f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--seconds", type=float, default=8.0, help="per subscription")
    p.add_argument("--pub-interval", type=int, default=1)
    p.add_argument("--rate", type=float, default=500.0, help="traffic messages per second")
    p.add_argument("--churn", type=float, default=2.0, help="dynamic receivers per second")
    p.add_argument("--only", default="", help="comma-separated subset of the variants")
    p.add_argument("--no-session", dest="session", action="store_false",
                   help="skip the runs through the Session")
    p.add_argument("--quick", action="store_true", help="a smoke run: 200 queues, 2 s each")
    p.add_argument("--transports", default="native",
                   help="AMQP 1.0 transports (only the built-in one now: native)")
    p.add_argument("--json", type=Path)
    opts = p.parse_args()
    transports = opts.transports.split(",")
    if opts.quick:
        opts.queues, opts.seconds = 200, 2.0
    variants = [v for v in VARIANTS if not opts.only or v[0] in opts.only.split(",")]
    summary: dict[str, Any] = {
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_start": Path("/proc/loadavg").read_text().split()[:3]}}
    results: list[dict[str, Any]] = []
    traffic: subprocess.Popen[str] | None = None
    try:
        with V2Qpidd(qmf1=False, pub_interval=opts.pub_interval) as q:
            made = create_queues(q.port, opts.queues)
            summary["create_queues"] = made
            print(f"qpidd pid {q.pid} port {q.port}: {made['created']} queues in "
                  f"{made['seconds']:.2f} s", flush=True)
            agent = asyncio.run(qpidd_agent_name(q.port))
            summary["qpidd_agent"] = agent
            traffic = subprocess.Popen(
                [sys.executable, str(HERE / "traffic.py"), "--port", str(q.port),
                 "--rate", str(opts.rate), "--queues", str(min(opts.queues, 1000)),
                 "--churn", str(opts.churn), "--fake-agent", FAKE_AGENT],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT)))
            time.sleep(2 * opts.pub_interval)  # warm-up: traffic and publications running
            for name, key, selector in variants:
                sel = selector.format(agent=agent)
                for impl in transports:
                    r = subscribe(q.port, q.pid, key, sel, opts.seconds, transport=impl)
                    r["name"] = name if len(transports) == 1 else f"{name} [{impl}]"
                    results.append(r)
                    print(f"{r['name']}: {r['messages']} messages, {r['bytes']} bytes",
                          flush=True)
            if opts.session and session_takes("qmf_version"):
                for name, follow in SESSION_VARIANTS:
                    if opts.only and follow not in opts.only.split(","):
                        continue
                    for impl in transports:
                        r = subscribe(q.port, q.pid, "", "", opts.seconds, follow,
                                      transport=impl)
                        r["name"] = name if len(transports) == 1 else f"{name} [{impl}]"
                        results.append(r)
                        print(f"{r['name']}: {r['objects']} objects, {r['events']} events, "
                              f"{r['bytes']} bytes", flush=True)
            traffic.terminate()
            out, err = traffic.communicate(timeout=30)
            if traffic.returncode != 0:
                raise RuntimeError(f"traffic failed: {err.strip()[-500:]}")
            summary["traffic"] = json.loads(out.strip().splitlines()[-1])
    except QpiddError as exc:
        print(f"v2_filter: {exc}", file=sys.stderr)
        return 2
    finally:
        if traffic is not None and traffic.poll() is None:
            traffic.kill()
            traffic.communicate()
    summary["results"] = results
    summary["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    print(report(results))
    if opts.json:
        opts.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"results": [{k: r.get(k) for k in ("name", "messages", "bytes",
                                                          "objects", "events", "cpu")}
                                  for r in results],
                      "traffic": summary.get("traffic")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
