"""The object view as a pure core (console/_view.py), like the protocol cores: records
and the time in, merged updates and completion requests out; no event loop, no
broker.  tests/test_object_view.py checks the same rules through a Session on the
scripted transport."""

from __future__ import annotations

import types
from typing import Any

from qmf_async import SessionOptions
from qmf_async.console._objects import Change
from qmf_async.console._view import Completion, ObjectView
from qmf_async.wire import (
    ObjectId,
    ObjectRecord,
    QmfType,
    RawObjectRecord,
    SchemaProperty,
    SchemaRegistry,
    SchemaStatistic,
    decode,
    encode,
)
from tests.fake_transport import object_schema

QUEUE = object_schema(
    "test.view", "queue",
    properties=[SchemaProperty("name", QmfType.SSTR, index=True)],
    statistics=[SchemaStatistic("depth", QmfType.UINT32)])
PLAIN = object_schema("test.view", "plain",
                      properties=[SchemaProperty("name", QmfType.SSTR, index=True)])
REGISTRY = SchemaRegistry([QUEUE, PLAIN])
BROKER = object()  # the view only tells broker connections apart
AGENT = types.SimpleNamespace(broker_bank=1, agent_bank=5)


def oid(n: int, agent_bank: int = 5) -> ObjectId:
    return ObjectId.make(sequence=1, broker_bank=1, agent_bank=agent_bank, object=n)


def rec(opcode: str, n: int, name: str = "q", depth: int = 0, *, deleted: int = 0,
        schema: Any = QUEUE, agent_bank: int = 5) -> RawObjectRecord:
    """One received record, as the console's core hands it on (decoded lazily)."""
    props = (f"{name}{n}",) if opcode in "cg" else None
    stats = (depth,) if opcode in "ig" and schema.statistics else None
    body = encode(ObjectRecord(opcode, 0, schema, 3, 2, deleted, oid(n, agent_bank),
                               props, stats))
    (raw,) = decode(body, REGISTRY, lazy=True)
    assert isinstance(raw, RawObjectRecord)
    return raw


class Sink:
    """What the view hands out: (opcode received, kind handed out, changes, values)."""

    def __init__(self) -> None:
        self.out: list[tuple[str, str, Change, dict[str, Any]]] = []

    def __call__(self, broker: Any, agent: Any, received: RawObjectRecord, raw: bytes,
                 sofs: int, kind: str, changed: Change) -> None:
        merged = RawObjectRecord(kind, 0, received.codec, raw, sofs)
        schema = received.codec.schema
        names = ([p.name for p in schema.properties] if kind != "i" else []) \
            + ([s.name for s in schema.statistics] if kind != "c" else [])
        values = {name: merged.get(name) for name in names}
        self.out.append((received.opcode, kind, changed, values))


def view(**settings: Any) -> tuple[ObjectView, Sink]:
    options = SessionOptions(**settings)
    sink = Sink()
    return ObjectView(types.SimpleNamespace(options=options), sink), sink


def test_a_c_then_an_i_complete_each_other_without_a_query() -> None:
    v, sink = view()
    completion = v.update(BROKER, AGENT, rec("c", 1), 0.0)
    assert isinstance(completion, Completion) and sink.out == []  # held: no statistics
    assert completion.query == {"_class": "queue", "_package": "test.view"}
    assert v.update(BROKER, AGENT, rec("i", 1, depth=7), 0.0) is None
    assert [(o, k) for o, k, _, _ in sink.out] == [("c", "g"), ("i", "g")]
    assert sink.out[1][3] == {"name": "q1", "depth": 7}
    assert v.start_round(completion, 0.0) == []  # nothing left to ask
    v.done(completion)
    assert v.completions == {} and v.completion_queries == 0


def test_statistics_first_wait_for_one_query_per_agent_and_class() -> None:
    v, sink = view()
    first = v.update(BROKER, AGENT, rec("i", 1, depth=1), 0.0)
    assert first is not None
    assert v.update(BROKER, AGENT, rec("i", 2, depth=2), 0.0) is None  # joins the batch
    keys = v.start_round(first, 0.0)
    assert [k[1] for k in keys] == [oid(1).raw, oid(2).raw] and v.completion_queries == 1
    # an update of a held object queues behind it
    v.update(BROKER, AGENT, rec("i", 1, depth=11), 0.0)
    v.answered(first, keys, [rec("g", 1, depth=1), rec("g", 2, depth=2),
                             rec("g", 3, depth=3)], 1.0)
    assert [(o, k, vals["depth"]) for o, k, _, vals in sink.out] == [
        ("i", "g", 1), ("i", "g", 11), ("i", "g", 2)]
    assert all(vals["name"].startswith("q") for *_, vals in sink.out)
    # the first update of each object carries the properties the query brought (a
    # console's object_props comes before its object_stats); later ones do not
    both = Change.PROPERTIES | Change.STATISTICS
    assert [c for _, _, c, _ in sink.out] == [both, Change.STATISTICS, both]
    # the third object of the answer is kept: its first update needs no query, and
    # announces its properties
    assert v.update(BROKER, AGENT, rec("i", 3, depth=30), 2.0) is None
    assert sink.out[-1][1:] == ("g", both, {"name": "q3", "depth": 30})
    assert v.update(BROKER, AGENT, rec("i", 3, depth=31), 3.0) is None
    assert sink.out[-1][1:] == ("g", Change.STATISTICS, {"name": "q3", "depth": 31})
    v.done(first)
    assert v.waiting == {} and v.completions == {}


def test_a_failed_completion_is_counted_and_not_retried_at_once() -> None:
    v, sink = view(completion_timeout=5.0)
    completion = v.update(BROKER, AGENT, rec("i", 1, depth=1), 0.0)
    assert completion is not None
    keys = v.start_round(completion, 0.0)
    v.answered(completion, keys, None, 1.0)
    v.done(completion)
    assert v.completion_failures == 1
    assert [(o, k) for o, k, _, _ in sink.out] == [("i", "i")]  # with what is known
    assert v.update(BROKER, AGENT, rec("i", 1, depth=2), 3.0) is None  # within 5 s
    assert v.update(BROKER, AGENT, rec("i", 1, depth=3), 6.5) is not None  # retried


def test_objects_without_statistics_or_agent_or_first_seen_deleted() -> None:
    v, sink = view()
    assert v.update(BROKER, AGENT, rec("c", 1, schema=PLAIN), 0.0) is None
    assert v.update(BROKER, None, rec("i", 2, depth=4), 0.0) is None  # agent unknown
    assert v.update(BROKER, AGENT, rec("g", 3, depth=1), 0.0) is None  # whole
    assert [k for _, k, _, _ in sink.out] == ["c", "i", "g"]
    held = v.update(BROKER, AGENT, rec("i", 4, deleted=9), 0.0)
    assert held is not None
    assert v.start_round(held, 0.0) == []  # no query for a deleted object
    assert sink.out[-1][2] == Change.STATISTICS | Change.DELETED
    assert v.completion_failures == 0


def test_eviction_deletion_and_departed_agents() -> None:
    v, sink = view(max_objects=2)
    for n in (1, 2, 3):
        v.update(BROKER, AGENT, rec("g", n), 0.0)
    assert [k[1] for k in v.latest] == [oid(2).raw, oid(3).raw] and v.objects_evicted == 1
    v.update(BROKER, AGENT, rec("c", 2, deleted=5), 0.0)
    assert [k[1] for k in v.latest] == [oid(3).raw]
    # the deletion's i answers what was known of the object
    v.update(BROKER, AGENT, rec("i", 2, deleted=5, depth=8), 0.0)
    assert sink.out[-1][1] == "g" and sink.out[-1][3] == {"name": "q2", "depth": 8}
    v.update(BROKER, AGENT, rec("g", 7, agent_bank=6), 0.0)
    v.forget_agent(BROKER, (1, 5))
    assert [k[1] for k in v.latest] == [oid(7, 6).raw]
    other = object()
    v.forget_agent(other, (1, 6))  # another connection's agent: nothing leaves
    assert len(v.latest) == 1
    v.unwatched()
    assert v.latest == {} and v.gone == {}


def test_deleted_objects_leave_nothing_behind() -> None:
    """Churn: a whole deletion (a ``g``, as QMF v2 publishes it) keeps no last view, and
    one in parts (``c``, ``i``) is remembered ``completion_timeout`` seconds only (at
    1e2a8ad every deleted object's last view stayed, up to 4,096)."""
    v, sink = view(completion_timeout=5.0)
    for n in range(100):
        v.update(BROKER, AGENT, rec("g", n, depth=n), 0.0)
        v.update(BROKER, AGENT, rec("g", n, depth=n, deleted=5), 0.0)
    assert v.latest == {} and v.gone == {} and len(sink.out) == 200
    v.update(BROKER, AGENT, rec("g", 200, depth=1), 1.0)
    v.update(BROKER, AGENT, rec("c", 200, deleted=5), 1.0)  # a deletion's first part
    assert len(v.gone) == 1
    v.update(BROKER, AGENT, rec("i", 200, depth=2, deleted=5), 2.0)  # answered
    assert sink.out[-1][1:] == ("g", Change.STATISTICS | Change.DELETED,
                                {"name": "q200", "depth": 2})
    for n in range(300, 310):  # first parts whose second never comes
        v.update(BROKER, AGENT, rec("g", n), 3.0)
        v.update(BROKER, AGENT, rec("c", n, deleted=5), 3.0)
    v.update(BROKER, AGENT, rec("g", 400), 9.0)
    v.update(BROKER, AGENT, rec("c", 400, deleted=5), 9.0)  # the older ones age out
    assert [k[1] for k in v.gone] == [oid(400).raw]
