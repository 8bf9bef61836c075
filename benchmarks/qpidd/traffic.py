"""Background traffic on a qpidd for the v2 benchmarks, written as a python-qpid-proton
user would (``Container`` + ``MessagingHandler``), until SIGTERM or ``--seconds``:

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
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

TOPIC = "qmf.default.topic"
WIDGET_HASH = uuid.UUID(int=0x5EED)


class Traffic(MessagingHandler):
    def __init__(self, opts: argparse.Namespace) -> None:
        super().__init__()
        self.opts = opts
        self.sent = 0
        self.churned = 0
        self.fake_sent = 0
        self.next_queue = 0
        self.stopping = False
        self.tick = 0.05
        self.dynamic: set[Any] = set()

    def on_start(self, event: Any) -> None:
        o = self.opts
        self.container = event.container
        self.conn = event.container.connect(f"amqp://127.0.0.1:{o.port}",
                                            allowed_mechs="ANONYMOUS")
        self.relay = event.container.create_sender(self.conn, None)
        self.topic = event.container.create_sender(self.conn, TOPIC) if o.fake_agent else None
        self.t0 = time.monotonic()
        self.due_msgs = 0.0
        self.due_churn = 0.0
        self.next_fake = self.t0
        event.container.schedule(self.tick, self)

    def on_timer_task(self, event: Any) -> None:
        o = self.opts
        now = time.monotonic()
        if self.stopping or (o.seconds and now - self.t0 >= o.seconds):
            self.conn.close()
            return
        self.due_msgs += o.rate * self.tick
        while self.due_msgs >= 1 and self.relay.credit > 0:
            name = f"{o.prefix}{self.next_queue:05d}"
            self.next_queue = (self.next_queue + 1) % o.queues
            self.relay.send(Message(address=name, body="x" * o.size, durable=False))
            self.sent += 1
            self.due_msgs -= 1
        self.due_msgs = min(self.due_msgs, o.rate)  # do not build up a backlog
        self.due_churn += o.churn * self.tick
        while self.due_churn >= 1:
            self.dynamic.add(self.container.create_receiver(self.conn, None, dynamic=True))
            self.due_churn -= 1
        if self.topic is not None and now >= self.next_fake and self.topic.credit > 1:
            self.next_fake = now + 1.0
            self.send_fake()
        self.container.schedule(self.tick, self)

    def on_link_opened(self, event: Any) -> None:
        link = event.link
        if link in self.dynamic:
            self.dynamic.discard(link)
            link.close()
            self.churned += 1

    def send_fake(self) -> None:
        o = self.opts
        topic = self.topic
        assert topic is not None
        key = o.fake_agent.replace(".", "_").replace(":", ".")
        props = {"x-amqp-0-10.app-id": "qmf2", "method": "indication",
                 "qmf.agent": o.fake_agent}
        now_ns = int(time.time() * 1e9)
        beat = {"_values": {"_vendor": "bench.org", "_product": "fake", "heartbeat_interval": 1,
                            "timestamp": now_ns}}
        topic.send(Message(body=beat, subject=f"agent.ind.heartbeat.{key}",
                                properties=dict(props, **{
                                    "qmf.opcode": "_agent_heartbeat_indication"})))
        objs = [{"_object_id": {"_object_name": f"widget-{i}", "_agent_name": o.fake_agent},
                 "_schema_id": {"_package_name": "org.bench", "_class_name": "widget",
                                "_type": "_data", "_hash": WIDGET_HASH},
                 "_values": {"name": f"widget-{i}", "count": self.fake_sent * o.fake_objects + i},
                 "_update_ts": now_ns, "_create_ts": now_ns, "_delete_ts": 0}
                for i in range(o.fake_objects)]
        topic.send(Message(body=objs, subject=f"agent.ind.data.org_bench.widget.{key}",
                                properties=dict(props, **{"qmf.opcode": "_data_indication",
                                                          "qmf.content": "_data"})))
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
    Container(handler).run()
    print(json.dumps({"sent": handler.sent, "churned": handler.churned,
                      "fake_indications": handler.fake_sent}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
