"""Memory held by decoded QMF v2 objects: qpidd 1.40's captured queue answers
(tests/data/qmf2/qpidd-1.40-v2.jsonl) decoded into ``V2Data`` until ``--objects`` are
held, measured with ``tracemalloc`` after a collection.  Then the same objects with
the key strings of their ``_values`` maps shared between objects (``keys``), and with
their identical ``V2SchemaId`` shared too (``shared``): what a decoder that reuses
them would hold.

    python benchmarks/v2_memory.py [--objects 10000]
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from qmf_async.wire import decode_amqp10_message, decode_v2  # noqa: E402

CAPTURE = ROOT / "tests" / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"


def queue_answers() -> list[bytes]:
    """The captured ``_query_response`` messages holding queue objects."""
    found = []
    for line in CAPTURE.read_text().splitlines():
        rec = json.loads(line)
        props = rec.get("application_properties") or {}
        if props.get("qmf.content") != "_data" or props.get("qmf.opcode") != "_query_response":
            continue
        raw = base64.b64decode(rec["message_b64"])
        body = decode_amqp10_message(raw).body
        if isinstance(body, list) and body and "queue" in str(body[0].get("_schema_id")):
            found.append(raw)
    if not found:
        raise SystemExit(f"no queue answers in {CAPTURE}")
    return found


def decode(raws: list[bytes], n: int) -> list[Any]:
    items: list[Any] = []
    while len(items) < n:
        for raw in raws:
            m = decode_amqp10_message(raw)
            items.extend(decode_v2(m.application_properties, m.body, subject=m.subject,
                                   correlation_id=m.correlation_id).items)
    return items[:n]


def share(items: list[Any], schema_ids: bool) -> None:
    keys: dict[str, str] = {}
    sids: dict[Any, Any] = {}
    for item in items:
        values = item.values
        rebuilt = {keys.setdefault(k, k): v for k, v in values.items()}
        values.clear()
        values.update(rebuilt)
        if schema_ids:
            object.__setattr__(item, "schema_id", sids.setdefault(item.schema_id, item.schema_id))


def held(mode: str, raws: list[bytes], n: int) -> int:
    gc.collect()
    tracemalloc.start()
    items = decode(raws, n)
    if mode != "as decoded":
        share(items, schema_ids=mode == "keys and schema ids shared")
    gc.collect()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del items
    return size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=10000)
    opts = p.parse_args()
    raws = queue_answers()
    out = {}
    for mode in ("as decoded", "keys shared", "keys and schema ids shared"):
        size = held(mode, raws, opts.objects)
        out[mode] = size
        print(f"{mode:28} {size / 2**20:7.1f} MiB  {size / opts.objects:7.0f} B per object")
    print(json.dumps({"objects": opts.objects, "bytes": out}))


if __name__ == "__main__":
    main()
