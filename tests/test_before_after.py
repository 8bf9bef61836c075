"""benchmarks/before_after.py without running a benchmark: its catalogue names scripts
and options this tree has, and its table reads each figure the right way round."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import before_after as ba  # noqa: E402


def test_the_catalogue_names_scripts_and_options_of_this_tree() -> None:
    names = [b.name for b in ba.CATALOGUE]
    assert len(names) == len(set(names))
    for bench in ba.CATALOGUE:
        script = ROOT / bench.script
        assert script.is_file(), bench.script
        for args in (bench.args, bench.tiny):
            assert ba.options_missing(script, args) == [], (bench.name, args)
        if bench.json_option:
            assert ba.options_missing(script, [bench.json_option]) == [], bench.name
        assert (bench.parse is None) != (bench.paired is None), bench.name


def test_an_option_the_script_lacks_is_found(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text('p.add_argument("--count", type=int)\n')
    assert ba.options_missing(script, ["--count", "10", "--calls", "5"]) == ["--calls"]


@pytest.mark.parametrize(("before", "after", "lower", "unit", "change", "ranges"), [
    ([100.0, 102.0], [110.0, 111.0], True, "µs", "9.4% slower", "apart: worse"),
    ([100.0, 102.0], [90.0, 91.0], True, "µs", "10.4% faster", "apart: better"),
    ([100.0, 102.0], [90.0, 91.0], False, "rows/s", "10.4% slower", "apart: worse"),
    ([100.0, 110.0], [105.0, 108.0], True, "ms", "1.4% slower", "overlap"),
    ([400.0, 400.0], [440.0, 440.0], True, "B/object", "10.0% larger", "apart: worse"),
])
def test_a_change_reads_the_figure_the_right_way_round(
        before: list[float], after: list[float], lower: bool, unit: str, change: str,
        ranges: str) -> None:
    m = ba.Measure("x", 0.0, unit, lower_is_better=lower)
    med_b, med_a = sum(before) / 2, sum(after) / 2
    assert ba._change(med_b, med_a, m) == change
    assert ba._ranges(before, after, m) == ranges


def test_the_default_set_and_the_selection() -> None:
    opts = ba.argparse.Namespace(only="", skip="exporter", set="default")
    chosen = [b.name for b in ba.select(opts)]
    assert "exporter" not in chosen and "echo" in chosen and "load_storm" not in chosen
    opts = ba.argparse.Namespace(only="load_storm,echo", skip="", set="default")
    assert [b.name for b in ba.select(opts)] == ["echo", "load_storm"]
    with pytest.raises(SystemExit):
        ba.select(ba.argparse.Namespace(only="nope", skip="", set="default"))
