"""The Parquet collector (qmf_async.tools.collector) and ``qmf collect``.

Unit tests feed the collector proxies built from records encoded and decoded with
``qmf_async.wire`` (no network), through a fake session with real Subscriptions.
The integration tests collect from the demo agent and the management-broker role on
the real RabbitMQ, on a vhost of their own when rabbitmqctl can make one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("pyarrow")  # a guard only: CI installs the collector extra

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from qmf_async import (
    SEVERITY_NAMES,
    Change,
    Event,
    ObjectId,
    QmfObject,
    RemoteAgent,
    Session,
    Subscription,
    UsageError,
    wire,
)
from qmf_async.agent import Arg, Property, Statistic, event_class, object_class
from qmf_async.agent.broker import ManagementBroker
from qmf_async.tools import collector as collector_mod
from qmf_async.tools.collector import (
    EVENT_COLUMNS,
    SAMPLE_COLUMNS,
    Collector,
    CollectorStats,
    event_row,
    events_schema,
    sample_row,
    samples_schema,
    to_text,
)

from ._util import import_example, private_vhost, wait_until

ROOT = Path(__file__).resolve().parent.parent
PKG = "com.example.collector"
U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1

ALL_TYPES = object_class(
    PKG, "everything",
    properties=[
        Property("name", "sstr", index=True), Property("u8", "uint8"),
        Property("u16", "uint16"), Property("u32", "uint32"), Property("u64", "uint64"),
        Property("i8", "int8"), Property("i16", "int16"), Property("i32", "int32"),
        Property("i64", "int64"), Property("long", "lstr"), Property("at", "absTime"),
        Property("dt", "deltaTime"), Property("ref", "objId"), Property("on", "bool"),
        Property("f", "float"), Property("d", "double"), Property("id", "uuid"),
        Property("m", "map"), Property("l", "list"), Property("a", "array"),
        Property("opt", "sstr", optional=True),
    ],
    statistics=[
        Statistic("s_u64", "uint64"), Statistic("s_big", "uint64"), Statistic("s_i64", "int64"),
        Statistic("s_u32", "uint32"), Statistic("s_flag", "bool"), Statistic("s_f", "float"),
        Statistic("s_d", "double"), Statistic("s_str", "sstr"), Statistic("s_at", "absTime"),
        Statistic("s_ref", "objId"), Statistic("s_id", "uuid"), Statistic("s_m", "map"),
    ],
)
WIDGET = object_class(PKG, "widget", properties=[Property("name", "sstr", index=True)],
                      statistics=[Statistic("count", "uint64")])
# the same class with another schema (another hash): schema evolution
WIDGET_V2 = object_class(PKG, "widget", properties=[Property("name", "sstr", index=True),
                                                    Property("colour", "sstr")],
                         statistics=[Statistic("count", "uint64"),
                                     Statistic("ratio", "double")])
ALARM = event_class(PKG, "alarm", [Arg("what", "sstr"), Arg("level", "uint32"),
                                   Arg("where", "objId"), Arg("extra", "map")])
REGISTRY = wire.SchemaRegistry([ALL_TYPES, WIDGET, WIDGET_V2, ALARM])

OID = ObjectId.make(flags=0, sequence=7, broker_bank=1, agent_bank=42, object=4242)
T0 = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
DAY = "2023-11-14"


def _roundtrip(*messages: Any) -> list[Any]:
    """Messages encoded and decoded again: what a console receives."""
    return wire.decode(wire.encode(list(messages), REGISTRY), REGISTRY)


def _proxy(rec: wire.ObjectRecord, agent: RemoteAgent | None = None) -> QmfObject:
    return QmfObject(None, None, agent, rec.schema, rec.object_id, rec.properties,
                     rec.statistics, (rec.timestamp, rec.created, rec.deleted))


def _all_types_props(ts: int = T0) -> wire.ObjectRecord:
    props = ("thing", 255, 65535, 4294967295, U64_MAX, -128, -32768, -(1 << 31), -(1 << 63),
             "long text é", ts, 1_500, OID, True, 0.5, -2.25, uuid.UUID(int=1),
             {"k": 1, "nested": {"id": uuid.UUID(int=9), "flag": False}, "s": "x"},
             [1, "two", 3.5, None], wire.WireArray([1, 2, 3]), None)
    return wire.ObjectRecord("c", 0, ALL_TYPES, ts, ts - 10, 0, OID, properties=props)


def _all_types_stats(ts: int = T0, deleted: int = 0) -> wire.ObjectRecord:
    stats = (12, U64_MAX, -5, 7, True, 1.5, float("inf"), "running", ts, OID,
             uuid.UUID(int=2), {"a": [1, 2]})
    return wire.ObjectRecord("i", 0, ALL_TYPES, ts, ts - 10, deleted, OID, statistics=stats)


def _widget(n: int, *, kind: str = "i", ts: int = T0, count: int = 0, obj: int = 1,
            schema: Any = WIDGET, seq: int = 1) -> QmfObject:
    oid = ObjectId.make(sequence=seq, broker_bank=1, agent_bank=5, object=obj)
    if kind == "c":
        props = (f"w{obj}",) if schema is WIDGET else (f"w{obj}", "red")
        rec = wire.ObjectRecord("c", 0, schema, ts + n, ts, 0, oid, properties=props)
    else:
        stats = (count,) if schema is WIDGET else (count, 0.25)
        rec = wire.ObjectRecord("i", 0, schema, ts + n, ts, 0, oid, statistics=stats)
    (decoded,) = _roundtrip(rec)
    return _proxy(decoded)


def _event(ts: int = T0, level: int = 3) -> Event:
    msg = wire.EventIndication(0, ALARM, ts, 4, {"what": "hot", "level": level, "where": OID,
                                                 "extra": {"t": 1.5, "b": b"\xffraw"}})
    (decoded,) = _roundtrip(msg)
    agent = RemoteAgent(None, 1, 42, "lbl", "amqp://host:5672/%2F")  # type: ignore[arg-type]
    return Event(decoded.schema.class_key, decoded.timestamp, decoded.severity,
                 dict(decoded.arguments), agent, decoded.schema)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _finished(root: Path) -> list[Path]:
    """The dataset's finished files: not the ``.<name>.tmp`` of a write in progress,
    which ``_files`` sees too."""
    return [p for p in _files(root) if not p.name.startswith(".")]


def _read(root: Path, table: str) -> list[dict[str, Any]]:
    path = root / table
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = ds.dataset(path, format="parquet",
                                            partitioning="hive").to_table().to_pylist()
    return rows


def _as_dict(pairs: Any) -> dict[str, Any]:
    return dict(pairs) if pairs is not None else {}


class FakeSession:
    """What a Collector uses of a Session: the three subscriptions (``console`` is kept
    to check that the collector leaves it alone); ``publish`` does what Session does
    for an update (callback, then subscription)."""

    def __init__(self, console: Any = None) -> None:
        self.console = console
        self.updates: Subscription[QmfObject] | None = None
        self.event_sub: Subscription[Event] | None = None
        self.agent_sub: Subscription[tuple[str, Any]] | None = None

    def agent_changes(self, **kw: Any) -> Subscription[tuple[str, Any]]:
        self.agent_sub = Subscription(kw.get("maxsize", 1000))
        return self.agent_sub

    def change(self, kind: str, agent: Any) -> None:
        """An agent arrived (``added``) or left (``removed``)."""
        assert self.agent_sub is not None
        self.agent_sub.deliver((kind, agent))

    def object_updates(self, **kw: Any) -> Subscription[QmfObject]:
        self.updates = Subscription(kw.get("maxsize", 10_000))
        return self.updates

    def events(self, **kw: Any) -> Subscription[Event]:
        self.event_sub = Subscription(kw.get("maxsize", 10_000))
        return self.event_sub

    def publish(self, obj: QmfObject, kind: str) -> None:
        name = "object_props" if kind == "c" else "object_stats"
        fn = getattr(self.console, name, None)
        if fn is not None:
            fn(None, obj)
        assert self.updates is not None
        self.updates.deliver(obj)

    def publish_event(self, ev: Event) -> None:
        assert self.event_sub is not None
        self.event_sub.deliver(ev)


@contextlib.asynccontextmanager
async def running(collector: Collector) -> AsyncIterator[asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.ensure_future(collector.run(stop))
    await wait_until(lambda: collector.session.updates is not None, message="subscribed")
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


# --------------------------------------------------------------------------- conversion


def test_to_text_of_every_value_type() -> None:
    assert to_text("é x") == "é x"
    assert to_text(0) == "0" and to_text(U64_MAX) == "18446744073709551615"
    assert to_text(-(1 << 63)) == "-9223372036854775808"
    assert to_text(True) == "true" and to_text(False) == "false"
    assert to_text(0.1) == "0.1" and to_text(1e300) == "1e+300"
    assert to_text(float("nan")) == "NaN"
    assert to_text(float("inf")) == "Infinity" and to_text(float("-inf")) == "-Infinity"
    assert to_text(OID) == "0-7-1-42-4242"
    assert to_text(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert to_text(b"abc") == "abc" and to_text(b"\xff") == "\\xff"
    assert to_text({}) == "{}" and to_text([]) == "[]"
    text = to_text({"a": 1, "b": [True, None, 2.5, "s"], "r": OID, "u": uuid.UUID(int=3),
                    "raw": b"x", "big": U64_MAX})
    assert json.loads(text) == {"a": 1, "b": [True, None, 2.5, "s"], "r": "0-7-1-42-4242",
                                "u": "00000000-0000-0000-0000-000000000003", "raw": "x",
                                "big": U64_MAX}
    assert to_text(wire.Typed(3, 17)) == "17"
    embedded = wire.ObjectValue(WIDGET, ("w", ), (5,))
    assert json.loads(to_text(embedded)) == {"class": f"{PKG}:widget",
                                             "properties": {"name": "w"},
                                             "statistics": {"count": 5}}


def test_sample_row_of_properties_has_every_type_as_text() -> None:
    (rec,) = _roundtrip(_all_types_props())
    agent = RemoteAgent(None, 1, 42, "", "amqp://h:5672/%2F")  # type: ignore[arg-type]
    row = sample_row(_proxy(rec, agent), "c", received_ts=T0 + 99)
    assert tuple(row) == SAMPLE_COLUMNS
    assert row["props"] == {
        "name": "thing", "u8": "255", "u16": "65535", "u32": "4294967295",
        "u64": "18446744073709551615", "i8": "-128", "i16": "-32768", "i32": "-2147483648",
        "i64": "-9223372036854775808", "long": "long text é", "at": str(T0), "dt": "1500",
        "ref": "0-7-1-42-4242", "on": "true", "f": "0.5", "d": "-2.25",
        "id": "00000000-0000-0000-0000-000000000001",
        "m": '{"k":1,"nested":{"id":"00000000-0000-0000-0000-000000000009","flag":false},'
             '"s":"x"}',
        "l": '[1,"two",3.5,null]', "a": "[1,2,3]",
    }  # the absent optional property is left out
    assert row["stats_int"] == {} and row["stats_float"] == {} and row["stats_text"] == {}
    assert row["kind"] == "c" and row["agent"] == "1.42" and row["broker"] == "amqp://h:5672/%2F"
    assert row["object_id"] == "0-7-1-42-4242" and row["boot_sequence"] == 7
    assert (row["package"], row["class_name"]) == (PKG, "everything")
    assert row["class_hash"] == ALL_TYPES.class_key.hash.hex() and len(row["class_hash"]) == 32
    assert (row["sample_ts"], row["create_ts"], row["delete_ts"]) == (T0, T0 - 10, 0)
    assert row["received_ts"] == T0 + 99


def test_sample_row_of_statistics_splits_by_type() -> None:
    (rec,) = _roundtrip(_all_types_stats())
    row = sample_row(_proxy(rec), "i", received_ts=1)
    assert row["props"] == {}
    assert row["stats_int"] == {"s_u64": 12, "s_i64": -5, "s_u32": 7, "s_flag": 1, "s_at": T0}
    # uint64 above the int64 range goes to the doubles, not wrapped or lost
    assert row["stats_float"] == {"s_big": float(U64_MAX), "s_f": 1.5, "s_d": float("inf")}
    assert row["stats_text"] == {"s_str": "running", "s_ref": "0-7-1-42-4242",
                                 "s_id": "00000000-0000-0000-0000-000000000002",
                                 "s_m": '{"a":[1,2]}'}
    assert row["agent"] == "1.42"  # from the object id when the agent is not known
    assert row["broker"] == ""


def test_uint64_boundary() -> None:
    row = sample_row(_widget(0, count=I64_MAX), "i")
    assert row["stats_int"] == {"count": I64_MAX} and row["stats_float"] == {}
    row = sample_row(_widget(0, count=I64_MAX + 1), "i")
    assert row["stats_int"] == {} and row["stats_float"] == {"count": float(I64_MAX + 1)}


def test_deleted_object_keeps_its_delete_time() -> None:
    (rec,) = _roundtrip(_all_types_stats(deleted=T0 + 5))
    row = sample_row(_proxy(rec), "i")
    assert row["delete_ts"] == T0 + 5 and row["sample_ts"] == T0


def test_event_row() -> None:
    row = event_row(_event(level=9), received_ts=T0 + 1)
    assert tuple(row) == EVENT_COLUMNS
    assert row == {
        "broker": "amqp://host:5672/%2F", "agent": "1.42", "package": PKG,
        "event_name": "alarm", "class_hash": ALARM.class_key.hash.hex(), "timestamp": T0,
        "severity": 4, "severity_name": "warn",
        "args": {"what": "hot", "level": "9", "where": "0-7-1-42-4242",
                 "extra": '{"t":1.5,"b":"\\\\xffraw"}'},
        "received_ts": T0 + 1,
    }


def test_schemas() -> None:
    s = samples_schema()
    assert s.names == list(SAMPLE_COLUMNS)
    assert {f.name: str(f.type) for f in s} == {
        "broker": "string", "agent": "string", "object_id": "string",
        "boot_sequence": "int32", "package": "string", "class_name": "string",
        "class_hash": "string", "kind": "string", "sample_ts": "int64", "create_ts": "int64",
        "delete_ts": "int64", "props": "map<string, string>",
        "stats_int": "map<string, int64>", "stats_float": "map<string, double>",
        "stats_text": "map<string, string>", "received_ts": "int64"}
    e = events_schema()
    assert {f.name: str(f.type) for f in e} == {
        "broker": "string", "agent": "string", "package": "string", "event_name": "string",
        "class_hash": "string", "timestamp": "int64", "severity": "int32",
        "severity_name": "string", "args": "map<string, string>", "received_ts": "int64"}


def test_without_pyarrow_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"qmf-async\[collector\]"):
        Collector(FakeSession(), tmp_path)


def test_bad_options(tmp_path: Path) -> None:
    for kw in ({"batch_rows": 0}, {"batch_seconds": 0}, {"max_buffer": 0}):
        with pytest.raises(UsageError):
            Collector(FakeSession(), tmp_path, **kw)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        Collector(FakeSession(), tmp_path).add_sample(_widget(0), "x")


# --------------------------------------------------------------------------- files


async def test_files_layout_and_contents(tmp_path: Path) -> None:
    c = Collector(FakeSession(), tmp_path)
    (props,) = _roundtrip(_all_types_props())
    (stats,) = _roundtrip(_all_types_stats())
    assert c.add_sample(_proxy(props), "c", received_ts=11)
    assert c.add_sample(_proxy(stats), "i", received_ts=12)
    assert c.add_event(_event(), received_ts=13)
    # the next day (UTC) goes to its own partition
    assert c.add_sample(_widget(0, ts=T0 + 86_400 * 10**9, count=3), "i")
    assert c.pending == 4 and c.written == 0
    await c.flush()
    assert c.stats == CollectorStats(received=4, written=4, dropped=0, files=3)
    files = [p.relative_to(tmp_path).as_posix() for p in _files(tmp_path)]
    assert files == [
        f"events/date={DAY}/class={PKG}:alarm/part-{c.run_id}-000002.parquet",
        f"samples/date={DAY}/class={PKG}:everything/part-{c.run_id}-000001.parquet",
        f"samples/date=2023-11-15/class={PKG}:widget/part-{c.run_id}-000003.parquet",
    ]
    # partition columns are not stored inside the files; the schema is the contract
    for f in _files(tmp_path / "samples"):
        assert pq.read_schema(f).remove_metadata() == samples_schema()
    assert pq.read_schema(_files(tmp_path / "events")[0]).remove_metadata() == events_schema()
    samples = _read(tmp_path, "samples")
    by_kind = {(r["class"], r["kind"]): r for r in samples}
    c_row = by_kind[(f"{PKG}:everything", "c")]
    assert c_row["date"] == DAY and c_row["received_ts"] == 11
    assert _as_dict(c_row["props"])["u64"] == "18446744073709551615"
    i_row = by_kind[(f"{PKG}:everything", "i")]
    assert _as_dict(i_row["stats_float"])["s_big"] == float(U64_MAX)
    assert _as_dict(i_row["stats_int"])["s_flag"] == 1
    assert by_kind[(f"{PKG}:widget", "i")]["date"] == "2023-11-15"
    (ev,) = _read(tmp_path, "events")
    assert ev["event_name"] == "alarm" and ev["class"] == f"{PKG}:alarm"
    assert _as_dict(ev["args"])["where"] == "0-7-1-42-4242"


async def test_partition_values_are_escaped(tmp_path: Path) -> None:
    odd = object_class("odd/pkg", "a b%c", properties=[Property("n", "sstr")])
    rec = wire.ObjectRecord("c", 0, odd, T0, T0, 0, OID, properties=("x",))
    c = Collector(FakeSession(), tmp_path)
    c.add_sample(_proxy(rec), "c")
    await c.flush()
    (f,) = _files(tmp_path)
    assert f.parent.name == "class=" + quote("odd/pkg:a b%c", safe=":")
    assert f.parent.parent.parent == tmp_path / "samples"  # no path escapes the table
    (row,) = _read(tmp_path, "samples")
    assert row["class"] == "odd/pkg:a b%c" and row["package"] == "odd/pkg"


async def test_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    real = collector_mod._write_parquet
    seen: list[str] = []

    def failing(table: Any, path: str) -> None:
        p = Path(path)
        assert p.name.startswith(".part-") and p.name.endswith(".parquet.tmp")
        real(table, path)
        with open(path, "r+b") as f:  # half a file, then the disk is full
            f.truncate(os.path.getsize(path) // 2)
        seen.append(path)
        assert not list(tmp_path.rglob("part-*.parquet"))  # nothing final is visible
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(collector_mod, "_write_parquet", failing)
    c = Collector(FakeSession(), tmp_path)
    for n in range(5):
        c.add_sample(_widget(n, count=n), "i")
    await c.flush()
    assert seen and _files(tmp_path) == []  # the temporary file is gone too
    s = c.stats
    assert (s.received, s.written, s.lost, s.dropped, s.write_errors, s.files, s.pending) \
        == (5, 0, 5, 5, 1, 0, 0)

    # the collector goes on: the next batch is written
    monkeypatch.setattr(collector_mod, "_write_parquet", real)
    c.add_sample(_widget(9, count=9), "i")
    await c.flush()
    (f,) = _files(tmp_path)
    assert f.name == f"part-{c.run_id}-000002.parquet" and c.written == 1


async def test_file_appears_only_when_complete(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    real = collector_mod._write_parquet
    checked: list[int] = []

    def checking(table: Any, path: str) -> None:
        real(table, path)
        # written but not committed: readers see no file (the name starts with '.')
        assert not list(tmp_path.rglob("part-*.parquet"))
        assert ds.dataset(tmp_path / "samples", format="parquet").files == []
        checked.append(table.num_rows)

    monkeypatch.setattr(collector_mod, "_write_parquet", checking)
    c = Collector(FakeSession(), tmp_path)
    for n in range(3):
        c.add_sample(_widget(n), "i")
    await c.flush()
    assert checked == [3]
    assert [p.name for p in _files(tmp_path)] == [f"part-{c.run_id}-000001.parquet"]


async def test_restart_appends_without_touching_existing_files(tmp_path: Path) -> None:
    first = Collector(FakeSession(), tmp_path)
    for n in range(3):
        first.add_sample(_widget(n, count=n), "i")
    first.add_event(_event())
    await first.flush()
    before = {p: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
              for p in _files(tmp_path)}
    assert len(before) == 2

    second = Collector(FakeSession(), tmp_path)
    assert second.run_id != first.run_id
    for n in range(3, 7):
        second.add_sample(_widget(n, count=n), "i")
    second.add_event(_event(ts=T0 + 1))
    await second.flush()
    after = _files(tmp_path)
    assert len(after) == 4
    for p, (mtime, digest) in before.items():
        assert p.stat().st_mtime_ns == mtime
        assert hashlib.sha256(p.read_bytes()).hexdigest() == digest
    new = [p for p in after if p not in before]
    assert all(p.name.startswith(f"part-{second.run_id}-") for p in new)
    counts = sorted(_as_dict(r["stats_int"])["count"] for r in _read(tmp_path, "samples"))
    assert counts == list(range(7))  # every row once: no duplicates
    assert len(_read(tmp_path, "events")) == 2


async def test_class_hash_change_writes_both_versions(tmp_path: Path) -> None:
    c = Collector(FakeSession(), tmp_path)
    c.add_sample(_widget(0, kind="c"), "c")
    c.add_sample(_widget(1, count=1), "i")
    c.add_sample(_widget(2, kind="c", schema=WIDGET_V2), "c")
    c.add_sample(_widget(3, count=2, schema=WIDGET_V2), "i")
    await c.flush()
    assert c.written == 4 and c.dropped == 0
    rows = sorted(_read(tmp_path, "samples"), key=lambda r: r["sample_ts"])
    assert {r["class"] for r in rows} == {f"{PKG}:widget"}
    assert [r["class_hash"] for r in rows] == [WIDGET.class_key.hash.hex()] * 2 \
        + [WIDGET_V2.class_key.hash.hex()] * 2
    assert _as_dict(rows[2]["props"]) == {"name": "w1", "colour": "red"}
    assert _as_dict(rows[3]["stats_float"]) == {"ratio": 0.25}


async def test_values_not_of_their_schema_type_are_kept(tmp_path: Path) -> None:
    # the fast path trusts the schema types; a proxy built by hand may not match
    oid = ObjectId.make(broker_bank=1, agent_bank=5, object=1)
    odd = [QmfObject(None, None, None, WIDGET, oid, None, (v,), (T0 + n, T0, 0))
           for n, v in enumerate(["many", 2.5, True, U64_MAX, 3])]
    c = Collector(FakeSession(), tmp_path)
    for obj in odd:
        c.add_sample(obj, "i")
    await c.flush()
    assert c.written == 5 and c.dropped == 0
    rows = sorted(_read(tmp_path, "samples"), key=lambda r: r["sample_ts"])
    assert [(_as_dict(r["stats_int"]), _as_dict(r["stats_float"]), _as_dict(r["stats_text"]))
            for r in rows] == [({}, {}, {"count": "many"}), ({}, {"count": 2.5}, {}),
                               ({"count": 1}, {}, {}), ({}, {"count": float(U64_MAX)}, {}),
                               ({"count": 3}, {}, {})]


def test_buffer_overflow_is_counted(tmp_path: Path) -> None:
    c = Collector(FakeSession(), tmp_path, max_buffer=5)
    results = [c.add_sample(_widget(n), "i") for n in range(8)]
    assert results == [True] * 5 + [False] * 3
    assert (c.received, c.pending, c.dropped, c.stats.lost) == (8, 5, 3, 3)


# --------------------------------------------------------------------------- running


async def test_batches_by_size(tmp_path: Path) -> None:
    session = FakeSession()
    c = Collector(session, tmp_path, batch_rows=3, batch_seconds=60)
    async with running(c):
        for n in range(7):
            session.publish(_widget(n, count=n), "i")
        await wait_until(lambda: len(_finished(tmp_path)) == 2, message="two full batches")
        await wait_until(lambda: c.written == 6)
        assert c.pending == 1  # the seventh waits for more rows or for the time limit
    sizes = sorted(pq.read_metadata(f).num_rows for f in _files(tmp_path))
    assert sizes == [1, 3, 3] and c.written == 7 and c.dropped == 0


async def test_batches_by_time(tmp_path: Path) -> None:
    session = FakeSession()
    c = Collector(session, tmp_path, batch_rows=1000, batch_seconds=0.3)
    async with running(c):
        start = time.monotonic()
        session.publish(_widget(0, count=1), "i")
        session.publish(_widget(1, count=2), "i")
        session.publish_event(_event())
        await wait_until(lambda: len(_finished(tmp_path)) == 2, message="files after 0.3 s")
        assert time.monotonic() - start >= 0.3
        assert [pq.read_metadata(f).num_rows for f in _finished(tmp_path)] == [1, 2]
        session.publish(_widget(2, count=3), "i")
        await wait_until(lambda: len(_finished(tmp_path)) == 3, message="the next batch")
    assert c.written == 4 and c.pending == 0


async def test_kind_comes_from_the_proxys_changes_and_callbacks_go_on(tmp_path: Path) -> None:
    class Inner:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def object_props(self, broker: Any, obj: QmfObject) -> None:
            self.calls.append("props")

        def object_stats(self, broker: Any, obj: QmfObject) -> None:
            self.calls.append("stats")

    inner = Inner()
    session = FakeSession(inner)
    c = Collector(session, tmp_path)
    async with running(c):
        assert session.console is inner  # the collector leaves the console alone
        # a merged proxy: properties and statistics both known, get_changes tells which came
        oid = ObjectId.make(broker_bank=1, agent_bank=5, object=1)
        both = QmfObject(None, None, None, WIDGET, oid, ("w",), (5,), (T0, T0, 0),
                         changed=Change.PROPERTIES)
        session.publish(both, "c")
        both2 = QmfObject(None, None, None, WIDGET, oid, ("w",), (6,), (T0 + 1, T0, 0),
                          changed=Change.STATISTICS)
        session.publish(both2, "i")
        await wait_until(lambda: c.received == 2)
    assert session.console is inner
    assert inner.calls == ["props", "stats"]
    rows = sorted(_read(tmp_path, "samples"), key=lambda r: r["sample_ts"])
    assert [(r["kind"], _as_dict(r["props"]), _as_dict(r["stats_int"])) for r in rows] \
        == [("c", {"name": "w"}, {}), ("i", {}, {"count": 6})]
    # fed directly, a query answer (both parts) counts as statistics
    assert Collector._kind_of(both2) == "i"
    answer = QmfObject(None, None, None, WIDGET, oid, ("w",), (7,), (T0 + 2, T0, 0))
    assert answer.get_changes() == Change.PROPERTIES | Change.STATISTICS
    assert Collector._kind_of(answer) == "i"


async def test_slow_writer_drops_in_the_subscription(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    real = collector_mod._write_parquet
    gate = __import__("threading").Event()

    def slow(table: Any, path: str) -> None:
        gate.wait(10)
        real(table, path)

    monkeypatch.setattr(collector_mod, "_write_parquet", slow)
    session = FakeSession()
    c = Collector(session, tmp_path, batch_rows=2, max_buffer=4)
    async with running(c):
        assert session.updates is not None
        for n in range(4):
            session.publish(_widget(n, count=n), "i")
        await wait_until(lambda: c.pending == 4, message="buffer full")
        for n in range(4, 30):  # the collector is stuck behind the writer
            session.publish(_widget(n, count=n), "i")
        await wait_until(lambda: c.dropped > 0)
        assert c.received == 4 and c.pending == 4 and len(session.updates) == 4
        gate.set()
    s = c.stats
    assert s.subscription_dropped == s.dropped > 0 and s.lost == 0
    assert s.received + s.dropped == 30 and s.written == s.received and s.pending == 0
    # what the subscription dropped was the oldest: the newest made it
    assert max(_as_dict(r["stats_int"])["count"] for r in _read(tmp_path, "samples")) == 29


async def test_cancelling_run_still_writes(tmp_path: Path) -> None:
    session = FakeSession()
    c = Collector(session, tmp_path, batch_rows=100, batch_seconds=60)
    task = asyncio.ensure_future(c.run())
    await wait_until(lambda: session.updates is not None)
    session.publish(_widget(0), "i")
    await wait_until(lambda: c.received == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert c.written == 1 and len(_files(tmp_path)) == 1


def _qmf(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-m", "qmf_async.tools.cli", *args], cwd=str(ROOT),
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_qmf_collect_usage_errors(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    proc = _qmf("collect", "amqp://guest:guest@127.0.0.1:1/", "--out", str(not_a_dir / "ds"))
    assert proc.returncode == 2, proc.stderr
    assert "dataset directory" in proc.stderr
    # nothing listens on port 1: unreachable (3), after writing nothing
    proc = _qmf("collect", "amqp://guest:guest@127.0.0.1:1/", "--out", str(tmp_path / "ds"),
                "--connect-timeout", "5")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("qmf collect: error:")
    assert _files(tmp_path / "ds") == []


# --------------------------------------------------------------------------- integration

PACKAGE = "org.apache.qpid.broker"
INTERVAL = 0.2


def _import_demo() -> Any:
    return import_example("demo_agent")


@pytest.fixture(scope="module")
def bus_url(amqp_url: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one."""
    with private_vhost(amqp_url, "qmf-collector-test") as url:
        yield url


@contextlib.asynccontextmanager
async def demo_bus(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """The management-broker role and a started demo agent (interval 0.2 s)."""
    demo = _import_demo()
    role = ManagementBroker(url, broker_id=uuid.uuid4(), interval=INTERVAL, agent_timeout=3.0,
                            label=f"collector-test-role-{uuid.uuid4().hex[:8]}")
    await role.start()
    try:
        agent, model = demo.build_demo_agent(
            url, interval=INTERVAL, queues=1, seed=5, attach_timeout=1.0,
            label=f"collector-test-demo-{uuid.uuid4().hex[:8]}")
        await model.start()
        try:
            yield agent, model
        finally:
            await model.stop()
    finally:
        await role.stop(2.0)


@pytest.mark.integration
async def test_collect_from_the_demo_agent(bus_url: str, tmp_path: Path) -> None:
    async with demo_bus(bus_url) as (agent, _model):
        banks = f"{agent.broker_bank}.{agent.agent_bank}"
        session = Session(manage_connections=True, agent_interval=0.3, timeout=5.0)
        collector = Collector(session, tmp_path, batch_rows=200, batch_seconds=0.3)
        stop = asyncio.Event()
        task = asyncio.ensure_future(collector.run(stop))
        try:
            await session.add_broker(bus_url, timeout=5.0)

            def queue_stats(name: str) -> list[dict[str, Any]]:
                rows = [r for r in _read(tmp_path, "samples")
                        if r["agent"] == banks and r["class_name"] == "queue"]
                oids = {r["object_id"] for r in rows
                        if r["kind"] == "c" and _as_dict(r["props"]).get("name") == name}
                return [r for r in rows if r["kind"] == "i" and r["object_id"] in oids]

            await wait_until(lambda: len(queue_stats("orders")) >= 4, timeout=15,
                             interval=0.1, message="four statistics samples of 'orders'")
            remote = await wait_until(
                lambda: [a for a in session.get_agents() if f"{a.broker_bank}."
                         f"{a.agent_bank}" == banks], timeout=5)
            (broker_obj,) = await session.get_objects(_class="broker", _agent=remote[0])
            qname = f"collected-{uuid.uuid4().hex[:6]}"
            await broker_obj.create("queue", qname, {"durable": False}, False)

            def declared() -> list[dict[str, Any]]:
                return [e for e in _read(tmp_path, "events")
                        if e["event_name"] == "queueDeclare"
                        and _as_dict(e["args"]).get("qName") == qname]

            await wait_until(declared, timeout=10, interval=0.1, message="queueDeclare row")
            await wait_until(lambda: queue_stats(qname), timeout=10, interval=0.1,
                             message="samples of the new queue")
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
            await session.close()

    stats = collector.stats
    assert stats.written == stats.received > 0 and stats.dropped == 0 and stats.pending == 0
    assert not [p for p in _files(tmp_path) if p.name.endswith(".tmp")]
    orders = sorted(queue_stats("orders"), key=lambda r: r["received_ts"])
    assert len({r["object_id"] for r in orders}) == 1
    sample_ts = [r["sample_ts"] for r in orders]
    assert sample_ts == sorted(sample_ts) and len(set(sample_ts)) == len(sample_ts)
    enqueues = [_as_dict(r["stats_int"])["msgTotalEnqueues"] for r in orders]
    assert enqueues == sorted(enqueues) and enqueues[-1] > enqueues[0]
    for r in orders:
        assert r["props"] in (None, []) and r["package"] == PACKAGE
        assert r["class"] == f"{PACKAGE}:queue" and len(r["class_hash"]) == 32
        assert r["broker"].startswith("amqp://") and "guest" not in r["broker"]
        assert r["object_id"].split("-")[1] == str(r["boot_sequence"])
        assert r["date"] == time.strftime("%Y-%m-%d", time.gmtime(r["sample_ts"] / 1e9))
        assert r["received_ts"] >= r["sample_ts"] - 10**9
    (ev,) = declared()
    assert ev["agent"] == banks and ev["package"] == PACKAGE
    assert ev["class"] == f"{PACKAGE}:queueDeclare"
    assert ev["severity_name"] == SEVERITY_NAMES[ev["severity"]]
    assert _as_dict(ev["args"])["durable"] == "false"


@pytest.mark.integration
async def test_qmf_collect_command(bus_url: str, tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    async with demo_bus(bus_url):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "qmf_async.tools.cli", "collect", bus_url, "--out", str(out),
            "--duration", "2", "--batch-seconds", "0.3", "--json", cwd=str(ROOT), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, stderr.decode()
    counters = json.loads(stdout)
    assert counters["written"] == counters["received"] > 0 and counters["dropped"] == 0
    assert counters["run_id"] and counters["files"] > 0
    queue_files = list((out / "samples").glob(
        f"date=*/class={PACKAGE}:queue/part-{counters['run_id']}-*.parquet"))
    assert queue_files
    assert not [p for p in _files(out) if p.name.endswith(".tmp")]
    assert len(_read(out, "samples")) == counters["written"] - len(_read(out, "events"))


@pytest.mark.integration
async def test_qmf_collect_writes_what_it_holds_on_sigterm(bus_url: str, tmp_path: Path
                                                          ) -> None:
    out = tmp_path / "dataset"
    async with demo_bus(bus_url):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        # batches would wait a minute: whatever is written comes from the final flush
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "qmf_async.tools.cli", "collect", bus_url, "--out", str(out),
            "--batch-seconds", "60", "--verbose", "--json", cwd=str(ROOT), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 20
            seen = b""
            while b"first object update received" not in seen:  # logged with --verbose
                line = await asyncio.wait_for(proc.stderr.readline(),
                                              max(0.1, deadline - time.monotonic()))
                assert line, f"collect ended early: {seen.decode(errors='replace')}"
                seen += line
            assert not out.exists() or not list(out.rglob("part-*.parquet"))
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    counters = json.loads(stdout)
    assert counters["written"] == counters["received"] > 0 and counters["pending"] == 0
    assert len(_read(out, "samples")) + len(_read(out, "events")) == counters["written"]
