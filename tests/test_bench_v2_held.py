"""``benchmarks/v2_held.py`` at a tiny size, no broker: its three designs for a held
QMF v2 object (the v1 record, the dict, converted tuples) read the same values for the
same object, whole and with a statistics update merged, and the run reports every
figure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import v2_held  # noqa: E402


def test_a_tiny_run_reports_every_figure_and_the_designs_agree() -> None:
    result = v2_held.main(["--rounds", "1", "--seconds", "0.005", "--objects", "120",
                           "--memory-objects", "120"])
    # main checks first that the three designs read the same values (every element
    # of every object, whole and merged)
    assert result["values_compared"] > 120 * 50
    for name, per_design in result["cpu_us"].items():
        assert per_design["A"] and all(x > 0 for xs in per_design.values() for x in xs), name
    for design in ("A", "B", "C"):
        assert set(result["memory_bytes"][design]) == {"whole", "merged", "proxy"}
        assert result["memory_bytes"][design]["whole"] > 0


def test_a_statistics_update_alone_reads_as_todays_proxy() -> None:
    """An object first seen through a statistics update (nothing held): its properties
    were not received, in every design."""
    w = v2_held.Workload(3)
    upd_rec, upd = w.upd_a[0], w.updates[0]
    a = w.proxy_a(upd_rec, upd_rec.raw, upd_rec.sofs, "i")
    oid, kind = w.b.ingest(upd, v2_held.BANKS)
    b = w.b.make(upd.values, kind, oid, v2_held._times(upd), v2_held._STATS)
    x = w.c.ingest(upd, v2_held.BANKS)
    c = w.c.make(x[5], x[1], x[2], x[3], v2_held._STATS, x[4])
    for proxy in (a, b, c):
        with pytest.raises(AttributeError):
            proxy.name  # noqa: B018
        assert proxy.get("name") is None
        assert proxy.msgDepth == a.msgDepth
    assert a.values() == b.values() == c.values()
