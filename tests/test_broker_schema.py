"""The management-broker role's own class is qpidd's, byte for byte (captures), and its
pure helpers behave (no broker needed)."""

from __future__ import annotations

import uuid

from qmf_async import wire
from qmf_async.agent.broker import AGENT_CLASS, ManagementBroker, derive_broker_id

from ._captures import load_records


def _captured_agent_schema() -> tuple[wire.SchemaResponse, bytes]:
    schemas = wire.SchemaRegistry()
    for rec in load_records():
        if rec["_file"] != "qpidd-1.40-qmf1.jsonl":
            continue
        messages = wire.decode(rec["_body"], schemas)
        schemas.learn(messages)  # in order, one registry
        for msg in messages:
            if isinstance(msg, wire.SchemaResponse) and msg.schema.class_key.name == "agent":
                return msg, rec["_body"]
    raise AssertionError("no s for org.apache.qpid.broker:agent in the capture")


def test_agent_class_is_qpidds() -> None:
    captured, body = _captured_agent_schema()
    assert AGENT_CLASS == captured.schema
    assert AGENT_CLASS.class_key.hash.hex() == "d9e7e6304319941e6685be8f8892f3a5"
    assert wire.encode(wire.SchemaResponse(captured.seq, AGENT_CLASS)) == body
    assert not AGENT_CLASS.statistics and not AGENT_CLASS.methods


def test_broker_id_derivation() -> None:
    url = "amqp://guest:guest@localhost:5672/"
    assert derive_broker_id(url) == derive_broker_id("amqp://other:secret@LOCALHOST:5672/%2F")
    assert derive_broker_id(url) != derive_broker_id("amqp://localhost:5672/vh")
    assert derive_broker_id(url) != derive_broker_id("amqp://localhost:5673/")
    assert ManagementBroker(url).broker_id == derive_broker_id(url)
    given = uuid.uuid4()
    mb = ManagementBroker(url, broker_id=given, interval=2.0)
    assert mb.broker_id == given and mb.agent_timeout == 6.0 and mb.bank_grace == 12.0
    assert mb.agent_key == "agent.1.0"
