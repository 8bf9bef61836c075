"""A raw AMQP 1.0 QMF v2 query, written the way a python-qpid-proton user would
(``Container`` + ``MessagingHandler``): the baseline of a v2 get_objects.

A sender to ``qmf.default.direct`` and a dynamic receiver for the answers.  Each query
is a ``_query_request`` (``_what`` OBJECT, class ``queue``) with subject ``broker``,
``x-amqp-0-10.app-id`` = ``qmf2``, a string correlation id and ``reply_to`` = the
dynamic receiver's address; qpidd answers in parts (lists of object maps, every part
but the last marked ``partial``).  Proton decodes each body (``Message.body``); the
objects are kept in one list until the last part, as a caller would get them.  Best
of ``--repeat``; prints one JSON line.

    python benchmarks/qpidd/raw_v2_query.py --port 5673 --qpidd-pid PID [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import proc_cpu  # noqa: E402


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Query(MessagingHandler):
    def __init__(self, port: int, qpidd_pid: int, repeat: int, cls: str) -> None:
        super().__init__(prefetch=1000)
        self.port = port
        self.qpidd_pid = qpidd_pid
        self.repeat = repeat
        self.cls = cls
        self.runs: list[dict[str, Any]] = []
        self.reply_to: str | None = None
        self.sender_ready = False
        self.error: str | None = None
        self.cid = 0

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(f"amqp://127.0.0.1:{self.port}",
                                            allowed_mechs="ANONYMOUS")
        self.sender = event.container.create_sender(self.conn, "qmf.default.direct")
        self.receiver = event.container.create_receiver(self.conn, None, dynamic=True)

    def on_link_opened(self, event: Any) -> None:
        link = event.link
        if link.name == self.receiver.name:
            self.reply_to = link.remote_source.address
        elif link.name == self.sender.name:
            self.sender_ready = True
        if self.reply_to and self.sender_ready and not self.cid:
            self.ask()

    def ask(self) -> None:
        self.cid += 1
        self.objects: list[Any] = []
        self.parts = 0
        self.c0, self.q0, self.t0 = self_cpu(), proc_cpu(self.qpidd_pid), time.monotonic()
        self.sender.send(Message(
            subject="broker", reply_to=self.reply_to, correlation_id=str(self.cid),
            properties={"x-amqp-0-10.app-id": "qmf2", "qmf.opcode": "_query_request",
                        "method": "request"},
            body={"_what": "OBJECT", "_schema_id": {"_class_name": self.cls}}))

    def on_message(self, event: Any) -> None:
        msg = event.message
        if msg.correlation_id != str(self.cid):
            return
        props = msg.properties or {}
        if props.get("qmf.opcode") != "_query_response":
            self.error = f"unexpected answer {props.get('qmf.opcode')}: {msg.body!r:.200}"
            self.conn.close()
            return
        self.objects.extend(msg.body)
        self.parts += 1
        if "partial" in props:
            return
        self.runs.append({"seconds": time.monotonic() - self.t0, "cpu": self_cpu() - self.c0,
                          "qpidd_cpu": proc_cpu(self.qpidd_pid) - self.q0,
                          "objects": len(self.objects), "parts": self.parts})
        self.objects = []
        if len(self.runs) < self.repeat:
            self.ask()
        else:
            self.conn.close()

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.error = f"transport error: {cond.name if cond else '?'}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--qpidd-pid", type=int, required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--expect", type=int, default=0)
    p.add_argument("--class", dest="cls", default="queue")
    opts = p.parse_args()
    q = Query(opts.port, opts.qpidd_pid, opts.repeat, opts.cls)
    Container(q).run()
    if q.error is not None or len(q.runs) < opts.repeat:
        print(f"raw_v2_query: {q.error or 'incomplete run'}", file=sys.stderr)
        return 1
    if min(r["objects"] for r in q.runs) < opts.expect:
        print(f"raw_v2_query: {min(r['objects'] for r in q.runs)} objects, expected "
              f">= {opts.expect}", file=sys.stderr)
        return 1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"client": "raw_v2", "runs": q.runs, "max_rss_kb": ru.ru_maxrss,
                      "cpu_user": ru.ru_utime, "cpu_sys": ru.ru_stime}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
