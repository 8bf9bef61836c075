"""What the console does with a QMF v2 object, three ways, per object: (A) today's,
the object made a v1 record of its class (``V2Link.record``) that the object view
holds as v1 bytes and the proxies decode on access; (B) a prototype that keeps the
``V2Data``'s own dict of values as the held form, merges into a new dict and converts
a value when it is read; (C) a prototype that converts the values as A does (A's own
converter sections) but does not encode them: two tuples in schema order, held and
shared by ``QmfObject`` proxies over decoded values.

The objects are qpidd 1.40's captured queue objects
(tests/data/qmf2/qpidd-1.40-v2.jsonl, decoded once, as ``benchmarks/v2_convert.py``);
the class is qpidd's v1 queue schema (``qmf_async/bridge/qpidd-broker.xml``: 7
properties, 47 statistics) under the v2 objects' schema hash.  A statistics update is
an object's map without its properties (qpidd over v2 sends properties only when they
change).  Before timing, every element of every object, whole and merged, is read
through the three designs' proxies and must be equal.  Per object, CPU
(``process_time``) of:

- ``ingest``: A ``V2Link.record``; B the v1 object id (``V2Link.object_id``, which A
  asks too) and which parts the map holds; C the converted tuples, the id, the header;
- ``merge``: a statistics update into the held object, as ``ObjectView._deliver``
  does it (A: the parts' bytes, the record joined; B: a new dict, since proxies handed
  out before are snapshots and keep the old one; C: the new statistics tuple);
- ``build a proxy``: A ``QmfObject.from_raw``; B a per-schema proxy over the dict; C a
  ``QmfObject`` over the tuples;
- ``read 8 values``: 2 properties and 6 statistics by attribute; ``read all``:
  ``values()``;
- ``statistics update end to end``: ingest + merge + build a proxy + read 8 values;
  and A again through the console's own ``ObjectView`` (with its bookkeeping).

Memory (``tracemalloc``, what stays allocated per object once the decoded messages are
dropped): the view's entry after a whole object, after a statistics update merged, and
a proxy a user keeps beside it.  Rounds rotate which design runs first; best and
median per figure.  Prints markdown tables and a JSON line.

    python benchmarks/v2_held.py [--rounds 5] [--seconds 0.3] [--objects 2000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.v2_convert import _Host, bench_link  # noqa: E402
from benchmarks.v2_memory import decode, queue_answers  # noqa: E402
from qmf_async import QmfObject  # noqa: E402
from qmf_async.agent import load_schema_xml  # noqa: E402
from qmf_async.console._objects import ProxyClasses  # noqa: E402
from qmf_async.console._values import Change  # noqa: E402
from qmf_async.console._view import ObjectView  # noqa: E402
from qmf_async.wire import (  # noqa: E402
    ClassCodec,
    ClassKey,
    ObjectId,
    QmfType,
    RawObjectRecord,
    RecordLayout,
    SchemaClass,
    SchemaRegistry,
    V2Data,
    V2ObjectId,
    V2RecordConverter,
    v2_default,
    v2_value,
)

BANKS = (1, 0)
#: what ``read 8 values`` reads: 2 properties, 6 statistics (a ``qmf stat -q`` row)
READ = ("name", "durable", "msgDepth", "byteDepth", "msgTotalEnqueues", "msgTotalDequeues",
        "consumerCount", "bindingCount")
_PROPS, _STATS, _BOTH = Change.PROPERTIES, Change.STATISTICS, Change.PROPERTIES | Change.STATISTICS


def queue_schema(item: V2Data) -> SchemaClass:
    """qpidd's v1 queue class, keyed by the v2 objects' schema hash."""
    sid = item.schema_id
    assert sid is not None and sid.hash is not None
    digest = sid.hash.bytes if isinstance(sid.hash, uuid.UUID) else bytes(sid.hash)
    xml = (ROOT / "qmf_async" / "bridge" / "qpidd-broker.xml").read_text("utf-8")
    queue = next(c for c in load_schema_xml(xml) if c.class_key.name == "queue")
    return attrs.evolve(queue, class_key=ClassKey(sid.package, sid.class_name, digest))


def stats_only(item: V2Data, schema: SchemaClass) -> V2Data:
    """The object's map without its properties: a statistics update."""
    pnames = {p.name for p in schema.properties}
    return attrs.evolve(item, values={k: v for k, v in item.values.items()
                                      if k not in pnames})


# ---------------------------------------------------------------- design B, prototype

_MISSING: Any = object()


class _Value:
    """An element of the dict proxies of one schema (a descriptor, as A's
    ``_Element``): the received value, converted as ``v2_value`` does; an absent
    non-optional one reads as its type's zero, an absent optional one or one of a part
    not received raises AttributeError."""

    __slots__ = ("default", "name", "optional", "parts", "type")

    def __init__(self, name: str, t: QmfType, optional: bool, stat: bool) -> None:
        self.name = name
        self.type = t
        self.optional = optional
        self.default = None if optional else v2_default(t)
        self.parts = ("g", "i") if stat else ("g", "c")

    def convert(self, obj: DictProxy, v: Any) -> Any:
        return v2_value(self.name, self.type, v, obj._banks, obj._cls.ids)

    def __get__(self, obj: DictProxy | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        if obj._kind in self.parts:
            v = obj._values.get(self.name)
            if v is not None:
                return self.convert(obj, v)
            if not self.optional:
                return self.default
        raise AttributeError(self.name)


class _Plain(_Value):
    """An integer or a map: as it came (A's converter takes them so too)."""

    __slots__ = ()

    def convert(self, obj: DictProxy, v: Any) -> Any:
        return v


class _Text(_Value):
    __slots__ = ()

    def convert(self, obj: DictProxy, v: Any) -> Any:
        return v.decode("utf-8", "replace") if type(v) is bytes else str(v)


class _Bool(_Value):
    __slots__ = ()

    def convert(self, obj: DictProxy, v: Any) -> Any:
        return v if v is True or v is False else bool(v)


_INTS = {QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64, QmfType.INT8,
         QmfType.INT16, QmfType.INT32, QmfType.INT64, QmfType.ABSTIME, QmfType.DELTATIME,
         QmfType.MAP}


def _element(name: str, t: QmfType, optional: bool, stat: bool) -> _Value:
    if t in _INTS:
        return _Plain(name, t, optional, stat)
    if t in (QmfType.SSTR, QmfType.LSTR):
        return _Text(name, t, optional, stat)
    if t == QmfType.BOOL:
        return _Bool(name, t, optional, stat)
    return _Value(name, t, optional, stat)


class DictProxy:
    """B's proxy: the held dict (shared with the view, never changed), which parts it
    holds, the v1 object id bytes, the timestamps, the agent's banks."""

    __slots__ = ("_banks", "_changed", "_kind", "_oid", "_times", "_values")
    _cls: DictClass
    _banks: tuple[int, int]
    _changed: Change
    _kind: str
    _oid: bytes
    _times: tuple[int, int, int]
    _values: Mapping[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        element = self._cls.elements.get(name)
        if element is None:
            return default
        try:
            return element.__get__(self)
        except AttributeError:
            return default

    def values(self) -> dict[str, Any]:
        """Every received element by name (absent optional ones left out): the values
        taken in one C call, then only those that need it converted or defaulted."""
        cls, vals = self._cls, self._values
        names = cls.names[self._kind]
        out = dict(zip(names, map(vals.get, names)))  # noqa: B905 - same length
        for name, element in cls.converted[self._kind]:
            v = out[name]
            if v is not None:
                out[name] = element.convert(self, v)
        if None in out.values():
            elements = cls.elements
            for name in [n for n, v in out.items() if v is None]:
                element = elements[name]
                if element.optional:
                    del out[name]
                else:
                    out[name] = element.default
        return out

    def get_object_id(self) -> ObjectId:
        return ObjectId(self._oid)

    def get_timestamps(self) -> tuple[int, int, int]:
        return self._times

    def get_changes(self) -> Change:
        return self._changed


class DictClass:
    """What B keeps per class: the part names, the element descriptors, the proxy
    class, and ``ids`` (the connection's v1 ids of v2 ids, as A's converter)."""

    def __init__(self, schema: SchemaClass, ids: Callable[[tuple[int, int], V2ObjectId], bytes]
                 ) -> None:
        self.pnames = frozenset(p.name for p in schema.properties)
        self.snames = frozenset(s.name for s in schema.statistics)
        self.ids = ids
        elements = {s.name: _element(s.name, QmfType(s.type), False, True)
                    for s in schema.statistics}
        elements.update({p.name: _element(p.name, QmfType(p.type), p.optional, False)
                         for p in schema.properties})
        self.elements = elements
        pn = tuple(p.name for p in schema.properties)
        sn = tuple(st.name for st in schema.statistics if st.name not in self.pnames)
        #: the names of each kind of proxy, and the elements among them to convert
        self.names = {"g": pn + sn, "c": pn, "i": sn, "": ()}
        self.converted = {k: tuple((n, elements[n]) for n in names
                                   if type(elements[n]) is not _Plain)
                          for k, names in self.names.items()}
        ns: dict[str, Any] = {"__slots__": (), "_cls": self, **elements}
        self.proxy: type[DictProxy] = type("DictProxy", (DictProxy,), ns)

    def opcode(self, values: Mapping[str, Any]) -> str:
        has_p = not self.pnames.isdisjoint(values)
        has_s = not self.snames.isdisjoint(values)
        return "g" if has_p and has_s else ("i" if has_s else "c")

    def ingest(self, data: V2Data, banks: tuple[int, int]) -> tuple[bytes, str]:
        """The object's v1 id bytes and which parts its map holds."""
        oid = data.object_id
        assert oid is not None
        return self.ids(banks, oid), self.opcode(data.values)

    def make(self, values: Mapping[str, Any], kind: str, oid: bytes,
             times: tuple[int, int, int], changed: Change) -> DictProxy:
        obj: DictProxy = object.__new__(self.proxy)
        obj._values = values
        obj._kind = kind
        obj._oid = oid
        obj._times = times
        obj._banks = BANKS
        obj._changed = changed
        return obj


# ---------------------------------------------------------------- design C, prototype

#: (properties, statistics) in schema order, converted (None: the part not received)
Parts = tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]


class TupleClass:
    """C: the values converted by A's own converter sections (``V2RecordConverter``:
    texts decoded, references made ids, absent ones their zero) but not encoded, kept
    as two tuples in schema order; the proxy is a ``QmfObject`` over decoded values
    (its ``_p``/``_s``, as ``QmfObject(...)`` built by hand), its header the
    timestamps and id as in a record."""

    def __init__(self, schema: SchemaClass, codec: ClassCodec,
                 ids: Callable[[tuple[int, int], V2ObjectId], bytes]) -> None:
        self.conv = V2RecordConverter(schema, codec, ids)
        self.codec = codec
        self.ids = ids
        self.proxy = ProxyClasses().of(codec)
        self._absent: dict[tuple[str, ...], frozenset[str]] = {(): frozenset()}

    def ingest(self, data: V2Data, banks: tuple[int, int]
               ) -> tuple[bytes, str, tuple[Any, ...] | None, tuple[Any, ...] | None,
                          frozenset[str], bytes]:
        """(v1 id bytes, opcode, properties, statistics, absent names, header)."""
        conv, values = self.conv, data.values
        op = conv.opcode(values)
        absent: list[str] = []
        p = tuple(conv.props(values, banks, absent)) if op != "i" else None
        s = tuple(conv.stats(values, banks, absent)) if op != "c" else None
        oid = data.object_id
        assert oid is not None
        raw = self.ids(banks, oid)
        names = self._absent.get(tuple(absent))
        if names is None:
            names = self._absent[tuple(absent)] = frozenset(absent)
        header = RecordLayout.pack_header(data.update_ts or 0, data.create_ts or 0,
                                          data.delete_ts or 0, raw)
        return raw, op, p, s, names, header

    def make(self, header: bytes, kind: str, p: tuple[Any, ...] | None,
             s: tuple[Any, ...] | None, changed: Change, absent: frozenset[str]) -> QmfObject:
        obj: Any = object.__new__(self.proxy)
        obj._changed = changed
        obj._session = obj._broker = obj._agent = None
        obj._reader = self.codec
        obj._raw = header
        obj._kind = kind
        obj._sofs = RecordLayout.HEADER_SIZE
        obj._p = p
        obj._s = s
        obj._absent = absent
        result: QmfObject = obj
        return result


# ---------------------------------------------------------------- the three merges

HeldA = tuple[bytes | None, bytes | None]


def merge_a(latest: dict[bytes, HeldA], key: bytes,
            rec: RawObjectRecord) -> tuple[bytes, int, str]:
    """``ObjectView._deliver``'s merge: the held parts, the received one replacing its
    own, kept; the record to hand out joined when it lacked a part."""
    raw, sofs, op = rec.raw, rec.sofs, rec.opcode
    known = latest.pop(key, None)
    props, stats = known if known is not None else (None, None)
    if op != "i":
        props = RecordLayout.properties(raw, sofs)
    if op != "c":
        stats = RecordLayout.statistics(raw, sofs)
    latest[key] = (props, stats)
    kind = "g" if props is not None and stats is not None else op
    if kind != op:
        assert props is not None and stats is not None
        raw, sofs = RecordLayout.join(raw, props, stats)
    return raw, sofs, kind


def merge_b(latest: dict[bytes, Mapping[str, Any]], key: bytes, values: Mapping[str, Any],
            op: str, cls: DictClass) -> tuple[Mapping[str, Any], str]:
    """The same over dicts: a whole object's dict is held as it came; a part is merged
    into a new dict (the old one may be in a proxy handed out: a snapshot)."""
    known = latest.pop(key, None)
    if op == "g" or known is None:
        merged = values
        kind = op
    else:
        merged = {**known, **values}
        other = cls.snames if op == "c" else cls.pnames
        kind = op if other.isdisjoint(known) else "g"
    latest[key] = merged
    return merged, kind


def merge_c(latest: dict[bytes, Parts], key: bytes, op: str, p: tuple[Any, ...] | None,
            s: tuple[Any, ...] | None) -> tuple[tuple[Any, ...] | None,
                                                tuple[Any, ...] | None, str]:
    """The same over the tuples of the parts: the received part replaces its own (the
    tuples are never changed, so proxies share them)."""
    known = latest.pop(key, None)
    props, stats = known if known is not None else (None, None)
    if op != "i":
        props = p
    if op != "c":
        stats = s
    latest[key] = (props, stats)
    return props, stats, "g" if props is not None and stats is not None else op


# ---------------------------------------------------------------- the workload

class Workload:
    """The decoded objects, their statistics updates, and each design's forms of them."""

    def __init__(self, n: int) -> None:
        self.items = [i for i in decode(queue_answers(), n) if isinstance(i, V2Data)]
        self.schema = queue_schema(self.items[0])
        self.updates = [stats_only(i, self.schema) for i in self.items]
        registry = SchemaRegistry([self.schema])
        self.link = bench_link(_Host(registry))
        self.b = DictClass(self.schema, self.link.object_id)
        self.c = TupleClass(self.schema, registry.codec(self.schema), self.link.object_id)
        self.whole_a = [self.rec(i) for i in self.items]
        self.upd_a = [self.rec(u) for u in self.updates]
        self.whole_b = [self.b.ingest(i, BANKS) for i in self.items]
        self.upd_b = [self.b.ingest(u, BANKS) for u in self.updates]
        self.whole_c = [self.c.ingest(i, BANKS) for i in self.items]
        self.upd_c = [self.c.ingest(u, BANKS) for u in self.updates]
        assert {r.opcode for r in self.whole_a} == {"g"} == {k for _, k in self.whole_b}
        assert {r.opcode for r in self.upd_a} == {"i"} == {k for _, k in self.upd_b}
        assert {x[1] for x in self.whole_c} == {"g"} and {x[1] for x in self.upd_c} == {"i"}

    def rec(self, item: V2Data) -> RawObjectRecord:
        rec = self.link.record(item, BANKS)
        assert rec is not None
        return rec

    def held_a(self) -> dict[bytes, HeldA]:
        return {r.object_id_bytes: (RecordLayout.properties(r.raw, r.sofs),
                                    RecordLayout.statistics(r.raw, r.sofs))
                for r in self.whole_a}

    def held_b(self) -> dict[bytes, Mapping[str, Any]]:
        return {oid: i.values for i, (oid, _) in zip(self.items, self.whole_b, strict=True)}

    def held_c(self) -> dict[bytes, Parts]:
        return {x[0]: (x[2], x[3]) for x in self.whole_c}

    def proxy_a(self, rec: RawObjectRecord, raw: bytes, sofs: int, kind: str,
                changed: Change = _BOTH) -> QmfObject:
        return QmfObject.from_raw(None, None, None, rec.codec, raw, kind, sofs,
                                  changed, rec.absent)

    def proxies_a(self) -> list[QmfObject]:
        return [self.proxy_a(r, r.raw, r.sofs, "g") for r in self.whole_a]

    def proxies_b(self) -> list[DictProxy]:
        return [self.b.make(i.values, "g", oid, _times(i), _BOTH)
                for i, (oid, _) in zip(self.items, self.whole_b, strict=True)]

    def proxies_c(self) -> list[QmfObject]:
        return [self.c.make(x[5], "g", x[2], x[3], _BOTH, x[4]) for x in self.whole_c]


def _times(d: V2Data) -> tuple[int, int, int]:
    return (d.update_ts or 0, d.create_ts or 0, d.delete_ts or 0)


def check_same_values(w: Workload) -> int:
    """Every element of every object, whole and after a statistics update merged, reads
    the same through the three designs' proxies (values, id, timestamps, attributes);
    returns how many values were compared.

    Raises:
        AssertionError: a value differs.
    """
    n = 0
    held_a, held_b, held_c = w.held_a(), w.held_b(), w.held_c()
    for k, (rec, item) in enumerate(zip(w.whole_a, w.items, strict=True)):
        upd_rec, upd = w.upd_a[k], w.updates[k]
        oid = w.whole_b[k][0]
        whole_c, upd_c = w.whole_c[k], w.upd_c[k]
        a = w.proxy_a(rec, rec.raw, rec.sofs, "g")
        b = w.b.make(item.values, "g", oid, _times(item), _BOTH)
        c = w.c.make(whole_c[5], "g", whole_c[2], whole_c[3], _BOTH, whole_c[4])
        raw, sofs, kind = merge_a(held_a, upd_rec.object_id_bytes, upd_rec)
        merged, kind_b = merge_b(held_b, oid, upd.values, "i", w.b)
        p, s, kind_c = merge_c(held_c, upd_c[0], "i", upd_c[2], upd_c[3])
        a2 = w.proxy_a(upd_rec, raw, sofs, kind, _STATS)
        b2 = w.b.make(merged, kind_b, oid, _times(upd), _STATS)
        c2 = w.c.make(upd_c[5], kind_c, p, s, _STATS, upd_c[4])
        for x, y, z in ((a, b, c), (a2, b2, c2)):
            want = x.values()
            assert want == y.values() == z.values(), (want, y.values(), z.values())
            assert x.get_object_id() == y.get_object_id() == z.get_object_id()
            assert x.get_timestamps() == y.get_timestamps() == z.get_timestamps()
            for name in READ:
                assert getattr(x, name) == getattr(y, name) == getattr(z, name), name
            n += len(want)
    return n


# ---------------------------------------------------------------- timing

Op = tuple[str, dict[str, Callable[[], object]], int]


def _loop(fn: Callable[[], object], count: int, seconds: float) -> float:
    """µs of process CPU per object: ``fn`` (``count`` objects a call) run for at
    least ``seconds``."""
    gc.collect()
    start = time.process_time()
    n = 0
    while True:
        fn()
        n += count
        spent = time.process_time() - start
        if spent >= seconds:
            return spent * 1e6 / n


def _read8(o: Any) -> None:
    o.name, o.durable, o.msgDepth, o.byteDepth  # noqa: B018
    o.msgTotalEnqueues, o.msgTotalDequeues, o.consumerCount, o.bindingCount  # noqa: B018


def operations(w: Workload) -> list[Op]:
    """(name, {design: fn}, objects per call): each call does the operation once per
    object of the workload (the merges twice: a statistics update, then the whole
    object again, so every call starts from the same state)."""
    b, c = w.b, w.c
    record, ingest_b, make_b, ingest_c, make_c = (w.link.record, b.ingest, b.make,
                                                  c.ingest, c.make)
    items, updates = w.items, w.updates
    n = len(items)
    whole_a, upd_a = w.whole_a, w.upd_a
    held_a, held_b, held_c = w.held_a(), w.held_b(), w.held_c()
    whole_vals = [i.values for i in items]
    upd_vals = [u.values for u in updates]
    whole_ids = [oid for oid, _ in w.whole_b]
    whole_times = [_times(i) for i in items]
    whole_c, upd_c = w.whole_c, w.upd_c
    codec = whole_a[0].codec
    from_raw = QmfObject.from_raw

    def each(fn: Callable[[Any], object], xs: Sequence[Any]) -> Callable[[], None]:
        def run() -> None:
            for x in xs:
                fn(x)
        return run

    def merge_stats_a() -> None:
        for rec in upd_a:
            merge_a(held_a, rec.object_id_bytes, rec)
        for rec in whole_a:
            merge_a(held_a, rec.object_id_bytes, rec)

    def merge_stats_b() -> None:
        for (oid, op), values in zip(w.upd_b, upd_vals, strict=True):
            merge_b(held_b, oid, values, op, b)
        for oid, values in zip(whole_ids, whole_vals, strict=True):
            merge_b(held_b, oid, values, "g", b)

    def merge_stats_c() -> None:
        for x in upd_c:
            merge_c(held_c, x[0], x[1], x[2], x[3])
        for x in whole_c:
            merge_c(held_c, x[0], x[1], x[2], x[3])

    def proxy_a() -> None:
        for rec in whole_a:
            from_raw(None, None, None, codec, rec.raw, "g", rec.sofs, _BOTH, rec.absent)

    def proxy_b() -> None:
        for oid, values, times in zip(whole_ids, whole_vals, whole_times, strict=True):
            make_b(values, "g", oid, times, _BOTH)

    def proxy_c() -> None:
        for x in whole_c:
            make_c(x[5], "g", x[2], x[3], _BOTH, x[4])

    def update_a() -> None:
        for item in updates:
            rec = record(item, BANKS)
            assert rec is not None
            raw, sofs, kind = merge_a(held_a, rec.object_id_bytes, rec)
            _read8(from_raw(None, None, None, codec, raw, kind, sofs, _STATS, rec.absent))

    def update_b() -> None:
        for item in updates:
            oid, op = ingest_b(item, BANKS)
            values, kind = merge_b(held_b, oid, item.values, op, b)
            _read8(make_b(values, kind, oid, _times(item), _STATS))

    def update_c() -> None:
        for item in updates:
            oid, op, p, s, absent, header = ingest_c(item, BANKS)
            props, stats, kind = merge_c(held_c, oid, op, p, s)
            _read8(make_c(header, kind, props, stats, _STATS, absent))

    # A through the console's own view (its bookkeeping: waiting, gone, unannounced,
    # eviction), the proxy built and read in its deliver callback
    broker, agent, view_update = _real_view(w)

    def update_a_view() -> None:
        for item in updates:
            rec = record(item, BANKS)
            assert rec is not None
            view_update(broker, agent, rec, 0.0)

    pa, pb, pc = w.proxies_a(), w.proxies_b(), w.proxies_c()
    return [
        ("ingest a whole object", {"A": each(lambda i: record(i, BANKS), items),
                                   "B": each(lambda i: ingest_b(i, BANKS), items),
                                   "C": each(lambda i: ingest_c(i, BANKS), items)}, n),
        ("ingest a statistics update", {"A": each(lambda i: record(i, BANKS), updates),
                                        "B": each(lambda i: ingest_b(i, BANKS), updates),
                                        "C": each(lambda i: ingest_c(i, BANKS), updates)}, n),
        ("merge into the held object", {"A": merge_stats_a, "B": merge_stats_b,
                                        "C": merge_stats_c}, 2 * n),
        ("build a proxy", {"A": proxy_a, "B": proxy_b, "C": proxy_c}, n),
        ("read 8 values", {"A": each(_read8, pa), "B": each(_read8, pb),
                           "C": each(_read8, pc)}, n),
        ("read all (values())", {"A": each(lambda o: o.values(), pa),
                                 "B": each(lambda o: o.values(), pb),
                                 "C": each(lambda o: o.values(), pc)}, n),
        ("statistics update end to end", {"A": update_a, "B": update_b, "C": update_c}, n),
        ("the same, A through ObjectView", {"A": update_a_view}, n),
    ]


class _Limits:
    max_objects = 1_000_000
    completion_timeout = 60.0


class _Owner:
    options = _Limits()


class _Agent:
    broker_bank, agent_bank = BANKS


def _real_view(w: Workload) -> tuple[object, object, Callable[..., object]]:
    def deliver(broker: Any, agent: Any, rec: RawObjectRecord, raw: bytes, sofs: int,
                kind: str, changed: Change) -> None:
        _read8(QmfObject.from_raw(None, broker, agent, rec.codec, raw, kind, sofs, changed,
                                  rec.absent))

    view = ObjectView(_Owner(), deliver)
    broker, agent = object(), _Agent()
    for rec in w.whole_a:  # every object held whole first
        view.update(broker, agent, rec, 0.0)
    return broker, agent, view.update


# ---------------------------------------------------------------- memory

def held_bytes(w: Workload, n: int) -> dict[str, dict[str, float]]:
    """Bytes per object that stay allocated: the view's entry after a whole object
    (``whole``), after a statistics update merged into it (``merged``), and a proxy of
    the merged object kept beside the view (``proxy``).  Every object (and its update)
    is decoded inside the measured window and dropped but for what each design keeps;
    each design measured twice, the smaller figure kept."""
    raws = queue_answers()
    pnames = w.b.pnames
    out: dict[str, dict[str, float]] = {"A": {}, "B": {}, "C": {}}
    for design in ("A", "B", "C") * 2:
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        items = [i for i in decode(raws, n) if isinstance(i, V2Data)]
        latest: dict[int, Any] = {}
        for k, item in enumerate(items):
            if design == "A":
                r = w.rec(item)
                latest[k] = (RecordLayout.properties(r.raw, r.sofs),
                             RecordLayout.statistics(r.raw, r.sofs))
            elif design == "B":
                latest[k] = item.values
            else:
                x = w.c.ingest(item, BANKS)
                latest[k] = (x[2], x[3])
        del items
        gc.collect()
        whole = tracemalloc.get_traced_memory()[0] - base
        updates = [i for i in decode(raws, n) if isinstance(i, V2Data)]
        proxies: list[Any] = []
        for k, item in enumerate(updates):
            upd = attrs.evolve(item, values={a: v for a, v in item.values.items()
                                             if a not in pnames})
            if design == "A":
                rec = w.rec(upd)
                props, _ = latest[k]
                stats = RecordLayout.statistics(rec.raw, rec.sofs)
                latest[k] = (props, stats)
                raw, sofs = RecordLayout.join(rec.raw, props, stats)
                proxies.append(w.proxy_a(rec, raw, sofs, "g", _STATS))
            elif design == "B":
                oid, _ = w.b.ingest(upd, BANKS)
                merged = latest[k] = {**latest[k], **upd.values}
                proxies.append(w.b.make(merged, "g", oid, _times(upd), _STATS))
            else:
                x = w.c.ingest(upd, BANKS)
                p = latest[k][0]
                latest[k] = (p, x[3])
                proxies.append(w.c.make(x[5], "g", p, x[3], _STATS, x[4]))
        del updates
        gc.collect()
        with_proxies = tracemalloc.get_traced_memory()[0] - base
        proxies.clear()
        gc.collect()
        merged_size = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        del latest, proxies
        figures = {"whole": whole / n, "merged": merged_size / n,
                   "proxy": (with_proxies - merged_size) / n}
        got = out[design]
        for key, value in figures.items():
            got[key] = min(got.get(key, value), value)
    return out


def containers(w: Workload) -> dict[str, float]:
    """``sys.getsizeof`` per object of each design's own containers, values excluded:
    the view's entry (A: a tuple of two bytes; B: the dict; C: a tuple of two tuples)
    and a proxy (A: the proxy and its record bytes; B: the proxy and its timestamps; C:
    the proxy and its header bytes; B's and C's share the view's values)."""
    def mean(xs: Sequence[int]) -> float:
        return sum(xs) / len(xs)

    a_held, c_held = list(w.held_a().values()), list(w.held_c().values())
    return {
        "A view": mean([sys.getsizeof(t) + sum(sys.getsizeof(x) for x in t) for t in a_held]),
        "B view": mean([sys.getsizeof(i.values) for i in w.items]),
        "C view": mean([sys.getsizeof(t) + sum(sys.getsizeof(x) for x in t) for t in c_held]),
        "A proxy": mean([sys.getsizeof(p) + sys.getsizeof(p._raw) for p in w.proxies_a()]),
        "B proxy": mean([sys.getsizeof(p) + sys.getsizeof(p._times) for p in w.proxies_b()]),
        "C proxy": mean([sys.getsizeof(p) + sys.getsizeof(p._raw) for p in w.proxies_c()]),
    }


# ---------------------------------------------------------------- main

def table(rows: Iterable[Sequence[str]], head: Sequence[str]) -> str:
    """A markdown table, the first column left-aligned."""
    cells = [list(head)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                               for i, c in enumerate(r)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (wd + 1) + (":" if i else "-")
                                   for i, wd in enumerate(widths)) + "|")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run, print the tables and a JSON line; returns the JSON's dict."""
    doc = __doc__ or ""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.3, help="per figure and round")
    p.add_argument("--objects", type=int, default=2000, help="objects of the CPU runs")
    p.add_argument("--memory-objects", type=int, default=10_000)
    args = p.parse_args(argv)

    load_start = os.getloadavg()
    w = Workload(args.objects)
    compared = check_same_values(w)
    ops = operations(w)
    designs = ("A", "B", "C")
    times: dict[str, dict[str, list[float]]] = {name: {d: [] for d in fns}
                                                for name, fns, _ in ops}
    for r in range(args.rounds):
        order = designs[r % 3:] + designs[:r % 3]  # each design first in turn
        for name, fns, per in ops:
            for design in order:
                if design in fns:
                    times[name][design].append(_loop(fns[design], per, args.seconds))
    memory = held_bytes(w, args.memory_objects)
    sizes = containers(w)
    load_end = os.getloadavg()

    def cell(xs: list[float]) -> str:
        return f"{min(xs):.2f} ({statistics.median(xs):.2f})" if xs else ""

    rows = []
    for name, _, _ in ops:
        t = times[name]
        a = min(t["A"])
        rows.append([name, cell(t["A"]), cell(t.get("B", [])), cell(t.get("C", [])),
                     f"{min(t['B']) / a:.2f}" if "B" in t else "",
                     f"{min(t['C']) / a:.2f}" if "C" in t else ""])
    print(f"{len(w.items)} qpidd 1.40 queue objects ({len(w.items[0].values)} values each; "
          f"{len(w.schema.properties)} properties, {len(w.schema.statistics)} statistics in "
          f"the class); {compared:,} values read the same three ways")
    print(f"load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end")
    print(f"CPU, µs per object, best (median) of {args.rounds} rounds")
    print(table(rows, ["operation", "A: v1 record", "B: the dict", "C: tuples", "B/A",
                       "C/A"]))
    mrows = [[what] + [f"{memory[d][key]:,.0f}" for d in designs]
             + [f"{memory[d][key] / memory['A'][key]:.2f}" for d in ("B", "C")]
             for what, key in (("the view's entry, whole object", "whole"),
                               ("the view's entry, statistics merged", "merged"),
                               ("a proxy kept beside it", "proxy"))]
    print(f"memory, bytes per object ({args.memory_objects:,} objects, tracemalloc)")
    print(table(mrows, ["held", "A: v1 record", "B: the dict", "C: tuples", "B/A", "C/A"]))
    print("containers (sys.getsizeof, values excluded): " +
          ", ".join(f"{k} {v:,.0f} B" for k, v in sizes.items()))
    result = {"benchmark": "v2_held", "objects": len(w.items), "rounds": args.rounds,
              "values_compared": compared,
              "cpu_us": {n: {d: [round(x, 3) for x in v] for d, v in t.items()}
                         for n, t in times.items()},
              "memory_bytes": memory, "containers_bytes": sizes,
              "loadavg": [load_start, load_end]}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
