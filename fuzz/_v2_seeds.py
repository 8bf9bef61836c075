"""QMF v2 messages made with the project's value types: the seeds of the ``v2``
target, besides the real qpidd 1.40 messages of ``tests/data/qmf2``."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

from qmf_async.wire import (
    V2AgentHeartbeat,
    V2AgentLocateRequest,
    V2AgentLocateResponse,
    V2Data,
    V2DataIndication,
    V2Event,
    V2EventIndication,
    V2Exception,
    V2Message,
    V2MethodRequest,
    V2MethodResponse,
    V2ObjectId,
    V2QueryRequest,
    V2QueryResponse,
    V2SchemaId,
    V2UnknownMessage,
)

GOLDEN = Path(__file__).parents[1] / "tests" / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"
BROKER = "org.apache.qpid.broker"


def messages() -> list[V2Message]:
    """One or more of each v2 message kind, with every value type in their maps."""
    oid = V2ObjectId(f"{BROKER}:queue:q1", "apache.org:qpidd:1", 3)
    sid = V2SchemaId(BROKER, "queue", "_data", uuid.UUID(int=42))
    values = {"name": "q1", "depth": 5, "ratio": 0.25, "durable": True, "blob": b"\x00\xff",
              "none": None, "id": uuid.UUID(int=1), "nested": {"a": [1, "b", {"c": -1}]},
              "big": 2**63 - 1, "neg": -(2**31)}
    data = V2Data(values, oid, sid, 30, 10, 0)
    event = V2Event(V2SchemaId(BROKER, "queueDeclare", "_event", b"\x01" * 16),
                    {"qName": "q1", "durable": False}, 123, 6)
    return [
        V2QueryRequest("OBJECT", None, V2SchemaId("", "queue"), None, "c1"),
        V2QueryRequest("OBJECT", ["and", ["eq", "name", ["quote", "q1"]],
                                  ["exists", "depth"]], sid, oid, "c2"),
        V2QueryRequest("SCHEMA_ID", None, None, None, "c3"),
        V2QueryResponse([data, data], True, "broker", "_data", "c4"),
        V2QueryResponse([{"_package_name": BROKER, "_class_name": "queue"}], False,
                        "broker", "_schema_id", "c5"),
        V2MethodRequest(oid, "purge", {"request": 0}, None, "c6"),
        V2MethodRequest(V2ObjectId("amqp-broker"), "echo", {"body": "x", "sequence": 1},
                        {"body": "str"}, "c7"),
        V2MethodResponse({"sequence": 1, "body": b"x"}, None, "broker", "c8"),
        V2Exception({"error_code": 7, "error_text": "boom"}, "broker", "c9"),
        V2AgentLocateRequest({}, "c10"),
        V2AgentLocateRequest({"_what": "AGENT", "_where": ["eq", "_vendor", ["quote", "x"]]}),
        V2AgentLocateResponse("apache.org:qpidd:1", {"_epoch": 2, "_vendor": "apache.org",
                                                     "_heartbeat_interval": 10}, "c11"),
        V2AgentHeartbeat("vendor:product:inst", {"_timestamp": 5, "_heartbeat_interval": 10,
                                                 "_name": "vendor:product:inst"}),
        V2DataIndication([data], "apache.org:qpidd:1"),
        V2EventIndication([event, event], "apache.org:qpidd:1"),
        V2UnknownMessage("_subscribe_request", {"qmf.opcode": "_subscribe_request", "x": 1},
                         {"_query": {}}, None, "c12"),
    ]


def golden() -> list[bytes]:
    """The AMQP 1.0 messages qpidd 1.40 sent and received in the v2 capture."""
    out = []
    with GOLDEN.open() as fh:
        for line in fh:
            if line.strip():
                out.append(base64.b64decode(json.loads(line)["message_b64"]))
    return out
