"""Capture a genuine qpidd's QMF v2 traffic as golden data for the v2 codec tests.

Starts a stock qpidd (``--mgmt-qmf1 no``, publish interval 1 s) with scripts/qpidd.sh,
talks QMF v2 to it over AMQP 1.0 with a raw client (tests/qmf2_raw.py) and writes
one JSON line per message received (and per request sent) to
tests/data/qmf2/qpidd-1.40-v2.jsonl:

    {"label", "direction" ("sent"/"received"), "subject", "correlation_id",
     "application_properties", "message_b64" (the AMQP 1.0 encoded message)}

Run: PYTHONPATH=. .venv/bin/python scripts/capture_qmf2.py [OUT]
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmf_async.wire import decode_amqp10_message, encode_amqp10_message  # noqa: E402
from tests.qmf2_raw import RawV2Client  # noqa: E402
from tests.qpidd import Qpidd  # noqa: E402

OUT = ROOT / "tests" / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"
QUEUES = 105


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"binary_b64": base64.b64encode(bytes(value)).decode()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


class Recorder:
    def __init__(self, client: RawV2Client) -> None:
        self.client = client
        self.records: list[dict[str, Any]] = []
        self.taken_topic = 0

    def record(self, label: str, direction: str, raw: bytes) -> None:
        msg = decode_amqp10_message(raw)
        self.records.append({
            "label": label, "direction": direction, "subject": msg.subject,
            "correlation_id": jsonable(msg.correlation_id),
            "application_properties": jsonable(msg.application_properties),
            "message_b64": base64.b64encode(raw).decode()})

    def request(self, label: str, opcode: str, body: Any, *, keep: bool = True) -> list[Any]:
        """Send a request, wait for its last answer; returns the answers' messages."""
        client = self.client
        start = len(client.replies)
        raw_request = encode_amqp10_message(
            body, subject="broker", reply_to=client.reply_to, correlation_id=label,
            application_properties={"x-amqp-0-10.app-id": "qmf2", "qmf.opcode": opcode,
                                    "method": "request"}, body_kind="value")
        if keep:
            self.record(label, "sent", raw_request)
        client.send_encoded(raw_request)

        def done() -> bool:
            for raw in client.replies[start:]:
                msg = decode_amqp10_message(raw)
                if msg.correlation_id == label and "partial" not in msg.application_properties:
                    return True
            return False

        client.wait_for(done, f"answer to {label}")
        answers = []
        for raw in client.replies[start:]:
            msg = decode_amqp10_message(raw)
            if keep:
                self.record(label, "received", raw)
            answers.append(msg)
        return answers


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    broker = Qpidd.start(qmf1=False, pub_interval=1)
    try:
        client = RawV2Client("127.0.0.1", broker.port, topic_key="agent.ind.#")
        rec = Recorder(client)
        # broker object first: its id is what methods need
        answers = rec.request("query-broker", "_query_request",
                              {"_what": "OBJECT", "_schema_id": {"_class_name": "broker"}})
        broker_oid = answers[0].body[0]["_object_id"]
        for i in range(QUEUES):
            rec.request(f"create-queue-{i}", "_method_request", {
                "_object_id": broker_oid, "_method_name": "create",
                "_arguments": {"type": "queue", "name": f"v2cap-{i:03d}",
                               "properties": {}, "strict": True}}, keep=i == 0)
        rec.request("create-binding", "_method_request", {
            "_object_id": broker_oid, "_method_name": "create",
            "_arguments": {"type": "binding", "name": "amq.direct/v2cap-000/a:key",
                           "properties": {}, "strict": True}})
        rec.request("query-queue", "_query_request",
                    {"_what": "OBJECT", "_schema_id": {"_class_name": "queue"}})
        rec.request("query-exchange", "_query_request",
                    {"_what": "OBJECT", "_schema_id": {"_class_name": "exchange",
                                                       "_package_name":
                                                       "org.apache.qpid.broker"}})
        rec.request("query-binding", "_query_request",
                    {"_what": "OBJECT", "_schema_id": {"_class_name": "binding"}})
        rec.request("query-by-object-id", "_query_request",
                    {"_what": "OBJECT", "_object_id": broker_oid})
        rec.request("query-schema", "_query_request", {"_what": "SCHEMA_ID"})
        rec.request("query-no-what", "_query_request", {"_schema_id": {"_class_name": "queue"}})
        rec.request("method-echo", "_method_request", {
            "_object_id": broker_oid, "_method_name": "echo",
            "_arguments": {"sequence": 7, "body": "hello v2"}})
        rec.request("method-create-bad-type", "_method_request", {
            "_object_id": broker_oid, "_method_name": "create",
            "_arguments": {"type": "no-such-type", "name": "x", "properties": {},
                           "strict": True}})
        rec.request("method-unknown-object", "_method_request", {
            "_object_id": {"_object_name": "org.apache.qpid.broker:queue:no-such-queue"},
            "_method_name": "purge", "_arguments": {"request": 0}})
        rec.request("method-no-name", "_method_request", {"_object_id": broker_oid})
        rec.request("agent-locate", "_agent_locate_request", {})
        # broadcasts: heartbeats, data indications, events (the queue declares above)
        topic = client.topic
        assert topic is not None

        def key_of(raw: bytes) -> str:
            # agent.ind.<kind>.<package>.<class>... without the agent's instance
            return ".".join((decode_amqp10_message(raw).subject or "").split(".")[:5])

        want = {"agent.ind.heartbeat.apache_org.qpidd",
                "agent.ind.data.org_apache_qpid_broker.queue",
                "agent.ind.event.org_apache_qpid_broker.queueDeclare",
                "agent.ind.event.org_apache_qpid_broker.bind"}
        try:
            client.wait_for(lambda: want <= {key_of(raw) for raw in topic},
                            "heartbeat, data and events", timeout=30.0)
        except TimeoutError:
            print("seen:", {key_of(raw) for raw in topic}, file=sys.stderr)
            raise
        counts: dict[str, int] = {}
        for raw in topic:
            key = key_of(raw)
            counts[key] = counts.get(key, 0) + 1
            if counts[key] <= 2:
                rec.record("topic", "received", raw)
        print("topic messages by subject:", counts, file=sys.stderr)
        client.close()
    finally:
        broker.stop()
    with out.open("w") as fh:
        for r in rec.records:
            fh.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"{len(rec.records)} records -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
