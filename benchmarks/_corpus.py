"""Shared set-up of the codec benchmarks: the real qpidd 1.40 captures as a corpus.

Not a benchmark itself; ``decode.py`` and ``encode.py`` import it.
"""

from __future__ import annotations

import base64
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from qmf_async import wire  # noqa: E402

DEFAULT_CAPTURES = ROOT / ".." / "shared" / "captures"
FAMILIES = ("g", "c", "i")


def load(captures: Path = DEFAULT_CAPTURES) -> tuple[wire.SchemaRegistry, list[bytes]]:
    """Every capture body fed through one registry (so all schemas are known), and
    the ``in`` bodies that carry content records (g, c, i), in capture order."""
    files = sorted(Path(captures).glob("*.jsonl"))
    if not files:
        sys.exit(f"no capture files under {Path(captures).resolve()}")
    registry = wire.SchemaRegistry()
    content: list[bytes] = []
    for path in files:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            body = base64.b64decode(rec["body_b64"])
            msgs = wire.decode(body, registry)
            registry.learn(msgs)
            if rec["dir"] == "in" and all(m.OPCODE in FAMILIES for m in msgs):
                content.append(body)
    return registry, content


def by_family(registry: wire.SchemaRegistry, bodies: list[bytes]) -> dict[str, list[bytes]]:
    """Corpora per opcode: ``all`` (the bodies as captured) and one per family, made
    of the same bodies keeping only that opcode's records (the packing is kept)."""
    out: dict[str, list[bytes]] = {"all": list(bodies)}
    for fam in FAMILIES:
        out[fam] = []
    for body in bodies:
        msgs = wire.decode(body, registry)
        for fam in FAMILIES:
            part = [m for m in msgs if m.OPCODE == fam]
            if part:
                out[fam].append(wire.encode(part, registry))
    return out


def count_objects(registry: wire.SchemaRegistry, bodies: list[bytes]) -> int:
    return sum(len(wire.decode(b, registry)) for b in bodies)


#: Clocks for the timed rounds.  ``cpu`` (the default) is the CPU time of this
#: process: objects per CPU-second on one core, not skewed by other processes on a
#: shared machine.  ``wall`` is elapsed time.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def rate(fn: Callable[[], Any], objects: int, seconds: float, clock: str = "cpu") -> float:
    """Objects per second of one timed round: ``fn`` (one pass over a corpus of
    ``objects`` records) repeated for at least ``seconds`` of ``clock``."""
    now_fn = CLOCKS[clock]
    passes = 0
    start = now_fn()
    deadline = start + seconds
    while True:
        fn()
        passes += 1
        now = now_fn()
        if now >= deadline:
            return passes * objects / (now - start)


def add_common_args(ap: Any) -> None:
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="approximate total timing budget in seconds (default 10)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds; the best is kept")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                    help="cpu: process CPU time (default); wall: elapsed time")
    ap.add_argument("--captures", type=Path, default=DEFAULT_CAPTURES,
                    help="directory of the *.jsonl captures")


def machine() -> str:
    return (f"{platform.python_implementation()} {platform.python_version()} on "
            f"{platform.system()} {platform.machine()}, nproc={os.cpu_count()}, "
            f"cpu: {_cpu_model()}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
