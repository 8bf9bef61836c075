"""Decode throughput of QMF v2 object answers captured from qpidd 1.40.

    python benchmarks/v2_decode.py [--rounds 5] [--seconds 2]

The messages are qpidd's own ``_query_response`` and ``_data_indication`` messages with
objects (tests/data/qmf2/qpidd-1.40-v2.jsonl), whole AMQP 1.0 encoded messages as they
come off a link.  Three paths, interleaved round by round, each the best of
``--rounds`` rounds in objects per second of process CPU time:

- ours: ``decode_amqp10_message`` then ``decode_v2`` (V2Data values with ids and schema
  ids parsed);
- ours, envelope only: ``decode_amqp10_message`` (the maps as Python dicts);
- proton: ``proton.Message.decode`` and ``.body`` (the maps as Python dicts), what a
  raw proton client does.
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "tests" / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"


def load() -> list[tuple[bytes, int]]:
    """(encoded message, objects in it) for every captured message carrying objects."""
    from qmf_async.wire import decode_amqp10_message

    found = []
    for line in CAPTURE.read_text().splitlines():
        record = json.loads(line)
        props = record.get("application_properties") or {}
        if props.get("qmf.content") != "_data" or props.get("qmf.opcode") not in (
                "_query_response", "_data_indication"):
            continue
        raw = base64.b64decode(record["message_b64"])
        body = decode_amqp10_message(raw).body
        if isinstance(body, list) and body:
            found.append((raw, len(body)))
    if not found:
        raise SystemExit(f"no object messages in {CAPTURE}")
    return found


def rate(run: Callable[[], None], objects: int, seconds: float) -> float:
    start = time.process_time()
    n = 0
    while True:
        run()
        n += 1
        spent = time.process_time() - start
        if spent >= seconds:
            return n * objects / spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()

    try:  # the baseline: python-qpid-proton, where installed (no extra installs it)
        import proton
    except ImportError:
        proton = None

    from qmf_async.wire import decode_amqp10_message, decode_v2

    messages = load()
    objects = sum(n for _, n in messages)

    def ours() -> None:
        for raw, _ in messages:
            msg = decode_amqp10_message(raw)
            decode_v2(msg.application_properties, msg.body, subject=msg.subject,
                      correlation_id=msg.correlation_id)

    def envelope() -> None:
        for raw, _ in messages:
            decode_amqp10_message(raw)

    def raw_proton() -> None:
        for raw, _ in messages:
            m = proton.Message()
            m.decode(raw)
            _ = m.body

    paths: dict[str, Callable[[], None]] = {
        "ours (envelope + v2 values)": ours, "ours (envelope only)": envelope}
    if proton is not None:
        paths["proton.Message"] = raw_proton
    best: dict[str, float] = {name: 0.0 for name in paths}
    for _ in range(args.rounds):
        for name, run in paths.items():
            best[name] = max(best[name], rate(run, objects, args.seconds))
    result: dict[str, Any] = {"messages": len(messages), "objects": objects,
                              "objects_per_cpu_second": {k: round(v) for k, v in best.items()}}
    base = best.get("proton.Message")
    for name, value in best.items():
        versus = f"   {value / base:5.2f}x proton" if base else ""
        print(f"{name:30} {value:10,.0f} objects/s{versus}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
