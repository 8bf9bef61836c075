"""Memory per cached object: QmfObject proxies against a dict-per-object design.

    python benchmarks/memory.py [--quick] [--count N]

No network.  ``count`` records of a qpidd-queue-like class (6 properties including an
``arguments`` map, 20 uint64 statistics, about half of them 0) are encoded as ``g``
bodies of 11 records with ``qmf_async.wire``.  Each design is then measured in a fresh
pass under ``tracemalloc``: decode every body, build one object per record, drop the
bodies' decoded messages, and count what stays allocated.

* ours: the proxies exactly as ``Session.get_objects`` builds them: bodies decoded
  with ``lazy=True`` (records scanned, their bytes kept) and one ``QmfObject`` per
  record holding the record's bytes, decoded when a value is read (session, broker
  and agent are shared).
* baseline: a plain dict of every property and statistic by name per object, in a
  small ``__slots__`` wrapper holding the dict, the class key, the object id and the
  same timestamps tuple.

"total" counts everything the objects keep alive: for the dict design the decoded
values (strings, ints, maps, object ids) too; for ours the proxy and its record bytes.
"containers" counts the design's own objects by ``sys.getsizeof`` (wrapper + dict +
timestamps tuple; proxy + record bytes).  Ours is measured again after every value of
every object was read once (nothing is cached, so it must not grow).  Target from the
issue: a third of the dict design.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
from typing import Any

from _common import emit_json, machine, parser, queue_schema, queue_values, table

TARGET = 1 / 3


class DictObject:
    """The baseline: one dict of values by name, plus class key, object id, times."""

    __slots__ = ("class_key", "object_id", "times", "values")

    def __init__(self, values: dict[str, Any], class_key: Any, object_id: Any,
                 times: tuple[int, int, int]) -> None:
        self.values = values
        self.class_key = class_key
        self.object_id = object_id
        self.times = times


def make_bodies(count: int) -> tuple[Any, list[bytes]]:
    from qmf_async import wire
    from qmf_async.wire._values import ObjectId

    schema = queue_schema()
    reg = wire.SchemaRegistry([schema])
    pnames = [p.name for p in schema.properties]
    snames = [s.name for s in schema.statistics]
    now = time.time_ns()
    records = []
    for i in range(count):
        v = queue_values(i)
        oid = ObjectId.make(sequence=1, broker_bank=1, agent_bank=4242, object=i + 1)
        records.append(wire.ObjectRecord("g", 77, schema, now + i, now - 10**9 * (i % 5000), 0,
                                         oid, tuple(v[n] for n in pnames),
                                         tuple(v[n] for n in snames)))
    bodies = [wire.encode(records[i:i + 11], reg) for i in range(0, count, 11)]
    return schema, bodies


def build_ours(schema: Any, bodies: list[bytes]) -> list[Any]:
    from qmf_async import QmfObject, wire

    reg = wire.SchemaRegistry([schema])
    session = broker = agent = None  # shared by every proxy: not per-object memory
    out = []
    append = out.append
    from_raw = QmfObject.from_raw
    for body in bodies:
        for msg in wire.decode(body, reg, lazy=True):
            append(from_raw(session, broker, agent, msg.codec, msg.raw, msg.opcode, msg.sofs))
    return out


def build_ours_and_read(schema: Any, bodies: list[bytes]) -> list[Any]:
    """Ours, then every value of every object read once (values dropped again)."""
    out = build_ours(schema, bodies)
    names = [p.name for p in schema.properties] + [s.name for s in schema.statistics]
    for o in out:
        for n in names:
            getattr(o, n)
        o.get_object_id()
        o.get_timestamps()
    return out


def build_dicts(schema: Any, bodies: list[bytes]) -> list[DictObject]:
    from qmf_async import wire

    reg = wire.SchemaRegistry([schema])
    pnames = [p.name for p in schema.properties]
    snames = [s.name for s in schema.statistics]
    out = []
    append = out.append
    for body in bodies:
        for msg in wire.decode(body, reg):
            values = dict(zip(pnames, msg.properties, strict=True))
            values.update(zip(snames, msg.statistics, strict=True))
            append(DictObject(values, msg.schema.class_key, msg.object_id,
                              (msg.timestamp, msg.created, msg.deleted)))
    return out


def measure(build: Any, schema: Any, bodies: list[bytes]) -> tuple[int, list[Any], float]:
    """Bytes still allocated after building (bodies excluded), the objects, seconds."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    objs = build(schema, bodies)
    secs = time.perf_counter() - t0
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return used, objs, secs


def container_bytes_ours(o: Any) -> int:
    return sys.getsizeof(o) + sys.getsizeof(o._raw)


def container_bytes_dict(o: DictObject) -> int:
    return sys.getsizeof(o) + sys.getsizeof(o.values) + sys.getsizeof(o.times)


def _deep(obj: Any, seen: set[int]) -> int:
    """Bytes of ``obj`` and what it holds, each object counted once across calls;
    None, bools and CPython's cached small ints are free."""
    if obj is None or isinstance(obj, bool) or (type(obj) is int and -5 <= obj <= 256):
        return 0
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep(k, seen) + _deep(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        size += sum(_deep(v, seen) for v in obj)
    for slot in getattr(type(obj), "__slots__", ()):
        if slot != "__weakref__" and hasattr(obj, slot):
            size += _deep(getattr(obj, slot), seen)
    return size


def value_breakdown(schema: Any, objs: list[Any]) -> dict[str, float]:
    """Average bytes per object of the decoded values, by element (dict design)."""
    seen: set[int] = set()
    for p in schema.properties + schema.statistics:  # names are shared by all objects
        _deep(p.name, seen)
    out: dict[str, float] = {}
    n = len(objs)
    stat_names = {s.name for s in schema.statistics}
    for o in objs:
        parts: dict[str, list[Any]] = {"object id": [o.object_id], "timestamps": list(o.times),
                                       "statistics (uint64 ints)": []}
        for name, v in o.values.items():
            if name in stat_names:
                parts["statistics (uint64 ints)"].append(v)
            else:
                parts[f"property {name}"] = [v]
        for k, vs in parts.items():
            out[k] = out.get(k, 0) + sum(_deep(v, seen) for v in vs)
    return {k: v / n for k, v in out.items()}


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=None, help="objects (default 100,000)")
    args = p.parse_args()
    count = args.count or (20_000 if args.quick else 100_000)
    schema, bodies = make_bodies(count)

    results = {}
    breakdown: dict[str, float] = {}
    for name, build, containers in (
            ("dict design", build_dicts, container_bytes_dict),
            ("QmfObject (ours)", build_ours, container_bytes_ours),
            ("ours, every value read once", build_ours_and_read, container_bytes_ours)):
        build(schema, bodies[:2])  # first-use costs (modules imported on first use,
        # compiled codecs) are the process's, not each object's: paid before measuring
        used, objs, _ = measure(build, schema, bodies)
        assert len(objs) == count
        if build is build_dicts:
            breakdown = value_breakdown(schema, objs[:2000])
        del objs
        gc.collect()
        objs = build(schema, bodies)
        results[name] = {
            "total_bytes_per_object": used / count,
            "container_bytes_per_object": sum(containers(o) for o in objs) / count,
        }
        del objs
        gc.collect()
    # decode + build speed without tracemalloc: CPU time, designs alternated, best of 3
    for _ in range(3):
        for name, build in (("dict design", build_dicts), ("QmfObject (ours)", build_ours),
                            ("ours, every value read once", build_ours_and_read)):
            gc.collect()
            t0 = time.process_time()
            objs = build(schema, bodies)
            secs = time.process_time() - t0
            del objs
            r = results[name]
            r["build_seconds"] = min(r.get("build_seconds", secs), secs)
            r["build_us_per_object"] = r["build_seconds"] * 1e6 / count

    ours, base = results["QmfObject (ours)"], results["dict design"]
    ratio_total = ours["total_bytes_per_object"] / base["total_bytes_per_object"]
    ratio_cont = ours["container_bytes_per_object"] / base["container_bytes_per_object"]
    read = results["ours, every value read once"]
    ratio_read = read["total_bytes_per_object"] / base["total_bytes_per_object"]
    shared = base["total_bytes_per_object"] - base["container_bytes_per_object"]
    rows = []
    for name, r in results.items():
        is_base = r is base
        rows.append([name, f"{r['total_bytes_per_object']:.0f}",
                     f"{r['container_bytes_per_object']:.0f}",
                     f"{r['build_seconds'] * 1e6 / count:.1f}" if "build_seconds" in r else "",
                     "" if is_base else
                     f"{r['total_bytes_per_object'] / base['total_bytes_per_object']:.0%}",
                     "" if is_base else
                     f"{r['container_bytes_per_object'] / base['container_bytes_per_object']:.0%}"])
    print(f"memory: {count:,} queue objects (6 properties, 20 uint64 statistics) from "
          f"{len(bodies):,} g bodies; target ours <= {TARGET:.0%} of the dict design")
    print(table(rows, ["design", "total B/object", "containers B/object",
                       "decode+build CPU us/obj", "total ratio", "containers ratio"]))
    print(f"decoded values the dict design keeps (strings, ints, map, object id): "
          f"~{shared:.0f} B/object, by element:")
    print(table([[k, f"{v:.0f}"] for k, v in sorted(breakdown.items(), key=lambda kv: -kv[1])],
                ["element", "B/object"]))
    emit_json({
        "benchmark": "memory", "quick": args.quick, "objects": count,
        "dict_design": {k: round(v, 3) for k, v in base.items()},
        "ours": {k: round(v, 3) for k, v in ours.items()},
        "ours_after_reading": {k: round(v, 3) for k, v in read.items()},
        "ratio_total": round(ratio_total, 3), "ratio_containers": round(ratio_cont, 3),
        "ratio_total_after_reading": round(ratio_read, 3),
        "values_bytes_per_object": round(shared, 1),
        "values_breakdown_bytes_per_object": {k: round(v, 1) for k, v in breakdown.items()},
        "meets_target_total": ratio_total <= TARGET and ratio_read <= TARGET,
        "machine": {k: v for k, v in machine().items() if k != "rabbitmq"},
        "loadavg_after": os.getloadavg(),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
