"""A raw AMQP 1.0 request/reply client for qpidd's QMF v1 broker agent, written the
way a python-qpid-proton user would (``Container`` + ``MessagingHandler``), with the
project's v1 codec for the bodies.  The baseline for ``ours`` over AMQP 1.0.

Setup (untimed): ``Q`` for the broker package, ``S`` for the broker class, ``G`` for
the broker object (its id).  Then the broker's ``echo`` method (``M`` to
``agent.1.0``) 1 in flight and W in flight, each for S seconds; replies are matched by
the sequence number of the ``m`` header.  Prints one JSON line.

    python benchmarks/qpidd/raw_proton.py --port 5673 --qpidd-pid PID
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:  # the baseline needs python-qpid-proton, which no extra installs
    from proton import Described, Message, symbol
    from proton.handlers import MessagingHandler
    from proton.reactor import Container, Filter
except ImportError:
    if __name__ == "__main__":
        print("unavailable")  # qpidd_compare.py leaves this client out
        sys.exit(0)
    raise

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import proc_cpu  # noqa: E402
from qmf_async import wire  # noqa: E402

PACKAGE = "org.apache.qpid.broker"
BODY = "qmf-bench-echo"
DIRECT_FILTER = symbol("apache.org:legacy-amqp-direct-binding:string")


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Client(MessagingHandler):
    """Runs the steps in order on proton's event loop; each step sends requests and
    handles replies until it calls :meth:`next_step`."""

    def __init__(self, port: int, qpidd_pid: int, seconds: float, window: int) -> None:
        super().__init__(prefetch=max(1000, 2 * window))
        self.port = port
        self.qpidd_pid = qpidd_pid
        self.seconds = seconds
        self.window = window
        self.key = f"raw-{uuid.uuid4().hex[:12]}"
        self.schemas = wire.SchemaRegistry()
        self.seq = 0
        self.result: dict[str, Any] = {"client": "raw_proton"}
        self.error: str | None = None
        self.steps: list[Callable[[], None]] = [self.ask_classes, self.ask_schema,
                                                self.ask_broker, self.echo_one,
                                                self.echo_window]
        self.on_reply: Callable[[list[Any]], None] = lambda msgs: None
        self.links_up = 0

    # --- plumbing -------------------------------------------------------------------
    def on_start(self, event: Any) -> None:
        self.t_connect = time.monotonic()
        self.conn = event.container.connect(f"amqp://127.0.0.1:{self.port}",
                                            allowed_mechs="ANONYMOUS")
        self.sender = event.container.create_sender(self.conn, "qpid.management")
        self.receiver = event.container.create_receiver(
            self.conn, "amq.direct",
            options=Filter({symbol("direct"): Described(DIRECT_FILTER, self.key)}))
        self.container = event.container

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver or event.link.is_sender:
            self.links_up += 1
        if self.links_up == 2:
            self.result["connect_seconds"] = time.monotonic() - self.t_connect
            self.next_step()

    def next_step(self) -> None:
        if not self.steps:
            self.conn.close()
            return
        self.steps.pop(0)()

    def send(self, body: bytes, subject: str) -> None:
        self.sender.send(Message(body=body, inferred=True, subject=subject,
                                 content_type="x-application/qmf",
                                 reply_to=f"amq.direct/{self.key}"))

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def on_message(self, event: Any) -> None:
        body = event.message.body
        self.on_reply(wire.decode(bytes(body), self.schemas))

    def fail(self, why: str) -> None:
        self.error = why
        self.conn.close()

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.error = f"transport error: {cond.name if cond else '?'}: " \
                     f"{cond.description if cond else ''}"

    # --- setup: the broker class's schema and the broker object's id -----------------
    def ask_classes(self) -> None:
        seq = self.next_seq()
        found: list[wire.ClassKey] = []

        def reply(msgs: list[Any]) -> None:
            for m in msgs:
                if isinstance(m, wire.ClassIndication) and m.class_key.name == "broker":
                    found.append(m.class_key)
                elif isinstance(m, wire.CommandComplete) and m.seq == seq:
                    if not found:
                        return self.fail("no broker class in the broker package")
                    self.broker_class = found[0]
                    self.next_step()
        self.on_reply = reply
        self.send(wire.encode(wire.ClassQuery(seq, PACKAGE)), "broker")

    def ask_schema(self) -> None:
        seq = self.next_seq()

        def reply(msgs: list[Any]) -> None:
            if self.schemas.learn(msgs) and self.broker_class in self.schemas:
                self.next_step()
        self.on_reply = reply
        self.send(wire.encode(wire.SchemaRequest(seq, self.broker_class)), "broker")

    def ask_broker(self) -> None:
        seq = self.next_seq()
        found: list[Any] = []

        def reply(msgs: list[Any]) -> None:
            for m in msgs:
                if isinstance(m, wire.ObjectRecord) and m.seq == seq:
                    found.append(m)
                elif isinstance(m, wire.CommandComplete) and m.seq == seq:
                    if not found:
                        return self.fail("no broker object")
                    self.object_id = found[0].object_id.raw
                    self.write_echo = self.schemas.request_writer(self.broker_class, "echo")
                    self.next_step()
        self.on_reply = reply
        self.send(wire.encode(wire.GetQuery(seq, {"_class": "broker", "_package": PACKAGE})),
                  "broker")

    # --- the measured echo runs ------------------------------------------------------
    def start_run(self, name: str, window: int) -> None:
        self.run_name = name
        self.run_window = window
        self.pending: set[int] = set()
        self.calls = 0
        self.failed = 0
        self.sending = True
        self.c0, self.q0, self.t0 = self_cpu(), proc_cpu(self.qpidd_pid), time.monotonic()
        self.on_reply = self.echo_reply
        self.container.schedule(self.seconds, self)  # on_timer_task stops sending
        self.fill()

    def on_timer_task(self, event: Any) -> None:
        self.sending = False
        if not self.pending:
            self.end_run()

    def fill(self) -> None:
        while self.sending and len(self.pending) < self.run_window and self.sender.credit > 0:
            seq = self.next_seq()
            self.pending.add(seq)
            self.send(self.write_echo(seq, self.object_id, {"sequence": seq, "body": BODY}),
                      "agent.1.0")

    def on_sendable(self, event: Any) -> None:
        if getattr(self, "on_reply", None) == self.echo_reply:
            self.fill()

    def echo_reply(self, msgs: list[Any]) -> None:
        for m in msgs:
            if isinstance(m, (wire.MethodResponse, wire.CommandComplete)) \
                    and m.seq in self.pending:
                self.pending.discard(m.seq)
                self.calls += 1
                status = m.status if isinstance(m, wire.MethodResponse) else m.code
                if status != 0:
                    self.failed += 1
        if self.sending:
            self.fill()
        elif not self.pending:
            self.end_run()

    def end_run(self) -> None:
        seconds = time.monotonic() - self.t0
        self.on_reply = lambda msgs: None
        self.result[self.run_name] = {
            "seconds": seconds, "calls": self.calls, "rate": self.calls / seconds,
            "window": self.run_window, "failed": self.failed,
            "cpu": self_cpu() - self.c0, "qpidd_cpu": proc_cpu(self.qpidd_pid) - self.q0}
        self.next_step()

    def echo_one(self) -> None:
        self.start_run("echo_1", 1)

    def echo_window(self) -> None:
        self.start_run("echo_window", self.window)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--qpidd-pid", type=int, required=True)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--window", type=int, default=1000)
    opts = p.parse_args()
    client = Client(opts.port, opts.qpidd_pid, opts.seconds, opts.window)
    Container(client).run()
    if client.error is not None or "echo_window" not in client.result:
        print(f"raw_proton: {client.error or 'incomplete run'}", file=sys.stderr)
        return 1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    client.result.update(max_rss_kb=ru.ru_maxrss, cpu_user=ru.ru_utime, cpu_sys=ru.ru_stime)
    print(json.dumps(client.result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
