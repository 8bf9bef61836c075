"""The Agent's record bodies, without a broker: ``g``/``c``/``i`` bodies are built
from each object's cached property and statistics encodings and must be byte for byte
what the codec writes for ``obj.record(...)``; the caches must follow every change."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from qmf_async import ObjectId, wire
from qmf_async.agent import Agent, ManagedObject, Property, Statistic, object_class
from qmf_async.agent._objects import encode_records, snapshots

PKG = "org.qmfasync.records"
VHOST = ObjectId.make(sequence=1, broker_bank=1, agent_bank=0, object=2)

QUEUE = object_class(
    PKG, "queue",
    properties=[
        Property("vhostRef", "objId", index=True),
        Property("name", "sstr", index=True),
        Property("durable", "bool"),
        Property("note", "lstr", optional=True),
        Property("limit", "uint32", optional=True),
        Property("arguments", "map"),
    ],
    statistics=[Statistic("msgs", "uint64"), Statistic("depth", "uint32"),
                Statistic("rate", "double"), Statistic("id", "uuid")],
)
EXCHANGE = object_class(PKG, "exchange", properties=[Property("name", "sstr", index=True)],
                        statistics=[Statistic("routed", "uint64")])
FLAGS = object_class(PKG, "flags", properties=[Property("name", "sstr")])  # no statistics


class Sink:
    """An agent without a broker: its outgoing bodies, decoded."""

    def __init__(self, **options: Any) -> None:
        self.agent = Agent("amqp://unused/", schemas=[QUEUE, EXCHANGE, FLAGS], attach=False,
                           agent_bank=5, interval=3600.0, **options)
        self.bodies: list[tuple[str, bytes]] = []
        self.agent._enqueue = (  # type: ignore[method-assign]
            lambda out: self.bodies.append((out.key, out.body)))
        self.registry = wire.SchemaRegistry([QUEUE, EXCHANGE, FLAGS])
        self.seq = 100

    def queue(self, i: int, **values: Any) -> ManagedObject:
        base: dict[str, Any] = {"vhostRef": VHOST, "name": f"q{i}", "durable": i % 2 == 0,
                                "arguments": {"x-max": i, "policy": "ring"} if i % 3 else {},
                                "msgs": i * 1000, "depth": i, "rate": i / 4,
                                "id": uuid.UUID(int=i)}
        if i % 4 == 1:
            base["note"] = f"note ü {i}"
        base.update(values)
        return self.agent.create_object(QUEUE, **base)

    async def get(self, query: dict[str, Any] | None = None) -> list[Any]:
        """Ask for objects; every record of the answer, ``z`` last."""
        self.seq += 1
        self.bodies.clear()
        self.agent._handle(wire.GetQuery(self.seq, query or {"_package": PKG}), "amq.direct/me")
        while self.agent._tasks:
            await asyncio.gather(*list(self.agent._tasks))
        return [m for _, body in self.bodies for m in wire.decode(body, self.registry)]


def _expected(objs: list[ManagedObject], opcode: str, seq: int, ts: int,
              registry: wire.SchemaRegistry) -> bytes:
    return wire.encode([o.record(opcode, seq, ts) for o in objs], registry)


@pytest.mark.parametrize("opcodes", ["g", "c", "i", "ci"])
def test_record_bodies_are_what_the_codec_writes(opcodes: str) -> None:
    sink = Sink()
    objs = [sink.queue(i) for i in range(12)]
    objs.append(sink.agent.create_object(EXCHANGE, name="ex", routed=2**64 - 1))
    objs.append(sink.agent.create_object(FLAGS, name="f"))
    sink.agent.delete_object(objs[3])
    objs = [o for o in objs if "i" not in opcodes or o.schema.statistics]
    records = snapshots(opcodes, objs, sink.agent.registry)
    body = encode_records(sink.agent.registry, records, 77, 123456789)
    expected = wire.encode([o.record(op, 77, 123456789) for o in objs for op in opcodes],
                           sink.registry)
    assert body == expected


async def test_get_answers_are_byte_identical_small_and_streamed() -> None:
    sink = Sink()
    objs = [sink.queue(i) for i in range(60)]  # > 4 bodies of 11: streamed
    every = dict(sink.agent._objects)
    for count in (3, 60):
        served = objs[:count]
        sink.agent._objects = {o.object_id: every[o.object_id] for o in served}
        records = await sink.get()
        assert [m.OPCODE for m in records] == ["g"] * count + ["z"]
        ts = records[0].timestamp
        bodies = [b for _, b in sink.bodies]
        assert len(bodies) == (count + 10) // 11 + 1
        for k, body in enumerate(bodies[:-1]):
            assert body == _expected(served[11 * k:11 * k + 11], "g", sink.seq, ts, sink.registry)
        assert bodies[-1] == wire.encode(wire.CommandComplete(sink.seq))


async def test_a_set_property_is_in_the_next_answer() -> None:
    sink = Sink()
    q = sink.queue(1)
    (first, _) = await sink.get()
    assert first.properties_dict()["name"] == "q1" and "limit" not in first.properties_dict()
    q.set(name="renamed", limit=7)
    q.inc("msgs", 5)
    (second, _) = await sink.get()
    assert second.properties_dict()["name"] == "renamed"
    assert second.properties_dict()["limit"] == 7
    assert second.statistics_dict()["msgs"] == 1005
    q.set(note=None)
    (third, _) = await sink.get()
    assert "note" not in third.properties_dict()
    assert third == wire.decode(wire.encode(q.record("g", sink.seq, third.timestamp),
                                            sink.registry), sink.registry)[0]


async def test_a_map_changed_in_place_shows_once_set_again() -> None:
    sink = Sink()
    args: dict[str, Any] = {"a": 1}
    q = sink.queue(1, arguments=args)
    (first, _) = await sink.get()
    assert first.properties_dict()["arguments"] == {"a": 1}
    args["b"] = 2
    q.set(arguments=args)  # the same (equal) object: no ``c``, but a fresh encoding
    (second, _) = await sink.get()
    assert second.properties_dict()["arguments"] == {"a": 1, "b": 2}


async def test_renamed_references_are_in_the_next_answer() -> None:
    sink = Sink()
    q = sink.queue(1)
    await sink.get()
    new = ObjectId.make(sequence=2, broker_bank=1, agent_bank=0, object=3)
    q._rename_references({VHOST: new})
    (rec, _) = await sink.get()
    assert rec.properties_dict()["vhostRef"] == new


async def test_an_object_that_does_not_encode_loses_its_body_only(
        caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink()
    objs = [sink.queue(i) for i in range(30)]
    objs[13].set(limit=-1)  # not a uint32: the second body (objects 11..21) fails
    with caplog.at_level(logging.ERROR, logger="qmf_async.agent"):
        records = await sink.get()
    names = [m.properties_dict()["name"] for m in records[:-1]]
    assert names == [f"q{i}" for i in list(range(11)) + list(range(22, 30))]
    assert records[-1] == wire.CommandComplete(sink.seq)
    assert "cannot encode ggggggggggg: 'limit': -1 is out of range for I" in caplog.text
    objs[13].set(limit=1)
    assert len(await sink.get()) == 31


def test_publish_sends_c_and_i_records_as_the_codec_writes_them() -> None:
    sink = Sink()
    objs = [sink.queue(i) for i in range(3)]
    flag = sink.agent.create_object(FLAGS, name="f")
    sink.agent.publish_now()
    (hb_key, _), *rest = reversed(sink.bodies)
    assert hb_key.startswith("console.heartbeat.")
    (ts,) = {m.timestamp for _, body in rest for m in wire.decode(body, sink.registry)}
    by_key = dict(sink.bodies[:-1])
    assert by_key[f"console.obj.1.5.{PKG}.queue"] == wire.encode(
        [o.record(op, 0, ts) for o in objs for op in "ci"], sink.registry)
    assert by_key[f"console.obj.1.5.{PKG}.flags"] == wire.encode([flag.record("c", 0, ts)],
                                                                 sink.registry)
    # then only what changed
    sink.bodies.clear()
    objs[1].set(name="x")
    objs[2].inc("depth")
    sink.agent.delete_object(flag)
    sink.agent.publish_now()
    sent = [m for _, body in sink.bodies[:-1] for m in wire.decode(body, sink.registry)]
    assert [(m.OPCODE, m.object_id) for m in sent] == [
        ("c", objs[1].object_id), ("i", objs[2].object_id), ("c", flag.object_id)]
    assert sent[0].properties_dict()["name"] == "x" and sent[2].deleted == flag.deleted


async def test_statistics_encodings_follow_every_change() -> None:
    sink = Sink()
    q = sink.queue(2)
    (first, _) = await sink.get()
    assert first.statistics_dict()["msgs"] == 2000 and first.statistics_dict()["depth"] == 2
    (again, _) = await sink.get()  # from the cached encodings: the same values
    assert again.statistics_dict() == first.statistics_dict()
    q.inc("msgs", 7)
    (after_inc, _) = await sink.get()
    assert after_inc.statistics_dict()["msgs"] == 2007
    q.dec("depth")
    (after_dec, _) = await sink.get()
    assert after_dec.statistics_dict()["depth"] == 1
    q.set(rate=0.5, depth=9)
    (after_set, _) = await sink.get()
    assert after_set.statistics_dict()["rate"] == 0.5
    assert after_set.statistics_dict()["depth"] == 9
    assert after_set == wire.decode(wire.encode(q.record("g", sink.seq, after_set.timestamp),
                                                sink.registry), sink.registry)[0]


async def test_a_statistic_that_does_not_encode_loses_its_body_only(
        caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink()
    objs = [sink.queue(i) for i in range(30)]
    await sink.get()  # every encoding cached
    objs[2].set(depth=-1)  # not a uint32: the first body (objects 0..10) fails
    with caplog.at_level(logging.ERROR, logger="qmf_async.agent"):
        records = await sink.get()
    names = [m.properties_dict()["name"] for m in records[:-1]]
    assert names == [f"q{i}" for i in range(11, 30)]
    assert "'depth': -1 is out of range for I" in caplog.text
    objs[2].set(depth=3)
    records = await sink.get()
    assert len(records) == 31 and records[2].statistics_dict()["depth"] == 3
