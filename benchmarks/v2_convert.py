"""Conversion throughput of QMF v2 objects into v1 records of their class: qpidd
1.40's captured queue objects (tests/data/qmf2/qpidd-1.40-v2.jsonl, decoded once) made
``RawObjectRecord`` s through the console's ``V2Link.record``, the path every v2 object
takes into the session's object view.  qpidd sends no v2 schema: the v1 schema here is
made from the first object's values (texts, ints, bools, references, maps), its
properties the non-counter values.  Best of ``--rounds`` rounds, objects per second of
process CPU time.

    python benchmarks/v2_convert.py [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.v2_memory import decode, queue_answers  # noqa: E402
from qmf_async import SessionOptions  # noqa: E402
from qmf_async.wire import (  # noqa: E402
    ClassKey,
    SchemaClass,
    SchemaProperty,
    SchemaRegistry,
    SchemaStatistic,
    V2Data,
)


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "uint64"
    if isinstance(value, float):
        return "double"
    if isinstance(value, (bytes, str)):
        return "sstr"
    if isinstance(value, uuid.UUID):
        return "uuid"
    if isinstance(value, dict):
        return "ref" if "_object_name" in value else "map"
    return "list"


def schema_of(item: V2Data) -> SchemaClass:
    sid = item.schema_id
    assert sid is not None and sid.hash is not None
    digest = sid.hash.bytes if isinstance(sid.hash, uuid.UUID) else bytes(sid.hash)
    props, stats = [], []
    for name, value in item.values.items():
        t = _type(value)
        if t == "uint64" and name not in ("id",):
            stats.append(SchemaStatistic(name, t))
        else:
            props.append(SchemaProperty(name, t, optional=t == "map"))
    return SchemaClass(1, ClassKey(sid.package, sid.class_name, digest),
                       properties=tuple(props), statistics=tuple(stats))


class _Host:
    where = "bench"
    _reply_queue = None
    _closing = False

    def __init__(self, schemas: SchemaRegistry) -> None:
        self._agents: dict[tuple[int, int], Any] = {}
        self.session = type("S", (), {"schemas": schemas, "options": SessionOptions()})()

    async def publish(self, out: Any) -> None:  # the link's waits take it; nothing is sent
        raise AssertionError("the conversion benchmark sends nothing")


class _Agents:
    """A stand-in for the broker's agent list (the conversion meets no agent)."""

    def v2_arrived(self, agent: Any) -> None: ...

    def v2_left(self, banks: tuple[int, int]) -> None: ...


def bench_link(host: _Host) -> Any:
    """A ``V2Link`` on ``host``, with stand-ins for what a checkout's link needs."""
    from qmf_async.console._v2 import V2Link

    try:
        from qmf_async.protocol import VersionChoice
        return V2Link(host, agents=_Agents(), beats=VersionChoice())  # type: ignore[arg-type]
    except (ImportError, TypeError):  # a checkout whose link took only its host
        return V2Link(host)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--objects", type=int, default=10_000)
    args = parser.parse_args()

    items = [i for i in decode(queue_answers(), args.objects) if isinstance(i, V2Data)]
    link = bench_link(_Host(SchemaRegistry([schema_of(items[0])])))
    record = link.record
    banks = (1, 0)
    assert record(items[0], banks) is not None
    best = 0.0
    for _ in range(args.rounds):
        start = time.process_time()
        n = 0
        while True:
            for item in items:
                record(item, banks)
            n += len(items)
            spent = time.process_time() - start
            if spent >= args.seconds:
                break
        best = max(best, n / spent)
    print(f"v2 objects -> v1 records: {best:,.0f} objects/s ({len(items)} queue objects, "
          f"{len(items[0].values)} values each)")


if __name__ == "__main__":
    main()
