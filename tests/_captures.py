"""Loading of the real qpidd 1.40 QMF v1 captures (/work/shared/captures/*.jsonl)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).parents[1] / ".." / "shared" / "captures"


def load_records() -> list[dict[str, Any]]:
    """Every record of every capture file, in file then capture order.

    Each record gets ``_file``, ``_line`` and ``_body`` (the decoded bytes).

    Raises:
        FileNotFoundError: the capture directory holds no ``*.jsonl`` file.
    """
    files = sorted(CAPTURES.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no capture files (*.jsonl) under {CAPTURES.resolve()}; the codec tests need "
            "/work/shared/captures (qpidd-1.40-qmf1.jsonl, qpidd-1.40-agent-attach.jsonl)")
    records = []
    for path in files:
        with path.open() as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                rec = json.loads(line)
                rec["_file"] = path.name
                rec["_line"] = lineno
                rec["_body"] = base64.b64decode(rec["body_b64"])
                records.append(rec)
    return records
