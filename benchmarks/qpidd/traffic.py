"""Background traffic on a qpidd for the v2 benchmarks, by a plain blocking AMQP 1.0
client (``tests/amqp10_client.py``: the sans-I/O engine on a socket, no transport or
session of ours), until SIGTERM or ``--seconds``:

- messages to the benchmark queues through the anonymous relay (``to`` = the queue),
  ``--rate`` per second, round robin over ``--queues`` of them, so their statistics
  change between publications;
- ``--churn`` times per second a dynamic receiver attached and detached: qpidd raises
  ``queueDeclare``, ``subscribe``, ``unsubscribe`` and ``queueDelete`` events for it;
- with ``--fake-agent NAME``, a second QMF v2 agent: a heartbeat and one data
  indication of ``--fake-objects`` objects a second on ``qmf.default.topic``, with the
  application properties qpidd's own agent puts on its indications.

    python benchmarks/qpidd/traffic.py --port 5673 [--rate 500] [--queues 1000]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from qmf_async.transport._amqp10_engine import Source, Target  # noqa: E402
from qmf_async.wire import encode_amqp10_message  # noqa: E402
from tests.amqp10_client import BlockingClient, Receiver  # noqa: E402

TOPIC = "qmf.default.topic"
WIDGET_HASH = uuid.UUID(int=0x5EED)


class Traffic:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.sent = 0
        self.churned = 0
        self.fake_sent = 0
        self.next_queue = 0
        self.stopping = False
        self.tick = 0.05
        self.dynamic: list[Receiver] = []

    def run(self) -> None:
        o = self.opts
        conn = BlockingClient(f"127.0.0.1:{o.port}", timeout=10, container_id="bench-traffic")
        try:
            relay = conn.create_sender(None)  # the anonymous relay
            topic = conn.create_sender(TOPIC) if o.fake_agent else None
            t0 = time.monotonic()
            due_msgs = due_churn = 0.0
            next_fake = t0
            while not self.stopping and not (o.seconds and time.monotonic() - t0 >= o.seconds):
                now = time.monotonic()
                due_msgs += o.rate * self.tick
                while due_msgs >= 1 and conn.engine.can_send(relay.handle):
                    name = f"{o.prefix}{self.next_queue:05d}"
                    self.next_queue = (self.next_queue + 1) % o.queues
                    relay.send(encoded=encode_amqp10_message(
                        "x" * o.size, to=name, body_kind="value"), settled=True)
                    self.sent += 1
                    due_msgs -= 1
                due_msgs = min(due_msgs, o.rate)  # do not build up a backlog
                due_churn += o.churn * self.tick
                while due_churn >= 1:
                    name = conn._name("churn")
                    handle = conn.engine.attach_receiver(
                        name, Source(dynamic=True), Target(address=name), settled=True)
                    receiver = Receiver(conn, handle, name, 0)
                    conn.links[handle] = receiver
                    self.dynamic.append(receiver)
                    due_churn -= 1
                for receiver in [r for r in self.dynamic if r.attached]:
                    self.dynamic.remove(receiver)
                    conn.engine.detach(receiver.handle)
                    self.churned += 1
                if topic is not None and now >= next_fake \
                        and conn.engine.link_credit(topic.handle) > 1:
                    next_fake = now + 1.0
                    self.send_fake(topic)
                end = now + self.tick
                while not self.stopping and (left := end - time.monotonic()) > 0:
                    conn.pump(left)
        finally:
            conn.close()

    def send_fake(self, topic: Any) -> None:
        o = self.opts
        key = o.fake_agent.replace(".", "_").replace(":", ".")
        props = {"x-amqp-0-10.app-id": "qmf2", "method": "indication",
                 "qmf.agent": o.fake_agent}
        now_ns = int(time.time() * 1e9)
        beat = {"_values": {"_vendor": "bench.org", "_product": "fake", "heartbeat_interval": 1,
                            "timestamp": now_ns}}
        topic.send(beat, subject=f"agent.ind.heartbeat.{key}", settled=True,
                   properties=dict(props, **{"qmf.opcode": "_agent_heartbeat_indication"}))
        objs = [{"_object_id": {"_object_name": f"widget-{i}", "_agent_name": o.fake_agent},
                 "_schema_id": {"_package_name": "org.bench", "_class_name": "widget",
                                "_type": "_data", "_hash": WIDGET_HASH},
                 "_values": {"name": f"widget-{i}", "count": self.fake_sent * o.fake_objects + i},
                 "_update_ts": now_ns, "_create_ts": now_ns, "_delete_ts": 0}
                for i in range(o.fake_objects)]
        topic.send(objs, subject=f"agent.ind.data.org_bench.widget.{key}", settled=True,
                   properties=dict(props, **{"qmf.opcode": "_data_indication",
                                             "qmf.content": "_data"}))
        self.fake_sent += 1

    def stop(self) -> None:
        self.stopping = True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, default=500.0, help="messages per second")
    p.add_argument("--queues", type=int, default=1000, help="queues to spread them over")
    p.add_argument("--prefix", default="bench-q-")
    p.add_argument("--size", type=int, default=16, help="message body bytes")
    p.add_argument("--churn", type=float, default=2.0, help="dynamic receivers per second")
    p.add_argument("--fake-agent", default="", help="name of a second v2 agent to play")
    p.add_argument("--fake-objects", type=int, default=20)
    p.add_argument("--seconds", type=float, default=0.0, help="0: until SIGTERM")
    opts = p.parse_args()
    handler = Traffic(opts)
    signal.signal(signal.SIGTERM, lambda *_: handler.stop())
    handler.run()
    print(json.dumps({"sent": handler.sent, "churned": handler.churned,
                      "fake_indications": handler.fake_sent}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
